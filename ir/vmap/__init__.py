"""Batching: ``vmap(fn, in_axes, size)``, a batching rule per op (``rules*.py``).

See ``batcher.py`` for the transformation and ``base.py`` for the rule table.
"""

from __future__ import annotations

from . import rules, rules_index, rules_loop  # noqa: F401 - they fill BATCH_RULES
from .base import BATCH_RULES, BatchRule, VmapError
from .batcher import Batcher, vmap

__all__ = ["vmap", "Batcher", "BatchRule", "VmapError", "BATCH_RULES"]
