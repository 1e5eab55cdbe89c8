"""Yota's typed SSA IR: types, ops, functions, printer/parser, verifier, interpreter."""

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
from .parser import parse, parse_module
from .printer import print_function
from .types import TensorType, as_dtype, dtype_name, type_of
from .verifier import maybe_verify, verify

__all__ = [
    "Builder", "Function", "Op", "Value", "make_op", "GuardFailed", "IRTypeError",
    "MissingRuleError", "ParseError", "SignatureError", "TraceError", "UnsupportedError",
    "VerifyError", "YotaError", "run", "OPS", "OpDef", "get_opdef", "parse", "parse_module",
    "print_function", "TensorType", "as_dtype", "dtype_name", "type_of", "maybe_verify",
    "verify",
]
