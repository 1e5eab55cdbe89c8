"""``simplegrad``: the gradient as a plain, readable Python function (Yota.jl's simplegrad).

The generated source has one line per IR op, written with NumPy; ops without a NumPy
one-liner call their reference implementation through ``yops.<op>``. No caches, no
buffers: the function is self-contained and can be copied out of ``.source``.
"""

from __future__ import annotations

import types
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from yota.ir.core import Function, Value
from yota.ir.errors import GuardFailed, YotaError
from yota.ir.ops import OPS
from yota.ir.printer import format_attr

from . import pipeline, structs, tracing
from .tape import Tape
from .validate import argnums_tuple, check_callable

PASSES = ("dce", "cse", "simplify", "dce")  # readable code: no fusion, no memory plan


def _ops_namespace() -> types.SimpleNamespace:
    return types.SimpleNamespace(**{n: d.impl for n, d in OPS.items() if not d.calls})


def _attr_src(v: Any) -> str:
    if isinstance(v, np.dtype):
        return f"np.{v.name}"
    if isinstance(v, tuple):
        inner = ", ".join(_attr_src(x) for x in v)
        return f"({inner},)" if len(v) == 1 else f"({inner})"
    return repr(v)


class _Writer:
    def __init__(self, top: str = "") -> None:
        self.top = top  # the name of the function the code is generated for
        self.names: dict[Value, str] = {}
        self.consts: dict[str, np.ndarray] = {}
        self.lines: list[str] = []

    def name(self, v: Value) -> str:
        if v not in self.names:
            self.names[v] = f"x{len(self.names)}"
        return self.names[v]

    def const(self, v: Value, arr: np.ndarray) -> str:
        flat = arr.reshape(-1)
        if arr.size and (flat == flat[0]).all() and not np.isnan(flat).any() if (
                arr.dtype.kind == "f") else arr.size and (flat == flat[0]).all():
            return f"np.full({arr.shape}, {format_attr(flat[0])}, dtype=np.{arr.dtype.name})"
        key = f"_c{len(self.consts)}"
        self.consts[key] = arr
        return key

    def op_expr(self, op: Any) -> str:
        args = [self.name(v) for v in op.operands]
        if op.name == "const":
            return self.const(op.results[0], op.attrs["value"])
        src = OPS[op.name].source
        if src is not None:
            attrs = {k: _attr_src(v) for k, v in op.attrs.items()}
            return src.format(*args, all=", ".join(args), **attrs)
        kw = "".join(f", {k}={_attr_src(v)}" for k, v in sorted(op.attrs.items()))
        return f"yops.{op.name}({', '.join(args)}{kw})"


def _source(gfn: Function, tape: Tape, fname: str) -> tuple[str, dict[str, np.ndarray]]:
    w = _Writer(gfn.name)
    params = list(tape.argnames)
    body = []
    args = {e.extra: e.value for e in tape.entries if e.kind == "input"}
    for (argnum, path, _), v in zip(tape.leaf_vars, gfn.inputs, strict=False):
        body.append(f"{w.name(v)} = {_access(args.get(argnum), path, params[argnum])}")
    for j, e in enumerate(tape.captured):  # read from outside the function when traced
        v = gfn.inputs[len(tape.leaf_vars) + j]
        w.consts[f"_captured{j}"] = e.value
        body.append(f"{w.name(v)} = _captured{j}  # {e.extra[1]}")
    for i in range(len(gfn.ops)):
        body.extend(_op_lines(w, gfn, i))
    grads = _grad_exprs(gfn, tape, w)
    body.append(f"return {w.name(gfn.outputs[0])}, {', '.join(grads)}"
                if grads else f"return {w.name(gfn.outputs[0])},")
    src = f"def {fname}({', '.join(params)}):\n" + "".join(f"    {ln}\n" for ln in body)
    return src, w.consts


def _access(arg: Any, path: tuple[Any, ...], name: str) -> str:
    """The expression reading the leaf at ``path`` of argument ``arg`` named ``name``:
    attributes of objects, dataclasses and NamedTuples, items of dicts, lists, tuples."""
    out, obj = name, arg
    for k in path:
        attr = isinstance(k, str) and k.isidentifier() and structs.is_attr_container(obj)
        out += f".{k}" if attr else f"[{k!r}]"
        try:
            obj = getattr(obj, k) if attr else obj[k]
        except (AttributeError, KeyError, IndexError, TypeError):
            obj = None
    return out


def _op_lines(w: _Writer, fn: Function, i: int) -> list[str]:
    """The source lines of op ``i`` of ``fn``."""
    op = fn.ops[i]
    if op.name == "guard":
        x, kind, expected = w.name(op.operands[0]), op.attrs["kind"], op.attrs["expected"]
        return [f"if not yops.guard({x}, expected={expected!r}, kind={kind!r}): "
                f"raise GuardFailed('the branch at {op.loc} goes the other way', "
                f"guard_index={i if fn.name == w.top else -1}, value={x})"]
    if op.name == "loop":
        return _loop_lines(w, fn, op)
    lhs = ", ".join(w.name(r) for r in op.results)
    line = f"{lhs} = {w.op_expr(op)}"
    return [line + (f"  # {op.loc}" if op.loc and not op.loc.startswith("adjoint") else "")]


