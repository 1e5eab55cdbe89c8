"""Random NumPy programs of creations, views, writes and reads, for differential tests of
Yota's in-place writes (``test_inplace.py``), in the spirit of ``irgen``.

A program is the Python source of ``f(x)`` (``x`` a float64 vector of ``N`` elements):

- creations: ``np.zeros``/``np.ones``/``np.full``, ``x[i:j].reshape(...) * c`` (a new
  array: never a view of the argument), ``a.copy()``, arithmetic on arrays;
- views: basic slices (negative steps, integer indices, ``None``, ``...``), ``.T``,
  ``reshape`` and ``ravel`` (a view when NumPy can make one), ``np.swapaxes``,
  ``np.expand_dims``;
- writes: ``a[key] = v``, ``a[key] += v`` (``-=``, ``*=``) with basic and integer-array
  keys (repeats included), ``a[a > c] = v`` and ``a[mask] *= c`` with traced masks,
  ``np.add.at`` with repeated indices, whole-array ``a += b``;
- reads: new arrays computed from others (``a[key] * c``, ``a + b``).

While generating, every statement runs on example values, and is kept only if NumPy
accepts it, so the programs are valid NumPy. The function returns every array it made
(views included), so a run through Yota can be compared with plain NumPy exactly.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

N = 64  # the input vector's length


class WriteGen:
    def __init__(self, rng: np.random.Generator, steps: int) -> None:
        self.rng = rng
        self.steps = steps
        self.env: dict[str, Any] = {"np": np, "x": rng.uniform(-1, 1, N)}
        self.lines: list[str] = []
        self.names: list[str] = []

    # -- helpers --------------------------------------------------------------------------
    def _int(self, lo: int, hi: int) -> int:
        return int(self.rng.integers(lo, hi))

    def _pick(self) -> str:
        return self.names[self._int(0, len(self.names))]

    def _shape(self) -> tuple[int, ...]:
        return tuple(self._int(1, 5) for _ in range(self._int(1, 4)))

    def _x_block(self, shape: tuple[int, ...]) -> str:
        n = int(np.prod(shape))
        i = self._int(0, N - n + 1)
        return f"x[{i}:{i + n}].reshape({shape})"

    def _value_for(self, shape: tuple[int, ...]) -> str:
        """A traced value that broadcasts to ``shape``: a scalar or a block of x."""
        k = self._int(0, 4)
        if k == 0 or not shape:
            return f"x[{self._int(0, N)}]"
        if k == 1:
            return f"{self.rng.choice([0.5, -2.0, 3.0])}"
        if k == 2 and len(shape) > 1:
            return self._x_block(shape[-1:])  # broadcast over the leading axes
        return self._x_block(shape)

    def _basic_key(self, shape: tuple[int, ...]) -> str:
        parts = []
        for d in shape:
            k = self._int(0, 5)
            if k == 0:
                parts.append(str(self._int(-d, d)))
            elif k == 1:
                a, b = sorted((self._int(0, d + 1), self._int(0, d + 1)))
                parts.append(f"{a}:{b}")
            elif k == 2:
                parts.append(f"::{self.rng.choice([-1, 2, -2])}")
            elif k == 3 and self.rng.random() < 0.3:
                parts.append("None, :")
            else:
                parts.append(":")
        if parts and self.rng.random() < 0.2:
            parts[self._int(0, len(parts))] = "..."
        return ", ".join(parts) if parts else "..."

    def _array_key(self, shape: tuple[int, ...]) -> str:
        ax = self._int(0, len(shape))
        d = shape[ax]
        idx = [self._int(-d, d) for _ in range(self._int(1, 4))]
        head = [":"] * ax
        return ", ".join(head + [str(idx)])

    def _try(self, line: str, new: str | None = None) -> bool:
        env = dict(self.env)
        try:
            with np.errstate(all="ignore"):
                exec(line, env)
        except (IndexError, ValueError, TypeError):
            return False
        if new is not None:
            v = env[new]
            if not isinstance(v, np.ndarray) or v.size == 0 or not np.all(np.isfinite(v)):
                return False
        for v in env.values():  # writes happened in place; new names appear
            if isinstance(v, np.ndarray) and not np.all(np.isfinite(v)):
                return False
        self.env = env
        self.lines.append(line)
        if new is not None:
            self.names.append(new)
        return True

    # -- statements -----------------------------------------------------------------------
    def create(self) -> None:
        name = f"a{len(self.names)}"
        shape = self._shape()
        k = self._int(0, 5)
        if k == 0:
            fn = self.rng.choice(["zeros", "ones"])
            expr = f"np.{fn}({shape})"
        elif k == 1:
            expr = f"np.full({shape}, {self.rng.choice([1.5, -0.5])})"
        elif k == 2 or not self.names:
            expr = f"{self._x_block(shape)} * {self.rng.choice([1.0, 2.0, -0.5])}"
        elif k == 3:
            expr = f"{self._pick()}.copy()"
        else:
            a = self._pick()
            expr = f"{a} * {self.rng.choice([2.0, 0.5])} + {self._value_for(self.env[a].shape)}"
        self._try(f"{name} = {expr}", name)

    def view(self) -> None:
        a = self._pick()
        shape = self.env[a].shape
        name = f"a{len(self.names)}"
        k = self._int(0, 6)
        if k == 0 or len(shape) < 2:
            expr = f"{a}[{self._basic_key(shape)}]"
        elif k == 1:
            expr = f"{a}.T"
        elif k == 2:
            expr = f"{a}.reshape(-1)" if self.rng.random() < 0.5 else f"{a}.ravel()"
        elif k == 3:
            expr = f"np.swapaxes({a}, 0, {len(shape) - 1})"
        elif k == 4:
            expr = f"np.expand_dims({a}, {self._int(0, len(shape) + 1)})"
        else:
            expr = f"{a}.reshape({shape[::-1]})"
        self._try(f"{name} = {expr}", name)

    def write(self) -> None:
        a = self._pick()
        shape = self.env[a].shape
        op = self.rng.choice(["=", "=", "+=", "-=", "*="])
        key = self._array_key(shape) if self.rng.random() < 0.3 else self._basic_key(shape)
        try:
            region = self.env[a][eval(f"np.s_[{key}]", {"np": np})].shape
        except (IndexError, ValueError, TypeError):
            return
        self._try(f"{a}[{key}] {op} {self._value_for(region)}")

    def write_mask(self) -> None:
        a = self._pick()
        c = float(self.rng.choice([0.0, 0.3, -0.3]))
        if self.rng.random() < 0.5:
            self._try(f"{a}[{a} > {c}] = x[{self._int(0, N)}]")
        else:
            self._try(f"{a}[{a} < {c}] *= {self.rng.choice([2.0, -1.0])}")

    def add_at(self) -> None:
        a = self._pick()
        d = self.env[a].shape[0]
        idx = [self._int(-d, d) for _ in range(self._int(1, 5))]
        fn = self.rng.choice(["add", "subtract"])
        self._try(f"np.{fn}.at({a}, {idx}, x[{self._int(0, N)}])")

    def whole(self) -> None:
        a, b = self._pick(), self._pick()
        op = self.rng.choice(["+=", "-=", "*="])
        self._try(f"{a} {op} {b}")

    def read(self) -> None:
        a = self._pick()
        name = f"a{len(self.names)}"
        self._try(f"{name} = {a}[{self._basic_key(self.env[a].shape)}] * 2.0", name)

    def program(self) -> str:
        self.create()
        while not self.names:
            self.create()
        steps: list[Callable[[], None]] = [self.create, self.view, self.view, self.write,
                                           self.write, self.write, self.write_mask,
                                           self.add_at, self.whole, self.read]
        for _ in range(self.steps):
            steps[self._int(0, len(steps))]()
        body = "\n".join("    " + line for line in self.lines)
        return f"def f(x):\n{body}\n    return ({', '.join(self.names)},)\n"


def random_program(seed: int, steps: int = 12) -> tuple[str, Callable[..., Any]]:
    """The source of a random program and the function it defines."""
    src = WriteGen(np.random.default_rng(seed), steps).program()
    env: dict[str, Any] = {"np": np}
    exec(compile(src, f"<writegen {seed}>", "exec"), env)
    return src, env["f"]
