"""Tape → IR: ``to_ir(tape)`` resolves structure access to input leaves, lowers each
NumPy-level call through its entry of the table in ``yota.numpy``, and each primitive's
entry to an IR ``call`` of its traced body."""

from __future__ import annotations

import inspect
import re
from collections.abc import Callable
from typing import Any

import numpy as np

from yota.ir.core import Builder, Function, Op, Value
from yota.ir.errors import TraceError, YotaError
from yota.ir.types import TensorType, as_dtype
from yota.ir.verifier import maybe_verify

from . import structs
from .numpy.registry import TABLE
from .primitives import Primitive
from .tape import Entry, Inlined, Tape, Var
from .tracing import trace


class Lowering:
    """What a lowering function sees: the builder and the tape → IR value map."""

    def __init__(self, b: Builder) -> None:
        self.b = b
        self.env: dict[Var, Value] = {}
        self.weak: set[Value] = set()

    def is_traced(self, a: Any) -> bool:
        return isinstance(a, Var)

    def type_of(self, a: Any) -> TensorType | None:
        if isinstance(a, Var):
            return a.type
        if isinstance(a, np.ndarray):
            return TensorType(a.dtype, a.shape) if a.dtype.kind in "biuf" else None
        return None

    def operand(self, a: Any, dtype: Any, shape: tuple[int, ...] | None) -> Value:
        """An IR value for argument ``a`` (a Var, or a Python scalar/list made constant),
        converted to ``dtype`` and broadcast to ``shape`` when those are given."""
        if isinstance(a, Var):  # the common case: no conversion, no broadcast
            v = self.env[a]
            if dtype is not None and v.type.dtype is not dtype:
                v = self.b.convert_to(v, dtype)
            if shape is not None and v.type.shape != shape:
                v = self.b.broadcast_to(v, shape)
            return v
        if _holds_var(a):
            v = self._stack(a)
            if dtype is not None:
                v = self.b.convert_to(v, dtype)
        else:
            arr = np.asarray(a)
            if arr.dtype.kind not in "biuf":
                raise TraceError(f"cannot use {a!r} as an array operand")
            if dtype is None:
                dtype = np.result_type(a) if not isinstance(a, (list, tuple)) else arr.dtype
                dtype = {"i": np.int64, "u": np.int64, "b": np.bool_}.get(
                    np.dtype(dtype).kind, dtype)
            if shape is not None and arr.ndim == 0:
                return self.b.const(arr, dtype, shape)
            v = self.b.const(arr.astype(as_dtype(dtype)))
        return self.b.broadcast_to(v, shape) if shape is not None else v

    def _stack(self, items: list[Any] | tuple[Any, ...]) -> Value:
        """A nested list holding traced values, as ``np.array`` builds it."""
        vals = [self.operand(v, None, None) for v in items]
        dt = np.result_type(*[v.dtype for v in vals])
        vals = [self.b.reshape_to(self.b.convert_to(v, dt), (1,) + v.shape) for v in vals]
        return vals[0] if len(vals) == 1 else self.b.concatenate(*vals, axis=0)

    def promote(self, *args: Any) -> np.dtype:
        """NEP 50 promotion: Python scalars and weak (Python float) values are weak."""
        stand_ins: list[Any] = []
        for a in args:
            if isinstance(a, Var):
                v = self.env[a]
                if v in self.weak:
                    stand_ins.append({"f": 0.0, "b": False}.get(v.dtype.kind, 0))
                else:
                    stand_ins.append(v.dtype)
            elif isinstance(a, (list, tuple)):
                stand_ins.append(_list_dtype(a))
            else:
                stand_ins.append(a)
        return np.result_type(*stand_ins)


def _holds_var(a: Any) -> bool:
    return isinstance(a, (list, tuple)) and any(isinstance(v, Var) or _holds_var(v) for v in a)