def _loop_lines(w: _Writer, fn: Function, op: Any) -> list[str]:
    """A ``loop`` op as a Python ``for`` loop calling its body, a nested function."""
    body = fn.callees[op.attrs["callee"]]
    name = f"_{body.name.replace('.', '_')}"
    lines = [f"def {name}({', '.join(w.name(v) for v in body.inputs)}):"]
    for j in range(len(body.ops)):
        lines.extend(f"    {ln}" for ln in _op_lines(w, body, j))
    lines.append(f"    return ({', '.join(w.name(v) for v in body.outputs)},)")
    n, nc, ns = op.attrs["length"], op.attrs["carries"], op.attrs["stacked"]
    carried = [w.name(r) for r in op.results[:nc]]
    ys = [w.name(r) for r in op.results[nc:]]
    if carried:
        lines.append(f"{', '.join(carried)}, = {', '.join(w.name(v) for v in op.operands[:nc])},")
    lines += [f"{y} = np.empty({r.shape}, dtype=np.{r.dtype.name})"
              for y, r in zip(ys, op.results[nc:], strict=True)]
    steps = f"range({n} - 1, -1, -1)" if op.attrs["reverse"] else f"range({n})"
    args = carried + [f"{w.name(v)}[_i]" for v in op.operands[nc:nc + ns]]
    args += [w.name(v) for v in op.operands[nc + ns:]]
    outs = carried + [f"{y}[_i]" for y in ys]
    lines.append(f"for _i in {steps}:  # {op.loc or 'loop'}")
    lines.append(f"    {', '.join(outs)}, = {name}({', '.join(args)})")
    return lines


def _grad_exprs(gfn: Function, tape: Tape, w: _Writer) -> list[str]:
    by_leaf = dict(zip(gfn.attrs.get("grads", ()), gfn.outputs[1:], strict=True))
    per_arg: dict[int, list[str]] = {}
    plain: dict[int, str] = {}
    for i, (argnum, path, _) in enumerate(tape.leaf_vars):
        if i in by_leaf:
            if path == ():
                plain[argnum] = w.name(by_leaf[i])
            else:
                per_arg.setdefault(argnum, []).append(f"{path!r}: {w.name(by_leaf[i])}")
    out = []
    for argnum in range(len(tape.argnames)):
        if argnum in plain:
            out.append(plain[argnum])
        elif argnum in per_arg:
            out.append("{" + ", ".join(per_arg[argnum]) + "}")
        else:
            out.append("None")
    return out


class SimpleGrad:
    """A generated gradient function; ``.source`` shows its code. Called with arguments
    that take another branch of ``f`` (a guard of the code fails), it generates the code
    for them, as ``yota.grad`` retraces."""

    def __init__(self, fn: Callable[..., Any], source: str,
                 f: Callable[..., Any] | None = None,
                 argnums: tuple[int, ...] | None = None) -> None:
        self.fn = fn
        self.source = source
        self.f = f
        self.argnums = argnums

    def __call__(self, *args: Any) -> Any:
        if tracing.current_context() is not None:  # inside a trace: traced through
            return self._inline(args)
        try:
            return self.fn(*args)
        except GuardFailed:
            if self.f is None:
                raise
        new = simplegrad(self.f, *args, argnums=self.argnums)
        self.fn, self.source = new.fn, new.source
        return self.fn(*args)

    def _inline(self, args: tuple[Any, ...]) -> Any:
        if self.f is None:
            raise YotaError("this simplegrad function has no traced function to trace "
                            "through; call it outside a traced function")
        from .grad import nested_grad

        value, grads = nested_grad(self.f, args, what="simplegrad", wrt=self.argnums)
        return (value, *grads)

    def __repr__(self) -> str:
        return f"<simplegrad {self.fn.__name__}>\n{self.source}"


def simplegrad(f: Callable[..., Any], *args: Any,
               argnums: int | Sequence[int] | None = None) -> SimpleGrad:
    """A plain Python function ``(args...) -> (value, *grads)`` computing ``f``'s gradient
    (``argnums``: of those arguments only, as ``yota.grad``; the others' are None). The
    gradient of a structure is a dict ``{field path: gradient}``; arrays the function read
    from outside its arguments when it was traced are held by the generated code.

    Called inside a function that Yota is tracing, the generated function traces through
    (the gradient program of ``f`` is inlined into the enclosing trace and differentiated
    with it).

    >>> import numpy as np, yota
    >>> g = yota.simplegrad(lambda x: np.sum(x * x), np.ones(2))
    >>> g(np.array([1.0, 2.0]))[1]
    array([2., 4.])
    """
    check_callable(f, "simplegrad")
    wrt = None if argnums is None else argnums_tuple(argnums, len(args), "simplegrad")
    if tracing.current_context() is not None:  # inside a trace: built from the values
        with tracing.suspended():
            return simplegrad(f, *tracing.detach(args), argnums=wrt)
    _, tape = pipeline.trace_forward(f, args)
    tape.wrt = wrt
    gfn = pipeline.grad_ir(tape, passes=PASSES)
    name = f"{getattr(f, '__name__', 'f').replace('<lambda>', 'f')}_grad"
    guards = sum(op.name == "guard" for op in gfn.ops)
    for _ in range(guards + 1):  # anchor each guard to the value this code computes
        src, consts = _source(gfn, tape, name)
        ns: dict[str, Any] = {"np": np, "yops": _ops_namespace(), "GuardFailed": GuardFailed,
                              **consts}
        exec(compile(src, f"<simplegrad {name}>", "exec"), ns)
        try:
            ns[name](*args)
            return SimpleGrad(ns[name], src, f, wrt)
        except GuardFailed as e:
            anchored = pipeline.reanchor(gfn, e)
            if anchored is None:
                raise YotaError(f"simplegrad: the generated code of {name} fails its own "
                                f"guard on the arguments it was traced with ({e}); this is "
                                "a Yota bug, please report it") from None
            gfn = anchored
    raise YotaError(f"simplegrad: could not anchor the guards of {name}; this is a Yota bug")
