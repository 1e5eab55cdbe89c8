"""The tape: a Yota.jl-style list of the calls a traced function made, with example values.

    Tape for loss (model.py:9)
      inp %1::Linear
      inp %2::f64[4,5]
      %3 = getattr(%1, "W")::f64[3,4]
      %4 = matmul(%3, %2)::f64[3,5]  # model.py:10
      ...
      guard bool(%9) == True  # model.py:12
      return %8
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any

from yota.ir.types import TensorType


@dataclass(frozen=True)
class Loc:
    """A place in the user's code."""

    file: str
    line: int
    func: str = ""

    def __str__(self) -> str:
        return f"{os.path.basename(self.file)}:{self.line}"

    def source_line(self) -> str:
        import linecache

        return linecache.getline(self.file, self.line).strip()

    def describe(self) -> str:
        src = self.source_line()
        where = f"{self} in {self.func}" if self.func else str(self)
        return f"{where}: {src}" if src else where


@dataclass(eq=False)
class Var:
    """A tape variable, printed ``%id``; ``type`` is None for structure inputs."""

    id: int
    type: TensorType | None
    weak: bool = False

    def __repr__(self) -> str:
        return f"%{self.id}"


@dataclass(eq=False)
class Entry:
    """One tape entry.

    kinds: ``input`` (an argument), ``getattr``/``getitem`` (field access into a structure
    input), ``call`` (a NumPy-level operation, looked up by ``fn`` in the NumPy → IR
    table, or a primitive), ``const`` (a small array used as a constant), ``captured``
    (a large array from a closure or global, read at call time), ``guard``.
    """

    kind: str
    outs: list[Var]
    fn: str = ""
    args: tuple[Any, ...] = ()
    kwargs: dict[str, Any] = field(default_factory=dict)
    value: Any = None
    loc: Loc | None = None
    extra: Any = None


class Tape:
    """The entries of one trace, its inputs' structure and its result."""

    def __init__(self, fname: str, loc: Loc | None = None) -> None:
        self.fname = fname
        self.loc = loc
        self.entries: list[Entry] = []
        self.nvars = 0
        self.result: Any = None  # the output structure, with Vars for traced leaves
        self.arg_treedefs: list[Any] = []
        self.leaf_vars: list[tuple[int, tuple[Any, ...], Var]] = []  # (arg, path, var)
        self.captured: list[Entry] = []
        self.argnames: list[str] = []
        self.bound_consts: list[tuple[Any, dict[str, Any], str]] = []  # (array, globals, name)
        self._ir: dict[tuple[Any, ...], Any] = {}

    def new_var(self, type: TensorType | None, weak: bool = False) -> Var:
        self.nvars += 1
        return Var(self.nvars, type, weak)

    def add(self, entry: Entry) -> Entry:
        self.entries.append(entry)
        return entry

    def release_values(self) -> None:
        """Drop the example values of intermediate entries (a cached program keeps its
        tape; the values would keep every activation of the first call alive). Inputs,
        constants and captured arrays stay: replays need them."""
        for e in self.entries:
            struct = e.kind in ("getattr", "getitem") and e.outs[0].type is None
            if e.kind in ("call", "getattr", "getitem") and not struct:  # a structure
                e.value = None  # node is part of an input, and the printer shows its type
                if isinstance(e.extra, tuple):  # a primitive's example arguments
                    e.extra = (e.extra[0], None)

    def bindings_hold(self) -> bool:
        """False when a global name whose array became a constant now names another."""
        return all(scope.get(name) is arr for arr, scope, name in self.bound_consts)

    @property
    def guards(self) -> list[Entry]:
        return [e for e in self.entries if e.kind == "guard"]

    def __len__(self) -> int:
        return len(self.entries)

    def __str__(self) -> str:
        from .tape_print import format_tape

        return format_tape(self)

    def __repr__(self) -> str:
        return f"<Tape of {self.fname}: {len(self.entries)} entries>"

    def to_ir(self, name: str | None = None) -> Any:
        """The typed IR of this tape: structure access resolved to input leaves and NumPy
        calls canonicalized to IR ops (see ``yota.numpy_map``)."""
        from .lowering import tape_to_ir

        # Lowered once (IR functions are immutable): a primitive's body is traced again
        # from its example arguments, which release_values drops after the first lowering.
        key = (name, tuple(self.argnames))
        if key not in self._ir:
            self._ir[key] = tape_to_ir(self, name)
        return self._ir[key]

