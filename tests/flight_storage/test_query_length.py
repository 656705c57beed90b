"""The statement length limit: one rule (select_dialect.translate.check_query_length), the
configured limit honoured by the engine and the translator alike."""

from __future__ import annotations

import pytest

from flight_storage.execution.engine import EngineConfig
from flight_storage.execution.select_local import run_select
from select_dialect import SelectDialectError
from select_dialect.translate import MAX_QUERY_CHARS, check_query_length

_LONG = "select _1 from s3object where _1 = '" + "x" * 300_000 + "'"


def _run(sql: str, config: EngineConfig | None = None) -> bytes:
    return run_select(b"a\n", sql, input_serialization={"CSV": {}},
                      output_serialization={"CSV": {}}, flavor="aws", config=config).records


def test_the_default_limit_is_awss_256_kb() -> None:
    assert MAX_QUERY_CHARS == 256 * 1024
    with pytest.raises(SelectDialectError) as info:
        _run(_LONG)
    assert info.value.code == "ExpressionTooLong"
    assert "300" in str(info.value) and str(MAX_QUERY_CHARS) in str(info.value)


def test_a_larger_configured_limit_reaches_the_translator() -> None:
    # the translator used to refuse at a fixed 256 KB whatever the server was configured with
    assert _run(_LONG, EngineConfig(max_query_chars=400_000)) == b""


def test_a_smaller_configured_limit_names_its_setting() -> None:
    with pytest.raises(SelectDialectError) as info:
        check_query_length("select 1", 4, what="expression", setting="--max-query-chars")
    assert str(info.value) == (
        "ExpressionTooLong: expression is 8 characters; the limit (--max-query-chars) is 4")
    with pytest.raises(SelectDialectError):
        _run("select _1 from s3object", EngineConfig(max_query_chars=10))
