"""Every case of the shared conformance corpus as one pytest test (ids = case ids).

Skips come from ``skips.json``; ``known_failures.json`` entries are strict xfails. Inputs are
materialized once per session (cases with equal generator specs share them).
"""

from __future__ import annotations

from typing import Any

import pytest

from . import corpus

# Generated inputs at least this large make a case slow (it stays in the run, marked).
_SLOW_ROWS = 100_000


def _marks(case: corpus.Case, skips: corpus.SkipRules, known: dict[str, str]) -> list[Any]:
    marks: list[Any] = []
    reason = skips.reason(case)
    if reason is not None:
        marks.append(pytest.mark.skip(reason=reason))
    if case.id in known:
        marks.append(pytest.mark.xfail(strict=True, raises=AssertionError, reason=known[case.id]))
    if _generated_rows(case) >= _SLOW_ROWS:
        marks.append(pytest.mark.slow)
    return marks


def _generated_rows(case: corpus.Case) -> int:
    """Rows of the case's generator spec (0 when there is none or it is not a spec object)."""
    spec = case.get("generator", {})
    rows = spec.get("rows", 0) if isinstance(spec, dict) else 0
    return rows if isinstance(rows, int) else 0


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """Parametrize ``case`` over every ``*.jsonl`` of the corpus directory."""
    if "case" not in metafunc.fixturenames:
        return
    cases = corpus.load_cases(corpus.corpus_files(corpus.default_corpus_dir()))
    skips = corpus.SkipRules.load(corpus.DEFAULT_SKIPS)
    known = corpus.load_known_failures(corpus.DEFAULT_KNOWN_FAILURES)
    metafunc.parametrize(
        "case", [pytest.param(c, id=c.id, marks=_marks(c, skips, known)) for c in cases]
    )


@pytest.fixture(scope="session")
def run_context() -> corpus.RunContext:
    """One engine and one input cache for the whole session."""
    return corpus.RunContext(engine=corpus.load_engine(), corpus_dir=corpus.default_corpus_dir())


def test_case(case: corpus.Case, run_context: corpus.RunContext) -> None:
    outcome = corpus.run_case(case, run_context)
    if outcome.status == corpus.SKIPPED:
        pytest.skip(outcome.detail)
    assert outcome.status == corpus.PASSED, (
        f"{outcome.detail}\nquery:    {outcome.query}\n"
        f"expected: {outcome.expected!r}\ngot:      {outcome.got!r}"
    )
