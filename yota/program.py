"""A traced program ready to run on new arguments of the same signature.

It maps arguments to the IR's inputs (the dynamic leaves, then captured values), checks
that what the function read from outside its arguments still holds (``check``: the reads
of ``yota.captured``, by one generated function per program, ``yota.guards``; and the
small constant arrays met elsewhere in user code, compared with their copies), and runs
the compiled IR.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from yota.ir.core import Function

from . import structs
from .captured import Read, same_function
from .guards import Checker, anchored, changed
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

    __slots__ = ("tape", "_fn", "_text", "exe", "consts", "facts",
                 "unpack_plan", "fast", "variants", "checker", "shareable", "why",
                 "_anchored")

    def __init__(self, tape: Tape, fn: Function | str, exe: Any,
                 consts: list[tuple[Any, np.ndarray]] | None = None,
                 captured: list[tuple[Any, dict[str, Any] | None, str]] | None = None,
                 facts: dict[str, Any] | None = None) -> None:
        self.tape, self.exe = tape, exe
        self._fn: Function | None = fn if isinstance(fn, Function) else None
        self._text: str | None = fn if isinstance(fn, str) else None
        self.consts = consts if consts is not None else []  # (captured: read from the tape)
        self.facts = facts
        self.unpack_plan: Any = None  # set by yota.grad on the first call
        self.fast: Any = None  # yota.grad's generated call path, once built
        self.variants: Any = None  # the yota.grad variants it belongs to (retrace count)
        inputs = {id(r.entry): r for r in tape.reads if r.mode == "input"}
        self.checker = Checker(tape.reads, [inputs.get(id(e), e.value) for e in tape.captured])
        # reused for another function object with the same code (equal captured values):
        # only when every value read from outside is re-read from the function called
        self.shareable = not (tape.held or self.consts or tape.bound_consts)
        self.why = "traced"  # why this variant exists (yota.explain)
        self._anchored: Checker | None = None  # the checks without the function

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

    @property
    def captured(self) -> list[tuple[Any, dict[str, Any] | None, str]]:
        """The captured inputs, after the arguments' leaves: ``(value, globals, name)``,
        each value as the program reads it now (from the traced function)."""
        got = self.check()
        values = got if isinstance(got, list) else [e.value for e in self.tape.captured]
        return [(v, *self._names(e)) for v, e in zip(values, self.tape.captured, strict=True)]

    @staticmethod
    def _names(e: Any) -> tuple[Any, str]:
        extra = e.extra if isinstance(e.extra, tuple) else (None, "")
        return extra[0], extra[1]

    def check(self, f: Any = None, strict: bool = True) -> list[Any] | Stale:
        """The captured inputs to run with when everything the function read from outside
        its arguments still holds for function ``f`` (default: the traced one), else
        ``Stale`` saying what changed. ``strict``: a program holding arrays that are not
        re-read (not ``shareable``) holds only for the function it was traced from."""
        traced = self.tape.function() if self.tape.function is not None else None
        if f is None:
            f = traced
        elif strict and not self.shareable and (traced is None or
                                                not same_function(f, traced)):
            return Stale("a new function object with the same code (its closure or "
                         "globals hold arrays that are not re-read at each call)")
        checker = self.checker if f is not None else self._without_function()
        got = checker(f)
        if isinstance(got, int):
            r = self.tape.reads[got]
            return Stale(f"{r.describe()} {changed(checker.reads[got], f)}", r)
        if self.consts or self.tape.bound_consts or self.tape.held:
            stale = self._held_stale()
            if stale is not None:
                return stale
        return got

    def _without_function(self) -> Checker:
        """The checks from the reads' anchors (the traced function is gone)."""
        if self._anchored is None:
            reads = anchored(self.tape.reads)
            same = {id(a): b for a, b in zip(self.tape.reads, reads, strict=True)}
            self._anchored = Checker(reads, [same.get(id(c), c) if isinstance(c, Read) else c
                                             for c in self.checker.captured])
        return self._anchored

    def _held_stale(self) -> Stale | None:
        for obj, snapshot in self.consts:
            if obj.shape != snapshot.shape or not np.array_equal(obj, snapshot, equal_nan=True):
                return Stale(f"an array of {list(obj.shape)} from outside the function "
                             "changed in place")
        if not self.tape.bindings_hold():
            return Stale("a global that held an array used as a constant was rebound")
        for e in self.tape.captured:
            scope, name = self._names(e)
            if scope is not None and scope.get(name) is not e.value:
                return Stale(f"global {name} (an array read at each call) was rebound")
        return None

    def still_valid(self, f: Any = None) -> bool:
        """False when something the function read from outside changed (``check``)."""
        return not isinstance(self.check(f), Stale)

    def run(self, leaves: list[Any], *, traced_draws: bool = False,
            captured: list[Any] | None = None) -> list[np.ndarray]:
        """Run on the arguments' dynamic leaves (see ``flatten_args``) and ``captured``
        (``check``'s inputs; default: checked now). Random numbers are drawn again first
        (``yota.randomness``), unless ``traced_draws``: then the run uses the numbers
        drawn while tracing (the first run of a program just traced)."""
        if self.tape.captured:
            if captured is None:
                got = self.check()
                captured = got if isinstance(got, list) else [e.value for e in
                                                              self.tape.captured]
            leaves = leaves + captured
        if self.tape.randoms:
            leaves = leaves + (self.tape_draws() if traced_draws else self.tape.draws.replay())
        return self.exe(*leaves)

    def tape_draws(self) -> list[np.ndarray]:
        """The numbers drawn while tracing."""
        return [e.value for e in self.tape.randoms]

    def __call__(self, args: Sequence[Any], *, traced_draws: bool = False
                 ) -> list[np.ndarray]:
        return self.run(flatten_args(args)[0], traced_draws=traced_draws)


class Stale:
    """Why a program cannot be reused: ``reason`` (a sentence), and the ``read`` that no
    longer holds (None for other causes)."""

    __slots__ = ("reason", "read")

    def __init__(self, reason: str, read: Read | None = None) -> None:
        self.reason, self.read = reason, read

    def __repr__(self) -> str:
        return f"Stale({self.reason!r})"
