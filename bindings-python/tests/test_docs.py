"""The Python examples in the docstrings (module, and the native classes and functions) run."""

from __future__ import annotations

import doctest

import clockflake
import clockflake.django
import clockflake.otel
import clockflake.pydantic
import pytest

DOCUMENTED = [
    clockflake,
    clockflake.Generator,
    clockflake.Parts,
    clockflake.decode,
    clockflake.PublicIds,
    clockflake.restored,
    clockflake.suggest_layout,
    clockflake.is_plausible,
    clockflake.guess_layout,
    clockflake.django,
    clockflake.otel,
    clockflake.pydantic,
]


@pytest.mark.parametrize("obj", DOCUMENTED, ids=lambda o: getattr(o, "__name__", str(o)))
def test_docstring_examples(obj: object) -> None:
    finder = doctest.DocTestFinder(recurse=False)
    tests = finder.find(obj, getattr(obj, "__name__", "obj"), globs=vars(clockflake).copy())
    assert tests and any(t.examples for t in tests), f"{obj} has no examples"
    runner = doctest.DocTestRunner()
    for test in tests:
        runner.run(test)
    assert runner.summarize(verbose=False).failed == 0
