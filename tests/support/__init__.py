"""Helpers the tests share: case generators, precision bounds, example programs, paths.
Imported as ``support`` (pytest's ``pythonpath`` holds ``tests/``)."""

from pathlib import Path

TESTS = Path(__file__).resolve().parent.parent  # tests/
ROOT = TESTS.parent  # the repository
