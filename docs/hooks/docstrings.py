"""A griffe extension for the API reference: Yota's docstrings are prose with doctest
examples and reST-style ``literal::`` blocks; Markdown would read ``>>>`` as nested
quotes, so each run of doctest lines becomes a fenced ``pycon`` block and a trailing
``::`` a colon (the indented block after it is Markdown code already)."""

from __future__ import annotations

import re
from typing import Any

import griffe

_PROMPT = re.compile(r"^(\s*)>>> ")


def fence_doctests(text: str) -> str:
    """Wrap each doctest (a ``>>>`` line up to the next blank line) in a ``pycon`` fence
    and turn a line's trailing ``::`` into ``:`` (tests/project/test_docs.py shows both)."""
    out: list[str] = []
    indent: str | None = None
    for line in text.splitlines():
        if indent is not None and not line.strip():
            out.append(f"{indent}```")
            indent = None
        elif indent is None and (m := _PROMPT.match(line)):
            indent = m.group(1)
            out.append(f"{indent}```pycon")
        if indent is None and line.rstrip().endswith("::"):
            line = line.rstrip()[:-1]
        out.append(line)
    if indent is not None:
        out.append(f"{indent}```")
    return "\n".join(out)


class DoctestFences(griffe.Extension):
    """Rewrites every docstring griffe loads (see ``fence_doctests``)."""

    def on_instance(self, *, obj: griffe.Object, **kwargs: Any) -> None:
        if obj.docstring is not None:
            obj.docstring.value = fence_doctests(obj.docstring.value)