def _list_dtype(a: list[Any] | tuple[Any, ...]) -> np.dtype:
    """The dtype ``np.array(a)`` has, for a nested list that may hold traced values."""
    return np.result_type(*[v.type.dtype if isinstance(v, Var) and v.type is not None
                            else _list_dtype(v) if isinstance(v, (list, tuple))
                            else np.asarray(v).dtype for v in a])


def to_ir(tape: Tape, name: str | None = None) -> Function:
    """The typed IR of ``tape``: a function named ``name`` (default: the traced
    function's name) whose inputs are the arguments' array leaves, then captured arrays,
    then random draws.

    A tape is lowered once per name (IR functions are immutable): a primitive's body is
    traced again from its example arguments, which ``Tape.release_values`` drops after
    the first lowering.

    >>> import numpy as np, yota
    >>> _, tape = yota.trace(lambda x: np.sum(x * 2.0), np.ones(3))
    >>> print(yota.to_ir(tape))  # doctest: +ELLIPSIS
    func @_lambda_(%0: f64[3] "x") -> (f64[]) {
      %1 = const {value = 2.0} : f64[3]  # ...
      %2 = mul %0, %1 : f64[3]  # ...
      %3 = sum %2 {axes = [0]} : f64[]  # ...
      return %3
    }
    """
    key = (name, tuple(tape.argnames))
    if key not in tape.lowered:
        tape.lowered[key] = lower_tape(tape, name)
    return tape.lowered[key]


def lower_tape(tape: Tape, name: str | None = None) -> Function:
    """Lower ``tape`` to a new IR function (``to_ir`` caches this on the tape)."""
    b = Builder(re.sub(r"\W", "_", name or tape.fname))
    L = Lowering(b)
    _inputs(tape, L)
    _lower_entries(tape, L)
    outs = [_output(L, leaf) for leaf in result_leaves(tape.result)]
    if name is None:
        tape.ir_values = dict(L.env)  # each tape variable's IR value (yota.autograd's nodes)
    return maybe_verify(b.build(outs))


_NOT_LOWERED = frozenset(("input", "getattr", "getitem", "captured", "random"))


def _lower_entries(tape: Tape, L: Lowering) -> None:
    """Lower each entry, its ops carrying the entry's location (as ``b.at`` would set it;
    each location is formatted once: a loop's steps share their lines)."""
    b = L.b
    outer = b.loc
    texts: dict[int, str] = {}  # id(Loc) -> its text (the tape keeps each Loc alive)
    try:
        for e in tape.entries:
            if e.kind in _NOT_LOWERED:
                continue
            loc = e.loc
            if loc:
                text = texts.get(id(loc))
                if text is None:
                    text = texts[id(loc)] = str(loc)
                b.loc = text
            else:
                b.loc = outer
            _lower_entry(tape, L, e)
    finally:
        b.loc = outer


def _inputs(tape: Tape, L: Lowering) -> None:
    """IR inputs: every dynamic leaf of the arguments, then captured arrays, then draws."""
    for argnum, path, var in tape.leaf_vars:
        t = var.type if var is not None else None
        if t is None:
            t = _leaf_type(tape, argnum, path)
        v = L.b.input(t, structs.format_path(path, _argname(tape, argnum)))
        if var is not None:
            L.env[var] = v
            if var.weak:
                L.weak.add(v)
    for e in tape.captured:
        var = e.outs[0]
        assert var.type is not None  # a captured array is typed when it is recorded
        L.env[var] = L.b.input(var.type, f"captured {e.extra[1]}")
    for e in tape.randoms:
        var = e.outs[0]
        assert var.type is not None  # drawn numbers are typed when they are recorded
        where = f" at {e.loc}" if e.loc is not None else ""
        L.env[var] = L.b.input(var.type, f"random.{e.fn}{where}")


def _argname(tape: Tape, argnum: int) -> str:
    names = tape.argnames
    return names[argnum] if argnum < len(names) else f"arg{argnum}"


