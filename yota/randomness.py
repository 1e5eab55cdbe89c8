"""Random numbers drawn inside a traced function are drawn again at every call.

A draw (``np.random.standard_normal(shape)``, ``rng.uniform(...)`` on a
``numpy.random.Generator`` or ``RandomState`` from an argument, a closure, a global or an
attribute of an object the function reaches, or on one made inside the function by
``np.random.default_rng(seed)``) is
recorded as an *event*: which generator, which method, with which arguments. A draw that
returns numbers becomes a run-time input of the program (``random`` on the tape). Before
each run, a compiled program replays the events in order with the same NumPy calls on the
same generators, so values, gradients and the generators' states after the call are those
of eager NumPy, draw for draw. Seeding calls (``np.random.seed``) are events too.

Numbers drawn in a way that bypasses the recording (a function imported by name before
the call, ``from numpy.random import randn``; a generator inside a tuple) are noticed by
the change of the generator's state and are an error. Not supported: generators built
inside the function by the ``Generator``/``RandomState`` classes themselves, and integer
draws used to index a plain NumPy array (``X[idx]``: NumPy would need the indices as
plain numbers; write ``np.take(X, idx, axis=0)``).

Arguments of a draw are constants of the trace: a Python number computed from a traced
value (a float argument, say) is guarded like ``float()``; a traced array argument is an
error (draw standard values and transform them: ``mu + sigma * rng.standard_normal(n)``).

    >>> import numpy as np, yota
    >>> f = lambda x: np.sum(x * np.random.standard_normal(x.shape))
    >>> np.random.seed(0); eager = [float(f(np.ones(3))) for _ in range(2)]
    >>> np.random.seed(0); traced = [float(yota.grad(f, np.ones(3))[0]) for _ in range(2)]
    >>> np.allclose(eager, traced, rtol=1e-12)  # the same numbers, draw for draw
    True
"""

from __future__ import annotations

import contextlib
import sys
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from functools import cache
from typing import Any

import numpy as np

from yota.ir.errors import TraceError
from yota.ir.types import TensorType

from .tape import Entry
from .userloc import user_loc, where

# methods that neither draw nor change the state: passed through unrecorded
_QUIET = {"bit_generator", "get_state", "spawn", "__getstate__", "__reduce__", "__repr__",
          "__str__"}


def rng_types() -> tuple[type, ...]:
    """NumPy's generator classes (``np.random.Generator``, ``np.random.RandomState``);
    empty while ``numpy.random`` is not imported: no generator can exist yet (importing
    Yota does not import it; a trace does, to record draws)."""
    mod = sys.modules.get("numpy.random")
    return () if mod is None else (mod.Generator, mod.RandomState)


@cache
def _module_functions() -> list[str]:
    """np.random's module functions that act on the global RandomState."""
    return [n for n in dir(np.random.mtrand._rand)
            if not n.startswith("_") and n not in _QUIET
            and getattr(getattr(np.random, n, None), "__self__", None)
            is np.random.mtrand._rand] + ["seed"]


@cache
def _constructors() -> dict[str, Any]:
    """Generators made inside the function (NumPy's own code checks isinstance against
    the RandomState and Generator classes, so only the factory function is replaced)."""
    return {"default_rng": np.random.default_rng}


def __getattr__(name: str) -> Any:
    if name == "RNG_TYPES":  # (imports numpy.random)
        return (np.random.Generator, np.random.RandomState)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


@dataclass
class Event:
    """One call on a generator: ``source`` indexes ``Draws.sources``; ``entry`` is the
    tape entry of the numbers it returned (None for seeding and other state changes)."""

    source: int
    method: str
    args: tuple[Any, ...]
    kwargs: dict[str, Any]
    entry: Any = None


@dataclass
class Source:
    """A generator: an object that exists across calls, NumPy's global one, or one made
    inside the function (by ``constructor(*args, **kwargs)``, replayed at every call)."""

    obj: Any = None
    global_state: bool = False
    constructor: Any = None
    args: tuple[Any, ...] = ()
    kwargs: dict[str, Any] = field(default_factory=dict)


