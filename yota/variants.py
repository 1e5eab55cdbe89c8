"""The compiled variants of one function and signature, and why each one exists.

``yota.grad`` and ``yota.compile`` keep, per function (by its code: a lambda made again
with the same code and equal captured values finds the same programs) and argument
signature, up to ``MAX_VARIANTS`` programs, newest first. A call runs the first whose
checks hold (``Program.check``: what the function read from outside its arguments) and
whose guards pass; when none does, the function is traced again, and the retrace says
why (``RetraceWarning``, once per cause; every cause is logged):

- a value read from outside the arguments changed (``global scale read at model.py:12
  changed (2.0 -> 3.0)``). The second time one read changes, it is *promoted*: the next
  trace makes it a run-time input of the program, so later changes compile nothing;
- a Python value taken from a traced array (a guard) went another way;
- new argument shapes, dtypes or static values (a new signature);
- a new function object whose closure or globals hold arrays that are not re-read.

``yota.explain(f)`` lists a function's variants and these reasons.
"""

from __future__ import annotations

import sys
import warnings
import weakref
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from yota.ir.errors import GuardFailed

from . import pipeline
from .cache.config import log
from .captured import Path, Policy
from .program import Program, Stale
from .userloc import _SKIP

RETRACE_WARNING = 5  # consecutive retraces by a guard of one function before a warning
MAX_VARIANTS = pipeline.MAX_VARIANTS


class RetraceWarning(UserWarning):
    """A function was traced again (a captured value changed, a guard failed, a new
    signature): the message names the cause and the user's line."""


@dataclass(eq=False)
class Variants:
    """The programs of one function and signature, and what their retraces taught."""

    programs: list[Program] = field(default_factory=list)
    retraces: int = 0  # consecutive calls that ended in a retrace
    warned: bool = False  # (the guard warning, given once)
    draws: bool = False  # a program draws random numbers: save generator states per call
    changes: dict[Path, int] = field(default_factory=dict)  # retraces caused, per read
    promoted: set[Path] = field(default_factory=set)  # reads that are inputs now
    substitute: bool = True  # False once a trace with substituted inputs failed
    failures: list[tuple[Program, Any]] = field(default_factory=list)  # of the last call
    causes: list[str] = field(default_factory=list)  # why each retrace happened

    def find(self, f: Any, leaves: list[Any], rngs: Any = None,
             restore: Callable[..., None] | None = None, strict: bool = True
             ) -> tuple[Program, list[Any]] | None:
        """The first program whose checks and guards hold for ``f`` at ``leaves`` (the
        arguments' dynamic leaves) and its outputs; None when each failed (``failures``
        says why). ``rngs``: generator states to put back (``restore(*rngs)``) before
        the next program runs, so that each draws the same numbers. ``strict``: a
        program holding arrays that are not re-read only runs for its own function."""
        self.failures = []
        for program in list(self.programs):
            got = program.check(f, strict=strict)
            if isinstance(got, Stale):
                self.failures.append((program, got))
                continue
            try:
                outs = program.run(leaves, captured=got)
            except GuardFailed as e:
                pipeline.stats.guard_failures += 1
                log.info("yota: %s", e)
                self.failures.append((program, e))
                if rngs is not None and restore is not None:
                    restore(*rngs)
                continue
            pipeline.stats.hits += 1
            self.retraces = 0
            program.variants = self
            return program, outs
        return None

    def add(self, program: Program, why: str) -> None:
        """Keep ``program`` (newest first, at most ``MAX_VARIANTS``)."""
        program.why = why
        program.variants = self
        self.programs.insert(0, program)
        del self.programs[MAX_VARIANTS:]
        self.draws = any(p.tape.draws for p in self.programs)

    def policy(self) -> Policy:
        """How the next trace treats what it reads (the promoted reads are inputs)."""
        return Policy(promoted=frozenset(self.promoted), substitute=self.substitute)

    def retrace(self, f: Any, what: str, first: str) -> str:
        """Account for the retrace that is about to happen (``first``: the cause when no
        program failed: the first trace, or a new signature); returns the cause, after
        warning about it once."""
        if not self.failures:
            cause, key = first, ("signature",) if first != "first trace" else None
        else:
            cause, key = self._cause(f, *self.failures[0])
        self.causes = [*self.causes[-31:], cause]  # (the last 32)
        log.info("yota: %s: tracing %s again: %s", what, _name(f), cause)
        if key is not None:
            self._warn(f, what, cause, key)
        return cause

    def _cause(self, f: Any, program: Program, failure: Any) -> tuple[str, Any]:
        if isinstance(failure, GuardFailed):
            self.retraces += 1
            loc = pipeline.guard_loc(program.fn, program.tape, failure)
            where = loc.describe() if loc is not None else "a line of your code"
            cause = (f"the Python value taken from a traced array at {where} (float(), "
                     "int(), bool(), .item() or an if on an array) changed")
            warn = self.retraces >= RETRACE_WARNING and not self.warned
            self.warned = self.warned or warn
            return cause, (("guard", str(loc)) if warn else None)
        read = failure.read
        if read is None:
            return failure.reason, ("stale", failure.reason)
        n = self.changes[read.path] = self.changes.get(read.path, 0) + 1
        if n >= 2 and read.mode in ("eq", "array") and self.substitute and \
                read.path not in self.promoted and _promotable(read):
            self.promoted.add(read.path)
            return (f"{failure.reason} again: it is now a run-time input of the program "
                    "(its later changes compile nothing)"), ("promoted", read.path)
        return failure.reason, ("changed", read.path)

    def _warn(self, f: Any, what: str, cause: str, key: Any) -> None:
        warned = _WARNED.setdefault(_warn_owner(f), set())
        if key in warned:
            return
        warned.add(key)
        advice = _ADVICE.get(key[0], "")
        warnings.warn(f"yota.{what}: {_name(f)} was traced again: {cause}.{advice}",
                      RetraceWarning, stacklevel=user_stacklevel())


