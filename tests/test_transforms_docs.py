"""The transformations' documentation runs: the README section's examples and the
docstring examples of their modules."""

from __future__ import annotations

import doctest
import importlib
import re
from pathlib import Path

import pytest

MODULES = ["yota.transforms", "yota.jacobians", "yota.vmapping", "yota.ir.autodiff.jvp",
           "yota.ir.autodiff.transpose", "yota.ir.autodiff.jacobian", "yota.ir.vmap.batcher"]


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples(name: str) -> None:
    assert doctest.testmod(importlib.import_module(name)).failed == 0


def test_readme_section_runs_as_doctests() -> None:
    readme = (Path(__file__).parent.parent / "README.md").read_text()
    m = re.search(r"^## Transformations beyond grad.*?\n(.*?)(?=^## )", readme, re.S | re.M)
    assert m, "README.md has no '## Transformations beyond grad' section"
    text = re.sub(r"^```\w*$", "", m.group(1), flags=re.M)
    test = doctest.DocTestParser().get_doctest(text, {}, "README transformations",
                                               "README.md", 0)
    assert len(test.examples) >= 8
    runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    runner.run(test)
    assert runner.failures == 0
