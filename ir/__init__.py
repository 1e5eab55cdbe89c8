"""Yota's typed SSA IR: types, ops, functions, printer/parser, verifier, interpreter."""

from typing import TYPE_CHECKING, Any

from .core import Builder, Function, Op, Value, make_op
from .errors import (
    GuardFailed,
    IRTypeError,
    MissingRuleError,
    ParseError,
    SignatureError,
    TraceError,
    UnsupportedError,
    VerifyError,
    YotaError,
)
from .interpreter import run
from .ops import OPS, OpDef, get_opdef
from .printer import print_function
from .types import TensorType, as_dtype, dtype_name, type_of
from .verifier import maybe_verify, verify

if TYPE_CHECKING:
    from .parser import parse, parse_module


def __getattr__(name: str) -> Any:
    """``parse`` and ``parse_module`` (the parser, which imports json, is loaded on first
    use: importing Yota parses nothing)."""
    if name in ("parse", "parse_module"):
        from . import parser

        return getattr(parser, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")

__all__ = [
    "Builder", "Function", "Op", "Value", "make_op", "GuardFailed", "IRTypeError",
    "MissingRuleError", "ParseError", "SignatureError", "TraceError", "UnsupportedError",
    "VerifyError", "YotaError", "run", "OPS", "OpDef", "get_opdef", "parse", "parse_module",
    "print_function", "TensorType", "as_dtype", "dtype_name", "type_of", "maybe_verify",
    "verify",
]
