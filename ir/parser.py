"""Reads the printer's text back into ``ir.Function`` objects."""

from __future__ import annotations

import json
import re
from typing import Any

import numpy as np

from .core import Function, Op, Value, make_op
from .errors import ParseError, YotaError
from .ops import OPS
from .types import NAME_TO_DTYPE, TensorType

_TOKEN = re.compile(r"""
    (?P<ws>[ \t]+)
  | (?P<comment>\#[^\n]*)
  | (?P<nl>\n)
  | (?P<string>"(?:[^"\\]|\\.)*")
  | (?P<value>%\d+)
  | (?P<sym>@[\w.$-]+)
  | (?P<number>-?(?:\d+\.?\d*(?:[eE][-+]?\d+)?|\.\d+(?:[eE][-+]?\d+)?|inf\b|nan\b))
  | (?P<ident>[A-Za-z_][\w]*)
  | (?P<arrow>->)
  | (?P<punct>[()\[\]{},:=])
""", re.VERBOSE)


class _Tokens:
    def __init__(self, text: str) -> None:
        self.toks: list[tuple[str, str, int]] = []
        pos, line = 0, 1
        while pos < len(text):
            m = _TOKEN.match(text, pos)
            if not m:
                raise ParseError(f"line {line}: unexpected character {text[pos]!r}")
            kind = m.lastgroup or ""
            if kind == "nl":
                self.toks.append(("nl", "\n", line))
                line += 1
            elif kind == "comment":
                self.toks.append(("comment", m.group()[1:].strip(), line))
            elif kind != "ws":
                self.toks.append((kind, m.group(), line))
            pos = m.end()
        self.toks.append(("eof", "", line))
        self.i = 0

    def peek(self, skip_nl: bool = True) -> tuple[str, str, int]:
        j = self.i
        while skip_nl and self.toks[j][0] in ("nl", "comment"):
            j += 1
        return self.toks[j]

    def next(self, skip_nl: bool = True) -> tuple[str, str, int]:
        while skip_nl and self.toks[self.i][0] in ("nl", "comment"):
            self.i += 1
        tok = self.toks[self.i]
        self.i += 1
        return tok

    def expect(self, text: str) -> None:
        kind, val, line = self.next()
        if val != text:
            raise ParseError(f"line {line}: expected {text!r}, found {val or kind!r}")

    def accept(self, text: str) -> bool:
        if self.peek()[1] == text:
            self.next()
            return True
        return False


def parse(text: str) -> Function:
    """Parse IR text; returns the last function, with the earlier ones as its callees."""
    funcs = parse_module(text)
    if not funcs:
        raise ParseError("no function found")
    return funcs[-1]


def parse_module(text: str) -> list[Function]:
    toks = _Tokens(text)
    funcs: dict[str, Function] = {}
    while toks.peek()[0] != "eof":
        f = _parse_function(toks, funcs)
        funcs[f.name] = f
    return list(funcs.values())


def _parse_type(toks: _Tokens) -> TensorType:
    kind, val, line = toks.next()
    if val not in NAME_TO_DTYPE:
        raise ParseError(f"line {line}: expected a type such as f32[3,4], found {val!r}")
    toks.expect("[")
    dims: list[int] = []
    while not toks.accept("]"):
        if dims:
            toks.expect(",")
        k, v, ln = toks.next()
        if k != "number":
            raise ParseError(f"line {ln}: expected a dimension, found {v!r}")
        dims.append(int(v))
    return TensorType(NAME_TO_DTYPE[val], tuple(dims))


def _parse_attr_value(toks: _Tokens) -> Any:
    kind, val, line = toks.next()
    if val == "[":
        items: list[Any] = []
        while not toks.accept("]"):
            if items:
                toks.expect(",")
            items.append(_parse_attr_value(toks))
        return items
    if kind == "string":
        return json.loads(val)
    if kind == "number":
        if re.fullmatch(r"-?\d+", val):
            return int(val)
        return float(val)
    if val in ("true", "false"):
        return val == "true"
    if val in NAME_TO_DTYPE:
        return NAME_TO_DTYPE[val]
    raise ParseError(f"line {line}: bad attribute value {val!r}")


def _parse_attrs(toks: _Tokens) -> dict[str, Any]:
    attrs: dict[str, Any] = {}
    if not toks.accept("{"):
        return attrs
    while not toks.accept("}"):
        if attrs:
            toks.expect(",")
        _, key, _ = toks.next()
        toks.expect("=")
        attrs[key] = _parse_attr_value(toks)
    return attrs


def _label(toks: _Tokens) -> str | None:
    if toks.peek()[0] == "string":
        return json.loads(toks.next()[1])
    return None