_ADVICE = {
    "changed": " A value read from outside the arguments is part of the compiled program "
               "and checked at each call; if it changes again it becomes a run-time input "
               "(pass it as an argument to avoid the retraces).",
    "guard": " Such a value is a constant of the compiled program, checked on each call, "
             "and each new value compiles a new program. Keep it as an array (to log it, "
             "return it as a second output of a wrapper) or compute it outside the "
             "function.",
    "signature": " Each argument signature (structure, static values, dtypes and shapes) "
                 "has its own program.",
    "stale": "",
    "promoted": "",
}
_WARNED: weakref.WeakKeyDictionary[Any, set[Any]] = weakref.WeakKeyDictionary()


def _promotable(read: Any) -> bool:
    import numpy as np

    if not read.promotable:
        return False
    v = read.value
    if read.mode == "array":
        return True
    return isinstance(v, (int, float, np.integer, np.floating)) and not isinstance(
        v, (bool, np.bool_))


def _warn_owner(f: Any) -> Any:
    code = getattr(getattr(f, "__func__", f), "__code__", None)
    if code is not None:
        return code
    try:
        weakref.ref(f)
        return f
    except TypeError:
        return _Anonymous.box


class _Anonymous:
    box: Any = None


_Anonymous.box = _Anonymous()


def _name(f: Any) -> str:
    return str(getattr(f, "__name__", type(f).__name__))


def user_stacklevel() -> int:
    """The ``stacklevel`` of a warning that points at the user's call of Yota."""
    frame = sys._getframe(1)
    level = 1
    while frame is not None and frame.f_code.co_filename.startswith(_SKIP):
        frame = frame.f_back  # type: ignore[assignment]
        level += 1
    return level


