"""``RULES``: the derivative rules of every op family, merged into one table."""

from __future__ import annotations

from .registry import Rule
from .rules_elementwise import RULES_ELEMENTWISE
from .rules_index import RULES_INDEX
from .rules_lapack import RULES_LAPACK
from .rules_linalg import RULES_LINALG
from .rules_misc import RULES_MISC
from .rules_reduce import RULES_REDUCE
from .rules_shape import RULES_SHAPE
from .rules_special import RULES_SPECIAL

RULES: dict[str, Rule] = {
    **RULES_ELEMENTWISE, **RULES_REDUCE, **RULES_SHAPE, **RULES_INDEX, **RULES_LINALG,
    **RULES_LAPACK, **RULES_MISC, **RULES_SPECIAL,
}
