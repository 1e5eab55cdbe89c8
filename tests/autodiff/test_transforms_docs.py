"""The transformations' documentation runs: the manual page's examples
(docs/guide/transformations.md) and the docstring examples of their modules."""

from __future__ import annotations

import doctest
import importlib
import re

import pytest
from support import ROOT

MODULES = ["yota.transforms", "yota.jacobians", "yota.vmapping", "yota.ir.autodiff.jvp",
           "yota.ir.autodiff.transpose", "yota.ir.autodiff.jacobian", "yota.ir.vmap.batcher"]


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples(name: str) -> None:
    assert doctest.testmod(importlib.import_module(name)).failed == 0


def test_manual_page_runs_as_doctests() -> None:
    page = ROOT / "docs" / "guide" / "transformations.md"
    text = re.sub(r"^```\w*$", "", page.read_text(), flags=re.M)
    test = doctest.DocTestParser().get_doctest(text, {}, "docs/guide/transformations.md",
                                               str(page), 0)
    assert len(test.examples) >= 8
    runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    runner.run(test)
    assert runner.failures == 0
