"""Builtin branches of the lowering answer exactly what the UDFs answer.

Casts, LIKE and timestamp functions run as DataFusion builtins where those are exact, and
fall back to the UDF for the rows the builtins cannot answer (see
``select_dialect.lowering``). Each test runs one value per query through the translation
and through the UDF-only reference, and wants the same value or the same s3-select error.
The timestamp reference is the same translation with the common-layout guard made to match
nothing, so every row takes the UDF branch.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import datafusion
import pyarrow as pa
import pytest

from flight_storage.execution import udfs
from flight_storage.execution.udfs import parse_processing_error, register_udfs
from select_dialect import timestamp_nodes, translate, udf_names
from select_dialect.kinds import Column
from select_dialect.like_patterns import like_to_builtin_pattern, like_to_regex

NUMBER_TEXTS = [
    "0", "17", "-17", "+17", "0012", " 5", "5 ", "\t5\n", "\u00a05", "\u30005 ", "5\x00",
    "9223372036854775807", "9223372036854775808", "-9223372036854775808", "1.5", ".5", "5.",
    "-0", "+.5e3", "1e3", "1E-3", "1e400", "-1e400", "inf", "-inf", "Infinity", "NaN", "nan",
    "1_0", "0x10", "1.5e", "e5", "-", "", "abc", "12abc", "１２", None,
]  # fmt: skip

TIMESTAMP_TEXTS = [
    "2024-01-01T00:04:52Z", "2023-12-31T16:28:09-07:45", "2023-12-31T16:28:09+14:00",
    "2023-12-31T16:28:09", "2023-12-31T16:28:09.5Z", "2023-12-31T16:28:09.123456789-03:30",
    "2024-02-29T23:59:59Z", "2023-02-29T00:00:00Z", "2023-04-31T00:00:00Z", "2023-13-01T00:00:00Z",
    "2023-12-31T24:00:00Z", "2023-12-31T16:28:60Z", "2023-12-31T16:28:09+0500",
    "2023-12-31T16:28:09+05", "2023-12-31T16:28:09+25:00", "2023-12-31T16:28:09+05:70",
    "2023-12-31t16:28:09z", "2023-12-31 16:28:09Z", " 2023-12-31T16:28:09Z",
    "2023-12-31T16:28:09.1234567891Z", "2023-12-31T16:28:09 +05:00", "2023-12-31T16:28Z",
    "2023-12-31T", "2023T", "20231231T162809Z", "1500-01-01T00:00:00Z", "2262-04-11T23:47:16Z",
    "1677-09-21T00:12:44Z", "0000-01-01T00:00:00Z", "2023-12-31T16:28:09-00:00",
    "2023-00-10T00:00:00Z", "2023-01-00T00:00:00Z", "2023-01-32T00:00:00Z",
    "2023-19-01T00:00:00Z", "2023-01-39T00:00:00Z", "2023-12-31T29:00:00Z",
    "2023-12-31T16:28:09+24:00", "2023-12-31T16:28:09-29:59", "2023-12-31T16:28:09+23:59",
    "2023-12-31T16:28:09.000000000Z", "2023-12-31T16:28:09.", "2023-12-31T162809Z",
    "2023-12-31T16:28:09ZZ", "2023-12-31T16:28:09+05:00Z", "2023-12-31T16:28:09\n", "x", None,
]  # fmt: skip

TIMESTAMP_QUERIES = [
    *(f"select extract({part} from to_timestamp(_1)) from s3object"
      for part in ("year", "month", "day", "hour", "minute", "second", "week",
                   "timezone_hour", "timezone_minute")),
    *(f"select date_diff({part}, to_timestamp(_1), to_timestamp('2020-03-01T10:00:00+02:00')) "
      "from s3object" for part in ("year", "month", "day", "hour", "minute", "second")),
    ("select date_diff(hour, to_timestamp('2020-03-01T10:00:00Z'), to_timestamp(_1)) "
    "from s3object"),
    *(f"select extract(hour from date_add({part}, 5, to_timestamp(_1))) from s3object"
      for part in ("year", "month", "day", "hour", "minute", "second")),
    ("select date_add(day, -3, to_timestamp(_1)) > to_timestamp('2023-12-30T00:00:00Z') "
    "from s3object"),
    "select to_timestamp(_1) = to_timestamp('2024-01-01T00:04:52Z') from s3object",
    "select to_timestamp(_1) < to_timestamp('2023-12-31T23:28:09Z') from s3object",
    "select cast(_1 as timestamp) from s3object",
    *("select to_string(to_timestamp(_1), '" + pattern.replace("'", "''") + "') from s3object"
      for pattern in ("yyyy-MM-dd", "y yy yyy yyyy", "M MM MMM MMMM", "d dd H HH h hh a",
                      "m mm s ss", "yyyy-MM-dd'T'HH:mm:ss", "dd/MM/yy 'o''clock' %", "EEE Q",
                      "HH:mm:ss.SSS", "MMMMM", "yyyyy", "XXX x", "n")),
]  # fmt: skip


_SHARED: list[datafusion.SessionContext] = []


def _ctx(values: Sequence[str | None], *, shared: bool = False) -> datafusion.SessionContext:
    """A session with the UDFs and ``s3object`` holding ``values`` as ``_1``; ``shared``
    reuses one session (for the many one-row queries that register nothing else)."""
    if not shared:
        ctx = datafusion.SessionContext()
        register_udfs(ctx)
    else:
        if not _SHARED:
            _SHARED.append(datafusion.SessionContext())
            register_udfs(_SHARED[0])
        ctx = _SHARED[0]
        ctx.deregister_table("s3object")
    ctx.register_record_batches("s3object", [[pa.record_batch({"_1": pa.array(values, pa.utf8())})]])
    return ctx


def _outcome(sql: str, value: str | None) -> tuple[str, Any]:
    """("value", the answer) or ("error", the s3-select error code) of ``sql`` on one row."""
    try:
        table = _ctx([value], shared=True).sql(sql).to_arrow_table()
    except Exception as error:  # noqa: BLE001 - the outcome is compared, whatever it is
        parsed = parse_processing_error(str(error))
        return "error", parsed[0] if parsed else str(error)
    column = table.column(0).combine_chunks()
    if isinstance(column.type, pa.StructType):
        column = udfs.timestamp_to_string(column)
    return "value", column.to_pylist()[0]


def _reference(sql: str, monkeypatch: pytest.MonkeyPatch) -> str:
    with monkeypatch.context() as patch:
        patch.setattr(timestamp_nodes, "_COMMON_TIMESTAMP", "x^")  # matches no text
        return translate(sql, input_format="csv").sql


@pytest.mark.parametrize("text", NUMBER_TEXTS)
@pytest.mark.parametrize(("function", "udf"), [("int", udf_names.CAST_INT),
                                               ("float", udf_names.CAST_FLOAT)])
def test_cast_builtin_branch_agrees_with_the_udf(function: str, udf: str, text: str | None) -> None:
    emitted = translate(f"select {function}(_1) from s3object", input_format="csv").sql
    assert "TRY_CAST" in emitted
    value = None if text == "" else text
    assert _outcome(emitted, value) == _outcome(f"select {udf}(_1) from s3object", value)


@pytest.mark.parametrize("text", TIMESTAMP_TEXTS)
@pytest.mark.parametrize("query", TIMESTAMP_QUERIES)
def test_timestamp_builtin_branch_agrees_with_the_udf(
    query: str, text: str | None, monkeypatch: pytest.MonkeyPatch
) -> None:
    emitted = translate(query, input_format="csv").sql
    reference = _reference(query, monkeypatch)
    assert _outcome(emitted, text) == _outcome(reference, text)


_YEAR_EDGES = [
    "1677-09-21T00:12:44Z", "1677-12-31T23:59:59Z", "1678-01-01T00:00:00Z",
    "2023-12-31T23:59:59.999999999Z", "2024-01-01T00:00:00Z", "2024-01-01T00:30:00+01:00",
    "2023-12-31T23:30:00-01:00", "2261-12-31T23:59:59Z", "2262-01-01T00:00:00Z",
    "2262-04-11T23:47:16Z", "0001-01-01T00:00:00Z", "9999-12-31T23:59:59Z", "2006T",
]  # fmt: skip
_YEAR_COMPARISONS = {"=": int.__eq__, "<>": int.__ne__, "<": int.__lt__, "<=": int.__le__,
                     ">": int.__gt__, ">=": int.__ge__}
_FLIPPED = {"=": "=", "<>": "<>", "<": ">", "<=": ">=", ">": "<", ">=": "<="}


@pytest.mark.parametrize("year", [13, 1677, 1678, 2023, 2024, 2261, 2262, 3000])
def test_extracted_year_compared_with_a_literal_year(year: int) -> None:
    """``extract(year …) <op> n`` as DataFusion's range rewrite answers it (the lowering lets
    it for 1678 <= n <= 2261) equals Python comparing the extracted year, both ways round, on
    the years at the edges of nanosecond timestamps and across offsets at New Year."""
    extract = "extract(year from to_timestamp(_1))"
    projection = translate(f"select {extract} from s3object", input_format="csv").sql
    outcomes = {t: _outcome(projection, t) for t in TIMESTAMP_TEXTS + _YEAR_EDGES}
    texts = [t for t, (kind, _) in outcomes.items() if kind == "value"]
    years = {t: outcomes[t][1] for t in texts}
    assert len([t for t in texts if years[t] is not None]) > 20
    columns = []
    for op in _YEAR_COMPARISONS:
        columns += [f"{extract} {op} {year}", f"{year} {_FLIPPED[op]} {extract}"]
    sql = translate(f"select {', '.join(columns)} from s3object", input_format="csv").sql
    lifted = sql.count("AS DOUBLE")
    assert lifted == (0 if 1678 <= year <= 2261 else len(columns))
    got = _ctx(texts).sql(sql).to_pylist()
    for text, row in zip(texts, got, strict=True):
        answers = list(row.values())
        for i, (op, compare) in enumerate(_YEAR_COMPARISONS.items()):
            expected = None if years[text] is None else compare(years[text], year)
            assert answers[2 * i] == answers[2 * i + 1] == expected, (text, op, year)


def test_common_layout_rows_never_reach_the_udf() -> None:
    """DataFusion 55 runs a CASE branch only on the rows that reach it (the design relies on
    it): common-layout rows never call the UDF, the other rows do."""
    seen = {"values": 0}

    def counting_to_timestamp(values: pa.Array) -> pa.Array:
        seen["values"] += len(values)
        return udfs.to_timestamp(values)

    values = ["2024-01-01T00:04:52Z"] * 50 + ["2024-01-01T00:04Z"] * 3 + [None] * 2
    ctx = _ctx(values)
    ctx.register_udf(datafusion.udf(counting_to_timestamp, [pa.utf8()], udfs.S3_TIMESTAMP,
                                    "immutable", name=udf_names.TO_TIMESTAMP))
    sql = translate("select count(*) from s3object where extract(hour from to_timestamp(_1)) = 0",
                    input_format="csv").sql
    (count,) = ctx.sql(sql).to_pydict().values()
    assert count == [53]
    assert seen["values"] == 5


def test_timestamp_functions_emit_builtins_on_the_common_layout() -> None:
    sql = translate("select extract(year from to_timestamp(_1)), "
                    "date_diff(day, to_timestamp(_1), to_timestamp(_2)), "
                    "to_string(to_timestamp(_1), 'yyyy-MM-dd') from s3object",
                    input_format="csv").sql
    assert "to_char(" in sql
    assert "regexp_like(" in sql
    assert udf_names.DATE_DIFF not in sql
    assert udf_names.TO_STRING not in sql


LIKE_VALUES = ["", "a", "ab", "a\nb", "a\\b", "a%b", "a_b", "aéb", "abc", "x%", "%", "_", "\\",
               "a#b", "[ab]", "ac"]
LIKE_PATTERNS = [
    ("a%", None), ("%b", None), ("a_b", None), ("a\\b", None), ("a\\%", None), ("%\\%", None),
    ("a#%b", "#"), ("a#_b", "#"), ("a##b", "#"), ("a#", "#"), ("%#%", "#"), ("x\\%", "\\"),
    ("\\\\", "\\"), ("a$_b", "$"), ("[a", None), ("_", None), ("%", None), ("", None),
    ("a%%b", None), ("a\\_b", None),
]  # fmt: skip


@pytest.mark.parametrize(("pattern", "escape"), LIKE_PATTERNS)
def test_builtin_like_matches_the_regex_translation(pattern: str, escape: str | None) -> None:
    builtin = like_to_builtin_pattern(pattern, escape)
    assert builtin is not None
    ctx = _ctx(LIKE_VALUES)
    ctx.register_record_batches("p", [[pa.record_batch({"pat": pa.array([builtin]),
                                                        "re": pa.array([like_to_regex(pattern, escape)])})]])
    rows = ctx.sql('select "_1" as v, "_1" LIKE (select pat from p) as builtin, '
                   'regexp_like("_1", (select re from p)) as regex from s3object').to_pylist()
    assert [r["builtin"] for r in rows] == [r["regex"] for r in rows], rows


def test_like_with_a_class_keeps_the_regex() -> None:
    assert like_to_builtin_pattern("a[bc]%", None) is None
    assert "regexp_like" in translate("select _1 from s3object where _1 like 'a[bc]%'",
                                      input_format="csv").sql


@pytest.mark.parametrize(
    ("query", "expected"),
    [
        ("select _1 from s3object where _1 not like 'a%'", [("b",), ("",)]),
        ("select _1 from s3object where _1 not like 'a#%' escape '#'", [("abc",), ("b",), ("",)]),
        ("select _1 from s3object where not (_1 like 'a%')", [("b",), ("",)]),
    ],
)
def test_not_like_negates(query: str, expected: list[tuple[str]]) -> None:
    ctx = _ctx(["abc", "a%", "b", ""])
    rows = ctx.sql(translate(query, input_format="csv").sql).to_pylist()
    assert [tuple(r.values()) for r in rows] == expected


NATIVE_QUERIES = [
    *(f"select extract({part} from t) from s3object"
      for part in ("year", "month", "day", "hour", "minute", "second", "week")),
    "select date_diff(hour, t, to_timestamp('2020-03-01T10:00:00+02:00')) from s3object",
    "select date_diff(month, to_timestamp('2020-03-31T10:00:00Z'), t) from s3object",
    "select t < to_timestamp('2020-03-01T10:00:00Z') from s3object",
    "select to_string(t, 'yyyy-MM-dd HH:mm:ss a') from s3object",
    "select extract(minute from date_add(minute, 90, t)) from s3object",
]  # fmt: skip

NATIVE_COLUMNS = [
    pa.array([1583056800123456, None, -2208988800000000, 4102444799999999],
             pa.timestamp("us")),
    pa.array([1583056800123456, 1583020000000000], pa.timestamp("us", tz="UTC")),
    pa.array([18322, 0, -1], pa.date32()),
]


@pytest.mark.parametrize("values", NATIVE_COLUMNS, ids=lambda a: str(a.type))
@pytest.mark.parametrize("query", NATIVE_QUERIES)
def test_native_timestamp_builtin_branch_agrees_with_the_udf(
    query: str, values: pa.Array, monkeypatch: pytest.MonkeyPatch
) -> None:
    kind = "date" if pa.types.is_date(values.type) else "timestamp"

    def emitted() -> str:
        return translate(query, input_format="parquet", columns=[Column("t", kind)]).sql

    builtin = emitted()
    with monkeypatch.context() as patch:
        patch.setattr(timestamp_nodes, "_zone_free_instant", lambda _ts: None)
        reference = emitted()
    assert builtin != reference
    ctx = datafusion.SessionContext()
    register_udfs(ctx)
    ctx.register_record_batches("s3object", [[pa.record_batch({"t": values})]])
    assert ctx.sql(builtin).to_pylist() == ctx.sql(reference).to_pylist()