@dataclass
class Draws:
    """The random events of one trace, replayable."""

    sources: list[Source] = field(default_factory=list)
    events: list[Event] = field(default_factory=list)

    def __bool__(self) -> bool:
        return bool(self.events)

    def live(self) -> list[Any]:
        """The generators that exist across calls (for saving and restoring states)."""
        out: list[Any] = []
        for s in self.sources:
            obj = np.random.mtrand._rand if s.global_state else s.obj
            if obj is not None and not any(obj is o for o in out):
                out.append(obj)
        return out

    def replay(self) -> list[np.ndarray]:
        """Make every call again, in order; the numbers drawn, one array per input."""
        made: dict[int, Any] = {}
        out = []
        for ev in self.events:
            obj = self._object(ev.source, made)
            value = getattr(obj, ev.method)(*ev.args, **ev.kwargs)
            if ev.entry is not None:
                t = ev.entry.outs[0].type
                out.append(np.asarray(value, dtype=t.dtype).reshape(t.shape))
        return out

    def _object(self, i: int, made: dict[int, Any]) -> Any:
        s = self.sources[i]
        if s.global_state:
            return np.random.mtrand._rand
        if s.constructor is None:
            return s.obj
        if i not in made:
            made[i] = s.constructor(*s.args, **s.kwargs)
        return made[i]


def states_of(tapes: list[Any]) -> tuple[list[Any], list[Any]] | None:
    """The generators the tapes' programs draw from and their states, to undo the draws
    of a program whose guard fails (None when none draws)."""
    gens: list[Any] = []
    for t in tapes:
        if t.draws:
            gens += [g for g in t.draws.live() if not any(g is h for h in gens)]
    return (gens, save_states(gens)) if gens else None


def save_states(gens: list[Any]) -> list[Any]:
    return [g.bit_generator.state if isinstance(g, np.random.Generator) else g.get_state()
            for g in gens]


def restore_states(gens: list[Any], states: list[Any]) -> None:
    for g, s in zip(gens, states, strict=True):
        if isinstance(g, np.random.Generator):
            g.bit_generator.state = s
        else:
            g.set_state(s)


class Recorder:
    """Records the random events of one trace (``TraceContext.draws``)."""

    def __init__(self, ctx: Any) -> None:
        self.ctx = ctx
        self.draws = Draws()
        self._by_id: dict[int, int] = {}
        self.thread = threading.get_ident()  # draws from other threads are not this trace's

    def source_of(self, obj: Any) -> int:
        key = id(obj)
        if key not in self._by_id:
            self._by_id[key] = len(self.draws.sources)
            self.draws.sources.append(Source(obj=obj))
        return self._by_id[key]

    def global_source(self) -> int:
        if -1 not in self._by_id:
            self._by_id[-1] = len(self.draws.sources)
            self.draws.sources.append(Source(global_state=True))
        return self._by_id[-1]

    def created(self, constructor: Any, args: tuple[Any, ...], kwargs: dict[str, Any]
                ) -> Any:
        real = constructor(*args, **kwargs)
        if threading.get_ident() != self.thread:
            return real
        self.draws.sources.append(Source(constructor=constructor, args=args, kwargs=kwargs))
        self._by_id[id(real)] = len(self.draws.sources) - 1
        return RecordingRNG(real, self, self._by_id[id(real)])

    def call(self, real: Any, source: int, method: str, args: tuple[Any, ...],
             kwargs: dict[str, Any]) -> Any:
        if threading.get_ident() != self.thread:
            return getattr(real, method)(*args, **kwargs)
        args = tuple(self._plain(method, a) for a in args)
        kwargs = {k: self._plain(method, v) for k, v in kwargs.items()}
        value = getattr(real, method)(*args, **kwargs)
        ev = Event(source, method, args, kwargs)
        self.draws.events.append(ev)
        if isinstance(value, rng_types()) or value is None:
            return value
        arr = np.asarray(value)
        if arr.dtype.kind in "iu" and arr.dtype not in (np.int32, np.int64):
            arr = arr.astype(np.int64)
        if arr.dtype.kind not in "fib":
            raise TraceError(f"a random draw ({method}) at {where()} returns {arr.dtype} "
                             "values, which cannot be an input of a compiled program; draw "
                             "indices instead (rng.integers) and pick with them")
        tracer, ev.entry = self._input(arr, method, args, kwargs)
        return tracer

    def _input(self, arr: np.ndarray, method: str, args: tuple[Any, ...],
               kwargs: dict[str, Any]) -> tuple[Any, Entry]:
        """A run-time input of the program holding the drawn numbers."""
        from .tracer import Tracer

        tape = self.ctx.tape
        var = tape.new_var(TensorType(arr.dtype, arr.shape))
        entry = Entry("random", [var], method, args, kwargs, value=arr, loc=user_loc())
        tape.add(entry)
        tape.randoms.append(entry)
        return Tracer(self.ctx, var, arr.copy()), entry  # writes into it keep the draw

    def _plain(self, method: str, x: Any) -> Any:
        """An argument of a draw as a plain value (a traced number is guarded)."""
        from .tracer import Tracer

        if isinstance(x, Tracer):
            if x.ndim != 0:
                raise TraceError(
                    f"a random draw ({method}) at {where()} takes a traced array as an "
                    "argument: the numbers would depend on the inputs in a way Yota cannot "
                    "differentiate. Draw standard values and transform them "
                    "(mu + sigma * rng.standard_normal(shape))")
            return x.item()
        if isinstance(x, (list, tuple)) and not hasattr(type(x), "_fields"):
            return type(x)(self._plain(method, i) for i in x)
        return x


