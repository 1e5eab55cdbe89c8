"""A traced program ready to run on new arguments of the same signature.

It maps arguments to the IR's inputs (the dynamic leaves, then captured arrays), checks
that small constant arrays taken from user code did not change and that captured globals
were not rebound (either triggers a retrace), and runs the compiled IR.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from yota.ir.core import Function

from . import structs
from .tape import Tape


def signature(args: Sequence[Any]) -> tuple[Any, ...]:
    """The cache key of an argument list: structure, static values, leaf dtypes and shapes."""
    return flatten_args(args)[1]


def flatten_args(args: Sequence[Any]) -> tuple[list[Any], tuple[Any, ...]]:
    """The dynamic leaves of all arguments, in order, and the signature: one walk."""
    leaves: list[Any] = []
    defs = []
    for a in args:
        found, treedef = structs.flatten(a)
        leaves.extend(v for _, v in found)
        defs.append(treedef)
    return leaves, tuple(defs)


class Program:
    """A compiled program and the tape it was traced from.

    ``fn`` is the IR that runs (after differentiation and optimization). A program
    loaded from the on-disk cache by its traced key (``yota.cache``) was never built in
    this process: it holds the printed IR instead, parsed the first time ``fn`` is read,
    and ``facts`` (``grads``: the differentiated inputs, ``guards``: how many guard ops),
    which is all a call needs."""

    __slots__ = ("tape", "_fn", "_text", "exe", "consts", "captured", "facts",
                 "unpack_plan", "fast", "variants")

    def __init__(self, tape: Tape, fn: Function | str, exe: Any,
                 consts: list[tuple[Any, np.ndarray]] | None = None,
                 captured: list[tuple[Any, dict[str, Any] | None, str]] | None = None,
                 facts: dict[str, Any] | None = None) -> None:
        self.tape, self.exe = tape, exe
        self._fn: Function | None = fn if isinstance(fn, Function) else None
        self._text: str | None = fn if isinstance(fn, str) else None
        self.consts = consts if consts is not None else []
        self.captured = captured if captured is not None else []
        self.facts = facts
        self.unpack_plan: Any = None  # set by yota.grad on the first call
        self.fast: Any = None  # yota.grad's generated call path, once built
        self.variants: Any = None  # the yota.grad variants it belongs to (retrace count)

    @classmethod
    def build(cls, tape: Tape, fn: Function | str, exe: Any,
              facts: dict[str, Any] | None = None) -> Program:
        consts = [(e.extra, e.value) for e in tape.entries
                  if e.kind == "const" and isinstance(e.extra, np.ndarray)]
        captured = [(e.value, *e.extra) for e in tape.captured]
        tape.release_values()
        return cls(tape, fn, exe, consts, captured, facts)

    @property
    def fn(self) -> Function:
        """The IR that runs (parsed from its printed text on first use after a load)."""
        if self._fn is None:
            from yota.ir.parser import parse

            assert self._text is not None
            self._fn = parse(self._text)
        return self._fn

    @property
    def fn_known(self) -> bool:
        """Whether ``fn`` is built already (reading it costs nothing)."""
        return self._fn is not None

    @property
    def grads(self) -> tuple[int, ...]:
        """The inputs the program differentiates, in the order of its gradient outputs."""
        if self._fn is None and self.facts is not None:
            return tuple(self.facts["grads"])
        return tuple(self.fn.attrs.get("grads", ()))

    @property
    def guard_count(self) -> int:
        """How many guard ops the program checks."""
        if self._fn is None and self.facts is not None:
            return int(self.facts["guards"])
        return sum(op.name == "guard" for op in self.fn.ops)

    def still_valid(self) -> bool:
        """False when a constant array from user code changed or a global was rebound."""
        if not (self.consts or self.captured or self.tape.bound_consts):
            return True
        for obj, snapshot in self.consts:
            if obj.shape != snapshot.shape or not np.array_equal(obj, snapshot, equal_nan=True):
                return False
        return self.tape.bindings_hold() and all(
            scope is None or scope.get(name) is obj for obj, scope, name in self.captured)

    def run(self, leaves: list[Any], *, traced_draws: bool = False) -> list[np.ndarray]:
        """Run on the arguments' dynamic leaves (see ``flatten_args``). Random numbers
        are drawn again first (``yota.randomness``), unless ``traced_draws``: then the run
        uses the numbers drawn while tracing (the first run of a program just traced)."""
        if self.captured:
            leaves = leaves + [obj for obj, _, _ in self.captured]
        if self.tape.randoms:
            leaves = leaves + (self.tape_draws() if traced_draws else self.tape.draws.replay())
        return self.exe(*leaves)

    def tape_draws(self) -> list[np.ndarray]:
        """The numbers drawn while tracing."""
        return [e.value for e in self.tape.randoms]

    def __call__(self, args: Sequence[Any], *, traced_draws: bool = False
                 ) -> list[np.ndarray]:
        return self.run(flatten_args(args)[0], traced_draws=traced_draws)