def _leaf_type(tape: Tape, argnum: int, path: tuple[Any, ...]) -> TensorType:
    arg = next(e.value for e in tape.entries if e.kind == "input" and e.extra == argnum)
    leaf = structs.get_path(arg, path)
    a = np.asarray(leaf)
    return TensorType(a.dtype, a.shape)


def _lower_entry(tape: Tape, L: Lowering, e: Entry) -> None:
    if e.kind == "const":
        L.env[e.outs[0]] = L.b.const(e.value)
        return
    if e.kind == "guard":
        L.b.guard(L.env[e.args[0]], expected=e.extra["expected"], kind=e.extra["kind"])
        return
    outs = [v.type for v in e.outs]
    res: Any
    try:
        if isinstance(e.extra, Inlined):
            res = inline_ops(L.b, e.extra.fn, [L.operand(a, v.dtype, v.shape)
                                               for a, v in zip(e.args, e.extra.fn.inputs,
                                                               strict=True)])
        elif e.extra is not None:
            res = lower_primitive(L, e)
        else:
            res = TABLE[e.fn].lower(L, outs, *e.args, **e.kwargs)
    except YotaError as err:
        if e.loc is not None and str(e.loc) not in str(err):
            raise type(err)(f"{err} (at {e.loc.describe()})") from err
        raise
    values = list(res) if isinstance(res, (list, tuple)) else [res]
    for var, v in zip(e.outs, values, strict=True):
        if v.type is not var.type and v.type != var.type:  # types are mostly shared objects
            raise TraceError(f"internal error: '{e.fn}' at {e.loc} lowered to {v.type}, but "
                             f"NumPy computed {var.type}")
        L.env[var] = v
        if var.weak:
            L.weak.add(v)


def result_leaves(r: Any) -> list[Any]:
    """The result's leaves that become outputs: traced values and Python numbers (None
    is kept in the result's structure, not computed)."""
    if r is None:
        return []
    if isinstance(r, Var) or isinstance(r, (int, float, bool)):
        return [r]
    if isinstance(r, dict):
        return [x for v in r.values() for x in result_leaves(v)]
    return [x for v in r for x in result_leaves(v)]


def _output(L: Lowering, leaf: Any) -> Value:
    if isinstance(leaf, Var):
        return L.env[leaf]
    return L.b.const(float(leaf) if isinstance(leaf, float) else leaf)


# -- primitives: an IR call of the traced body ------------------------------------------
def _is_static(a: Any) -> bool:
    return isinstance(a, (int, bool)) and not isinstance(a, np.generic)


def lower_primitive(L: Lowering, e: Entry) -> tuple[Value, ...]:
    """Lower a primitive's entry: trace its body into a callee ``Function`` and call it.

    Array and float arguments become the callee's inputs; int/bool arguments and keyword
    arguments are constants of the body (and part of the callee's identity)."""
    prim, examples = e.extra
    dyn = [i for i, a in enumerate(e.args) if not _is_static(a)]
    operands = [L.operand(e.args[i], None, None) for i in dyn]
    if prim.opaque:  # a body that calls the function at run time
        callee = prim.ir_body(e, dyn, [v.type for v in operands])
    else:
        callee = _body(prim, e, examples, dyn, [v.type for v in operands])
    existing = L.b.callees.get(callee.name)
    if existing is not None and str(existing) != str(callee):
        callee = callee.replace(name=f"{callee.name}_{len(L.b.callees)}")
    return L.b.call(callee, *operands)