class RecordingRNG:
    """Stands in for a generator while tracing: every call is recorded, then made."""

    def __init__(self, real: Any, recorder: Recorder, source: int) -> None:
        self._real, self._recorder, self._source = real, recorder, source

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self._real, name)
        if name in _QUIET or not callable(attr):
            return attr

        def method(*args: Any, **kwargs: Any) -> Any:
            return self._recorder.call(self._real, self._source, name, args, kwargs)

        return method

    def __repr__(self) -> str:
        return f"<recording {self._real!r}>"


@contextlib.contextmanager
def recording(recorder: Recorder, slots: list[tuple[Any, Any]]) -> Iterator[None]:
    """While the block runs: np.random's module functions and constructors record, and
    each generator in ``slots`` ((dict, key) or (cell, None)) is a ``RecordingRNG``."""
    functions, constructors = _module_functions(), _constructors()
    saved_module = {n: getattr(np.random, n) for n in functions + list(constructors)}
    g = RecordingRNG(np.random.mtrand._rand, recorder, -1)
    for n in functions:
        setattr(np.random, n, _module_function(recorder, g, n))
    for n, ctor in constructors.items():
        setattr(np.random, n, _constructor(recorder, ctor))
    swapped = []
    for holder, key in slots:
        real = holder.cell_contents if key is None else holder[key]
        proxy = RecordingRNG(real, recorder, recorder.source_of(real))
        swapped.append((holder, key, real))
        if key is None:
            holder.cell_contents = proxy
        else:
            holder[key] = proxy
    try:
        yield
    finally:
        for n, v in saved_module.items():
            setattr(np.random, n, v)
        for holder, key, real in swapped:
            if key is None:
                holder.cell_contents = real
            else:
                holder[key] = real


def _module_function(recorder: Recorder, g: RecordingRNG, name: str) -> Any:
    def draw(*args: Any, **kwargs: Any) -> Any:
        return recorder.call(np.random.mtrand._rand, recorder.global_source(), name, args,
                             kwargs)

    draw.__name__ = name
    return draw


def _constructor(recorder: Recorder, ctor: Any) -> Any:
    def make(*args: Any, **kwargs: Any) -> Any:
        return recorder.created(ctor, args, kwargs)

    return make


class UnrecordedDraws:
    """Notices draws that bypassed the recording (``from numpy.random import randn``
    bound before the trace, a generator inside a tuple): they would be frozen into the
    program, so they are an error."""

    def __init__(self, gens: list[Any]) -> None:
        self.gens = [np.random.mtrand._rand, *gens]
        self.states = save_states(self.gens)

    def after(self, recorder: Recorder, tape: Any) -> None:
        recorded = {id(s.obj) for s in recorder.draws.sources if s.obj is not None}
        if any(s.global_state for s in recorder.draws.sources):
            recorded.add(id(np.random.mtrand._rand))
        for g, before in zip(self.gens, self.states, strict=True):
            if id(g) not in recorded and _changed(save_states([g])[0], before):
                raise TraceError(
                    f"{tape.fname} draws random numbers in a way Yota cannot record (a "
                    "numpy.random function imported by name before the call, or a "
                    "generator inside a tuple): they would be frozen into the compiled "
                    "program. Call them as np.random.<name>(...) or rng.<method>(...) with "
                    "the generator in an argument, a closure, a global or an attribute")


def _changed(a: Any, b: Any) -> bool:
    if isinstance(a, dict):
        return a.keys() != b.keys() or any(_changed(a[k], b[k]) for k in a)
    if isinstance(a, tuple):
        return len(a) != len(b) or any(_changed(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, np.ndarray):
        return not np.array_equal(a, b)
    return bool(a != b)
