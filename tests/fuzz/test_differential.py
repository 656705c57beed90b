"""The differential fuzzer in CI: engine vs the independent oracle (issue #13, item 1), and
the standard flavour vs DuckDB (issue #31, point 2), on CSV and on JSON Lines (issue #39), and
JOINs DataFusion plans over the tables they name vs DuckDB (issue #39 item 4).

Derandomized (a fixed seed) with a bounded budget: ``FUZZ_EXAMPLES`` examples per flavour and
source (default 100; the six combinations take about 25 s here) and ``FUZZ_STANDARD_EXAMPLES``
standard-SQL cases per test (default 150: about 6 s each for CSV and for JSON Lines, 8 s on a
loaded machine; JOINs of JSON Lines a third of that many, 3 s); ``FUZZ_CACHED_EXAMPLES`` cases
of each fuzzer whose objects the decoded cache keeps, answered from a filled cache (default 50,
twice: see the test). A longer run with fresh seeds: ``python -m tests.fuzz.run --minutes 30``
(``--flavor standard`` for the standard surface alone, with ``--source json`` for its JSON
Lines).
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

import pytest
from hypothesis import HealthCheck, assume, example, given, settings
from hypothesis import strategies as st

from flight_storage.execution import entry_encodings
from flight_storage.execution.decoded_table import ENV_MODE
from tests.fuzz.differential import CACHE_DIR_ENV, check, check_standard
from tests.fuzz.generate import Case_, fuzz_cases
from tests.fuzz.oracle import UndefinedCase
from tests.fuzz.standard_json import json_cases, json_join_cases
from tests.fuzz.standard_sql import StandardCase, join_cases, standard_cases

_EXAMPLES = int(os.environ.get("FUZZ_EXAMPLES", "100"))
_CACHED_EXAMPLES = int(os.environ.get("FUZZ_CACHED_EXAMPLES", "50"))
_STANDARD_EXAMPLES = int(os.environ.get("FUZZ_STANDARD_EXAMPLES", "150"))
_SETTINGS = settings(
    max_examples=_EXAMPLES, derandomize=True, deadline=None, database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much,
                           HealthCheck.data_too_large],
)


def _agree(case: Case_) -> None:
    try:
        outcome = check(case)
    except UndefinedCase:
        assume(False)  # the generator's rare excursions outside the specification
        return
    assert outcome.agrees, outcome.describe(case)


@pytest.mark.parametrize("source", ["csv", "json", "parquet"])
@pytest.mark.parametrize("flavor", ["ceph", "aws"])
def test_engine_agrees_with_the_oracle(flavor: str, source: str) -> None:
    @_SETTINGS
    @given(fuzz_cases(flavor, source))
    def run(case: Case_) -> None:
        _agree(case)

    run()


_NULL_BOUND = ("SELECT DISTINCT (CASE WHEN (CAST(n1 AS BIGINT) BETWEEN CAST(NULL AS BIGINT) AND "
               "CAST(n1 AS BIGINT)) THEN COALESCE(CAST(n1 AS BIGINT), CAST(n1 AS BIGINT)) ELSE 0 END) AS x FROM ")
_AGGREGATE_NULLABILITY = StandardCase(
    data=b"n1\n1\n", columns=[("n1", "int")], ours=_NULL_BOUND + "s3object",
    duck=_NULL_BOUND + "t", ordered=False)
"""Found by this fuzzer: DataFusion's simplifier proved the DISTINCT key non-null where the
physical plan says nullable, and DataFusion refused its own plan."""


def test_standard_flavour_agrees_with_duckdb() -> None:
    @settings(_SETTINGS, max_examples=_STANDARD_EXAMPLES)
    @given(standard_cases())
    @example(_AGGREGATE_NULLABILITY)
    def run(case: StandardCase) -> None:
        outcome = check_standard(case)
        assert outcome.agrees, outcome.describe(case)

    run()


_SELF_NAMED = StandardCase(
    data=b"n1\n1\n", columns=[("n1", "int")],
    ours="SELECT l.*, r.n FROM (SELECT n1 AS k FROM s3object) AS l JOIN (SELECT n1 AS k, "
         "count(*) AS n FROM s3object GROUP BY n1) AS r ON l.k = r.k",
    duck="SELECT l.*, r.n FROM (SELECT n1 AS k FROM t) AS l JOIN (SELECT n1 AS k, "
         "count(*) AS n FROM t GROUP BY n1) AS r ON l.k = r.k",
    ordered=False)
"""Found by this fuzzer: a table the statement names ``s3object`` collided with the name each
table's input is registered under while its view is made."""