def describe_signature_change(old: Any, new: Any, argnames: list[str]) -> str:
    """``new argument shapes, dtypes or static values: x is f64[4] (was f64[3])``."""
    for i, (a, b) in enumerate(zip(old, new, strict=False)):
        if a != b:
            name = argnames[i] if i < len(argnames) else f"argument {i}"
            diff = _first_difference(a, b, name)
            return f"new argument shapes, dtypes or static values: {diff}"
    return "new arguments (their number or structure changed)"


def _first_difference(a: Any, b: Any, where: str) -> str:
    containers = isinstance(a, tuple) and isinstance(b, tuple) and len(a) == 3 and \
        len(b) == 3 and isinstance(a[0], type) and a[0] is b[0]
    if containers and a[1] == b[1]:
        for k, x, y in zip(a[1], a[2], b[2], strict=True):
            if x != y:
                return _first_difference(x, y, f"{where}[{k!r}]")
    if containers:
        return (f"{where} has {len(b[1])} items (was {len(a[1])})" if len(a[1]) != len(b[1])
                else f"{where} has keys {list(b[1])} (was {list(a[1])})")
    return f"{where} is {_leaf_text(b)} (was {_leaf_text(a)})"


def _leaf_text(t: Any) -> str:
    if isinstance(t, tuple) and len(t) == 2 and t[0] == "leaf":
        sig = t[1]
        return "a Python float" if sig == ("float",) else f"{sig[0]}{list(sig[1])}"
    if isinstance(t, tuple) and len(t) == 2 and t[0] == "static":
        key = t[1]
        return repr(key[1]) if isinstance(key, tuple) and len(key) == 2 else "a static value"
    if isinstance(t, tuple) and t and isinstance(t[0], type):
        return f"a {t[0].__name__}"
    return "another structure"


def describe_variants(f: Any, by_key: dict[Any, Variants]) -> list[str]:
    """The lines of ``yota.explain(f)``: per signature, the programs and why each exists."""
    from .validate import argnames

    code = getattr(getattr(f, "__func__", f), "__code__", None)
    where = f" ({code.co_filename.rsplit('/', 1)[-1]}:{code.co_firstlineno})" if code else ""
    total = sum(len(v.programs) for v in by_key.values())
    lines = [f"{_name(f)}{where}: {total} program{'s' if total != 1 else ''}"]
    if not by_key:
        lines.append("  (not compiled yet: call yota.grad(f, ...) first)")
    for key, v in by_key.items():
        sig = key[0] if isinstance(key, tuple) and key and isinstance(key[0], tuple) else key
        names = argnames(f, len(sig)) if isinstance(sig, tuple) else []
        args = ", ".join(f"{n}: {_leaf_text(t)}" for n, t in zip(names, sig, strict=False))
        n = len(v.programs)
        lines.append(f"  signature {args}: {n} variant{'s' if n != 1 else ''}")
        for i, p in enumerate(v.programs):
            lines.append(f"    #{i + 1} {p.why}")
            lines += [f"      {line}" for line in _program_facts(p)]
    return lines


def _program_facts(p: Program) -> list[str]:
    reads = p.tape.reads
    inputs = [r.text for r in reads if r.mode == "input"]
    checks: dict[str, list[str]] = {}
    for r in reads:
        if r.mode != "input":
            checks.setdefault(_MODE_TEXT.get(r.mode, r.mode), []).append(r.text)
    out = []
    if inputs:
        out.append(f"inputs read at each call: {', '.join(inputs)}")
    if checks:
        parts = [f"{', '.join(ts[:6])}{' ...' if len(ts) > 6 else ''} ({what})"
                 for what, ts in checks.items()]
        out.append(f"checks: {'; '.join(parts)}")
    guards = p.guard_count
    if guards:
        out.append(f"guards on Python values from traced arrays: {guards}")
    return out


_MODE_TEXT = {"is": "identity", "eq": "value", "array": "contents", "shape": "structure",
              "type": "type", "code": "code"}
