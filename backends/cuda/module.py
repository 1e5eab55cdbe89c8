"""Lowering an ``ir.Function`` and its callees to one ``Module`` (``lower.py``, through the
emitter table of ``emit.py``)."""

from __future__ import annotations

from yota.ir.core import Function

from .emit import EMITTERS
from .kernel import Config
from .lower import FnGen, Module


def lower_module(fn: Function, cfg: Config) -> Module:
    mod = Module(cfg, callees=fn.all_callees(), name=fn.name, main=fn.name,
                 inputs=list(fn.input_types), outputs=list(fn.output_types),
                 labels=list(fn.input_labels))
    mod.plans[fn.name] = FnGen(mod, fn, EMITTERS).run()
    return mod
