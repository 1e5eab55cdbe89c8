"""The tape: a Yota.jl-style list of the calls a traced function made, with example values.

    Tape for loss (model.py:9)
      inp %1::Linear
      inp %2::f64[4,5]
      %3 = getattr(%1, "W")::f64[3,4]
      %4 = matmul(%3, %2)::f64[3,5]  # model.py:10
      ...
      guard bool(%9) == True  # model.py:12
      return %8

``str(tape)`` prints it (``format_tape``); ``yota.lowering.to_ir(tape)`` lowers it to IR.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any

import numpy as np

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
    (a large array from a closure or global, read at call time), ``random`` (numbers
    drawn from a generator, drawn again at every call: ``yota.randomness``), ``guard``.
    """

    kind: str
    outs: list[Var]
    fn: str = ""
    args: tuple[Any, ...] = ()
    kwargs: dict[str, Any] = field(default_factory=dict)
    value: Any = None
    loc: Loc | None = None
    extra: Any = None


@dataclass(eq=False)
class Inlined:
    """The ``extra`` of a ``call`` entry that runs a program built by a nested trace (a
    ``yota.grad``, ``yota.trace`` or compiled function called inside a traced function):
    ``fn`` is its IR (the inputs: the nested tape's leaves, then its captured arrays),
    inlined op by op when this tape is lowered, so it is differentiated again; ``tape``
    is the nested tape (its guards become guards of this one)."""

    fn: Any  # yota.ir.core.Function
    tape: Tape
    what: str  # "grad", "trace", "compile" or "simplegrad"


class Tape:
    """The entries of one trace, its inputs' structure and its result."""

    def __init__(self, fname: str, loc: Loc | None = None) -> None:
        self.fname = fname
        self.loc = loc
        self.entries: list[Entry] = []
        self.nvars = 0
        self.result: Any = None  # the output structure, with Vars for traced leaves
        self.arg_treedefs: list[Any] = []
        self.leaf_vars: list[tuple[int, tuple[Any, ...], Var | None]] = []  # (arg, path, var)
        self.captured: list[Entry] = []
        self.randoms: list[Entry] = []  # draws, inputs after the captured arrays
        self.draws: Any = None  # the random events to replay (yota.randomness.Draws)
        self.argnames: list[str] = []
        self.bound_consts: list[tuple[Any, dict[str, Any], str]] = []  # (array, globals, name)
        # IR lowered from this tape by (name, argnames): filled by yota.lowering.to_ir
        self.lowered: dict[tuple[Any, ...], Any] = {}
        self.foreign_tracers: dict[Var, Any] = {}  # captured values of enclosing traces
        self.ir_values: dict[Var, Any] = {}  # Var -> its IR value in to_ir(tape)
        self.has_aux = False
        self.checkpoint: Any = "auto"  # which loops' gradients are checkpointed
        self.wrt: tuple[int, ...] | None = None  # the arguments differentiated (None: all)
        # values read from outside the arguments (yota.captured.Read), checked per call
        self.reads: list[Any] = []
        self.function: Any = None  # the traced function, weakly (yota.captured.handle)
        self.held = False  # arrays from user code not found by a read: held, not re-read
        self.value_shape: tuple[int, ...] | None = None  # a loss of one element: its shape

    def new_var(self, type: TensorType | None, weak: bool = False) -> Var:
        self.nvars += 1
        return Var(self.nvars, type, weak)

    def add(self, entry: Entry) -> Entry:
        self.entries.append(entry)
        return entry

    def release_values(self) -> None:
        """Drop the example values of intermediate entries (a cached program keeps its
        tape; the values would keep every activation of the first call alive). Inputs,
        constants, captured arrays and draws stay: replays need them."""
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
        """The guard entries in the order lowering emits their ``guard`` ops: those of an
        inlined nested program (``Inlined``) at its entry's place."""
        out: list[Entry] = []
        for e in self.entries:
            if e.kind == "guard":
                out.append(e)
            elif isinstance(e.extra, Inlined):
                out += e.extra.tape.guards
        return out

    def __len__(self) -> int:
        return len(self.entries)

    def __str__(self) -> str:
        return format_tape(self)

    def __repr__(self) -> str:
        return f"<Tape of {self.fname}: {len(self.entries)} entries>"


# -- printing ----------------------------------------------------------------------------
def format_static(x: Any) -> str:
    if isinstance(x, Var):
        return repr(x)
    if isinstance(x, slice):
        parts = ["" if v is None else format_static(v) for v in (x.start, x.stop, x.step)]
        return ":".join(parts[:2]) + (f":{parts[2]}" if x.step is not None else "")
    if x is Ellipsis:
        return "..."
    if isinstance(x, tuple):
        inner = ", ".join(format_static(v) for v in x)
        return f"({inner},)" if len(x) == 1 else f"({inner})"
    if isinstance(x, list):
        return "[" + ", ".join(format_static(v) for v in x) + "]"
    if isinstance(x, np.dtype):
        return f"np.{x}"
    if isinstance(x, type):
        return x.__name__
    if isinstance(x, np.ndarray):
        text = np.array2string(x, threshold=6, separator=", ", max_line_width=10**6)
        return f"array({text.replace(chr(10), '')})"  # one line per tape entry
    return repr(x)


def _type_str(v: Var, value: Any) -> str:
    if v.type is not None:
        return str(v.type) + ("{weak}" if v.weak else "")
    return type(value).__name__


def format_entry(e: Entry) -> str:
    outs = ", ".join(repr(v) for v in e.outs)
    if e.kind == "input":
        line = f"inp {outs}::{_type_str(e.outs[0], e.value)}"
    elif e.kind == "guard":
        line = f"guard {e.extra['kind']}({e.args[0]!r}) == {e.extra['expected']!r}"
    elif e.kind == "const":
        line = f"{outs} = const({format_static(e.value)})::{e.outs[0].type}"
    elif e.kind == "captured":
        line = f"{outs} = captured({e.extra[1]})::{e.outs[0].type}"
    elif e.kind == "random":
        args = [format_static(a) for a in e.args]
        args += [f"{k}={format_static(v)}" for k, v in e.kwargs.items()]
        line = f"{outs} = random.{e.fn}({', '.join(args)})::{e.outs[0].type}"
    else:
        args = [format_static(a) for a in e.args]
        args += [f"{k}={format_static(v)}" for k, v in e.kwargs.items()]
        types = ", ".join(_type_str(v, val) for v, val in zip(e.outs, _values(e), strict=True))
        line = f"{outs} = {e.fn}({', '.join(args)})::{types}"
    if e.loc is not None:
        line += f"  # {e.loc}"
    return line


def _values(e: Entry) -> list[Any]:
    if e.value is None:
        return [None] * len(e.outs)
    return list(e.value) if len(e.outs) > 1 else [e.value]


def format_tape(tape: Tape) -> str:
    head = f"Tape for {tape.fname}" + (f" ({tape.loc})" if tape.loc else "")
    lines = [head] + ["  " + format_entry(e) for e in tape.entries]
    lines.append("  return " + format_static(tape.result))
    return "\n".join(lines)