def _parse_function(toks: _Tokens, funcs: dict[str, Function]) -> Function:
    toks.expect("func")
    kind, sym, line = toks.next()
    if kind != "sym":
        raise ParseError(f"line {line}: expected @name after func")
    env: dict[str, Value] = {}
    inputs: list[Value] = []
    in_labels: list[str | None] = []
    toks.expect("(")
    while not toks.accept(")"):
        if inputs:
            toks.expect(",")
        _, name, _ = toks.next()
        toks.expect(":")
        v = Value(_parse_type(toks))
        env[name] = v
        inputs.append(v)
        in_labels.append(_label(toks))
    toks.expect("->")
    toks.expect("(")
    while not toks.accept(")"):
        toks.next()
    fattrs = {}
    if toks.accept("attributes"):
        fattrs = _parse_attrs(toks)
    toks.expect("{")
    ops: list[Op] = []
    callees: dict[str, Function] = {}
    while toks.peek()[1] != "return":
        ops.append(_parse_op(toks, env, funcs, callees))
    toks.next()
    outputs: list[Value] = []
    out_labels: list[str | None] = []
    while toks.peek(skip_nl=False)[0] not in ("nl", "comment", "eof") and toks.peek()[1] != "}":
        if outputs:
            toks.expect(",")
        _, name, ln = toks.next()
        outputs.append(_lookup(env, name, ln))
        out_labels.append(_label(toks))
    toks.expect("}")
    fattrs = {k: _tuples(v) for k, v in fattrs.items()}
    return Function(sym[1:], inputs, ops, outputs, in_labels, out_labels, callees, fattrs)


def _tuples(v: Any) -> Any:
    return tuple(_tuples(x) for x in v) if isinstance(v, list) else v


def _lookup(env: dict[str, Value], name: str, line: int) -> Value:
    if name not in env:
        raise ParseError(f"line {line}: {name} is used before it is defined")
    return env[name]


def _parse_op(toks: _Tokens, env: dict[str, Value], funcs: dict[str, Function],
              callees: dict[str, Function]) -> Op:
    res_names = _parse_result_names(toks)
    kind, name, line = toks.next()
    if kind != "ident":
        raise ParseError(f"line {line}: expected an op name, found {name!r}")
    operands = _parse_operands(toks, env, line)
    attrs = _parse_attrs(toks)
    types = _parse_result_types(toks) if res_names else []
    loc = toks.next(skip_nl=False)[1] if toks.peek(skip_nl=False)[0] == "comment" else None
    if len(types) != len(res_names):
        raise ParseError(f"line {line}: {len(res_names)} results but {len(types)} types")
    attrs = _fix_attrs(name, attrs, types, line)
    op = _make(name, operands, attrs, loc, types, funcs, callees, line)
    if [r.type for r in op.results] != types:
        raise ParseError(f"line {line}: '{name}' gives {', '.join(str(r.type) for r in op.results)}, "
                         f"but the text says {', '.join(map(str, types))}")
    for n, r in zip(res_names, op.results, strict=True):
        env[n] = r
    return op


def _parse_result_names(toks: _Tokens) -> list[str]:
    """``%3, %4 =`` before an op (none for an op without results)."""
    names: list[str] = []
    if toks.peek()[0] == "value":
        while True:
            names.append(toks.next()[1])
            if not toks.accept(","):
                break
        toks.expect("=")
    return names


def _parse_operands(toks: _Tokens, env: dict[str, Value], line: int) -> list[Value]:
    operands: list[Value] = []
    while toks.peek()[0] == "value":
        operands.append(_lookup(env, toks.next()[1], line))
        if not toks.accept(","):
            break
    return operands


def _parse_result_types(toks: _Tokens) -> list[TensorType]:
    """``: f32[3], i64[]`` after an op's attributes."""
    toks.expect(":")
    types = [_parse_type(toks)]
    while toks.peek(skip_nl=False)[1] == ",":
        toks.next()
        types.append(_parse_type(toks))
    return types


def _make(name: str, operands: list[Value], attrs: dict[str, Any], loc: str | None,
          types: list[TensorType], funcs: dict[str, Function], callees: dict[str, Function],
          line: int) -> Op:
    """The op, with an op's own error reported as a parse error on its line."""
    try:
        if name in OPS and OPS[name].calls:
            callee = funcs.get(attrs.get("callee", ""))
            if callee is None:
                raise ParseError(f"line {line}: call of unknown function @{attrs.get('callee')}")
            callees[callee.name] = callee
            return make_op(name, operands, attrs, loc, result_types=types)
        return make_op(name, operands, attrs, loc)
    except ParseError:
        raise
    except YotaError as e:
        raise ParseError(f"line {line}: {e}") from e


def _fix_attrs(name: str, attrs: dict[str, Any], types: list[TensorType],
               line: int) -> dict[str, Any]:
    if name == "const":
        if len(types) != 1:
            raise ParseError(f"line {line}: const needs one result type")
        t = types[0]
        try:
            value = np.array(attrs["value"], dtype=t.dtype)
            if value.size == 0 == t.size:  # an empty constant prints as []
                value = value.reshape(t.shape)
            attrs["value"] = np.broadcast_to(value, t.shape)
        except (KeyError, ValueError) as e:
            raise ParseError(f"line {line}: bad constant for {t}: {e}") from e
    return {k: _tuples(v) for k, v in attrs.items()}