def test_joins_agree_with_duckdb() -> None:
    @settings(_SETTINGS, max_examples=_STANDARD_EXAMPLES)
    @given(join_cases())
    @example(_SELF_NAMED)
    def run(case: StandardCase) -> None:
        outcome = check_standard(case, joined=True)
        assert outcome.agrees, outcome.describe(case)

    run()


def test_json_lines_agree_with_duckdb() -> None:
    @settings(_SETTINGS, max_examples=_STANDARD_EXAMPLES)
    @given(json_cases())
    def run(case: StandardCase) -> None:
        outcome = check_standard(case)
        assert outcome.agrees, outcome.describe(case)

    run()


def test_joins_of_json_lines_agree_with_duckdb() -> None:
    @settings(_SETTINGS, max_examples=max(1, _STANDARD_EXAMPLES // 3))
    @given(json_join_cases())
    def run(case: StandardCase) -> None:
        outcome = check_standard(case, joined=True)
        assert outcome.agrees, outcome.describe(case)

    run()


def _oracle_agrees(case: Case_) -> None:
    _agree(case)


def _standard_agrees(case: StandardCase) -> None:
    outcome = check_standard(case)
    assert outcome.agrees, outcome.describe(case)


def _join_agrees(case: StandardCase) -> None:
    outcome = check_standard(case, joined=True)
    assert outcome.agrees, outcome.describe(case)


_THROUGH_THE_CACHE: dict[str, tuple[Callable[[], st.SearchStrategy], Callable[..., None]]] = {
    "ceph-csv": (lambda: fuzz_cases("ceph", "csv"), _oracle_agrees),
    "aws-csv": (lambda: fuzz_cases("aws", "csv"), _oracle_agrees),
    "standard": (standard_cases, _standard_agrees),
    "joins": (join_cases, _join_agrees),
    "json-lines": (json_cases, _standard_agrees),
}
"""Each fuzzer whose objects the decoded cache keeps (CSV read by DataFusion's reader, JSON
Lines read as a typed table): its case strategy and its check."""


@pytest.mark.parametrize("dictionaries", ["chosen", "every text column"])
@pytest.mark.parametrize("fuzzer", sorted(_THROUGH_THE_CACHE))
def test_fuzzers_agree_when_every_answer_comes_from_a_filled_cache(
        fuzzer: str, dictionaries: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue #36: the same oracles, every cacheable object's answer read from its filled
    entry (``fill-first``); entries must have been filled, or the test proved nothing. The
    generated objects are small, so few text columns would be typed as dictionaries by the
    entry's rule: a second run types every one so."""
    folder = tmp_path / "decoded"
    monkeypatch.setenv(CACHE_DIR_ENV, str(folder))
    monkeypatch.setenv(ENV_MODE, "fill-first")
    if dictionaries == "every text column":
        monkeypatch.setattr(entry_encodings, "DICTIONARY_TYPE_SHARE", 1.0)
    strategy, agrees = _THROUGH_THE_CACHE[fuzzer]

    @settings(_SETTINGS, max_examples=_CACHED_EXAMPLES)
    @given(strategy())
    def run(case: Case_ | StandardCase) -> None:
        agrees(case)

    run()
    entries = list(folder.glob("*.parquet")) if folder.exists() else []
    assert len(entries) >= _CACHED_EXAMPLES // 4, f"only {len(entries)} entries were filled"