def _body(prim: Primitive, e: Entry, examples: tuple[Any, ...] | None, dyn: list[int],
          operands_types: list[Any]) -> Function:
    def body(*dyn_args: Any) -> Any:
        full = list(e.args)
        for i, a in zip(dyn, dyn_args, strict=True):
            full[i] = a
        return prim.fn(*full, **e.kwargs)

    if examples is None:  # released after compilation: only the types matter now
        examples = tuple(a if _is_static(a) else None for a in e.args)
        for i, v in zip(dyn, operands_types, strict=True):
            examples = examples[:i] + (np.zeros(v.shape, v.dtype),) + examples[i + 1:]
    _, sub = trace(body, *[examples[i] for i in dyn])
    names = _param_names(prim.fn, len(e.args))
    sub.argnames = [names[i] for i in dyn]
    fn = to_ir(sub, getattr(prim.fn, "__name__", "primitive"))
    attrs: dict[str, Any] = {"primitive": prim.key, "argnames": tuple(sub.argnames)}
    static = {names[i]: e.args[i] for i in range(len(e.args)) if i not in dyn}
    if e.kwargs or static:
        attrs["kwargs"] = tuple((k, _static(v)) for k, v in {**static, **e.kwargs}.items())
    return fn.replace(attrs=attrs)


def _param_names(fn: Callable[..., Any], n: int) -> list[str]:
    try:
        names = [p.name for p in inspect.signature(fn).parameters.values()]
    except (TypeError, ValueError):
        names = []
    return (names + [f"arg{i}" for i in range(len(names), n)])[:n]


def _static(v: Any) -> Any:
    if isinstance(v, (list, tuple)):
        return tuple(_static(x) for x in v)
    if isinstance(v, (int, float, bool, str)):
        return v
    return repr(v)


# -- nested programs: inlined op by op ---------------------------------------------------
def inline_ops(b: Builder, fn: Function, operands: list[Value]) -> list[Value]:
    """Append fresh copies of ``fn``'s ops to ``b``, reading ``operands`` for its inputs
    (a nested ``yota.grad``'s program, which the enclosing one differentiates again);
    returns the values of its outputs. Its calls of primitives stay calls."""
    env: dict[Value, Value] = dict(zip(fn.inputs, operands, strict=True))
    lines = _value_lines(fn)
    for op in fn.ops:
        attrs = op.attrs
        if "callee" in attrs:  # a call's or a loop's function comes with it
            attrs = {**attrs, "callee": _add_callee(b, fn.callees[attrs["callee"]])}
        new = Op(op.name, tuple(env[v] for v in op.operands), attrs,
                 [Value(r.type) for r in op.results], _nested_loc(op.loc, lines) or b.loc)
        b.append(new)
        env.update(zip(op.results, new.results, strict=True))
    return [env[v] for v in fn.outputs]


_ADJOINT = re.compile(r"adjoint of (%\d+) via rule (\S+)")


def _value_lines(fn: Function) -> dict[str, str]:
    """The printed name of each value of ``fn`` made by an op -> that op's location."""
    names = [f"%{i}" for i in range(len(fn.inputs) + sum(len(op.results) for op in fn.ops))]
    out: dict[str, str] = {}
    k = len(fn.inputs)
    for op in fn.ops:
        for _ in op.results:
            if op.loc and not op.loc.startswith("adjoint of"):
                out[names[k]] = op.loc
            k += 1
    return out


def _nested_loc(loc: str | None, lines: dict[str, str]) -> str | None:
    """An inlined op's provenance in the enclosing program: "adjoint of %5 via rule mul"
    names a value of the nested program, so it becomes the line that made that value,
    marked as the nested gradient's ("model.py:3 (nested adjoint via rule mul)")."""
    if loc is None or "adjoint of" not in loc:
        return loc

    def one(part: str) -> str:
        m = _ADJOINT.fullmatch(part.strip())
        if m is None:
            return part.strip()
        return f"{lines.get(m.group(1), '?')} (nested adjoint via rule {m.group(2)})"

    return "; ".join(one(p) for p in loc.split(";"))


def _add_callee(b: Builder, callee: Function) -> str:
    existing = b.callees.get(callee.name)
    if existing is not None and str(existing) != str(callee):
        callee = callee.replace(name=f"{callee.name}_{len(b.callees)}")
    b.callees[callee.name] = callee
    return callee.name
