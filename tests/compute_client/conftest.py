"""Spark session and typed test data for the compute-client tests.

``typed_data`` is a data root whose values are chosen to break inexact pushdown: quotes, LIKE
wildcards and bracket characters in strings, unicode (composed and decomposed), NULLs in every
column, NaN and signed zeros, integers past 2**53, decimals, dates and timestamps on both sides
of the epoch. The same rows exist as Parquet (typed) and as CSV (strings).
"""

from __future__ import annotations

import datetime as dt
import decimal
from collections.abc import Iterator
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pacsv
import pyarrow.parquet as pq
import pytest

from tests.conftest import ServerProcess, read_csv_headers, running_server

UTC = dt.UTC

STRINGS: list[str | None] = [
    "plain", "O'Brien", 'say "hi"', "100%", "a_b", "a%b_c", "", None, "Zürich", "東京",
    "emoji 😀", "[x]", "!bang", "back\\slash", "tab\there", "caf\u00e9", "cafe\u0301",
    "ABC", "abc", " lead", "trail ", "%", "_", "a", "ab", "it''s", "a!%b", "null", "NULL",
    "10", "9", "-1", "1e3",
]
INTS: list[int | None] = [0, 1, -1, 2**53 + 1, 2**53, 2**63 - 1, -(2**63), None, 42, 7, 10, 9]
FLOATS: list[float | None] = [
    0.0, -0.0, 1.5, -2.25, float("nan"), float("inf"), float("-inf"), None, 1e300, 5e-324,
    0.1, 2.0**53 + 2,
]
DECIMALS: list[str | None] = ["12.34", "-0.01", "0.00", None, "99999999.99", "12.35", "1.00"]
BOOLS: list[bool | None] = [True, False, None]
DATES: list[dt.date | None] = [
    dt.date(1970, 1, 1), dt.date(2024, 2, 29), dt.date(1969, 12, 31), None, dt.date(1, 1, 1),
    dt.date(9999, 12, 31), dt.date(2024, 3, 1),
]
TIMESTAMPS: list[dt.datetime | None] = [
    dt.datetime(2024, 1, 1, tzinfo=UTC),
    dt.datetime(2024, 1, 1, 0, 0, 0, 123456, tzinfo=UTC),
    dt.datetime(1969, 12, 31, 23, 59, 59, 999999, tzinfo=UTC),
    None,
    dt.datetime(2024, 6, 30, 22, 15, tzinfo=UTC),
    dt.datetime(1, 1, 1, tzinfo=UTC),
    dt.datetime(9999, 12, 31, 23, 59, 59, 999999, tzinfo=UTC),
]


def _cycle(values: list, n: int) -> list:
    return [values[i % len(values)] for i in range(n)]


def typed_table() -> pa.Table:
    """The typed rows: every value list cycled to the length of the longest."""
    n = len(STRINGS)
    return pa.table({
        "id": pa.array(range(n), pa.int64()),
        "s": pa.array(STRINGS, pa.string()),
        "s2": pa.array(list(reversed(STRINGS)), pa.string()),
        "i": pa.array(_cycle(INTS, n), pa.int64()),
        "f": pa.array(_cycle(FLOATS, n), pa.float64()),
        "d": pa.array(
            [decimal.Decimal(v) if v is not None else None for v in _cycle(DECIMALS, n)],
            pa.decimal128(10, 2),
        ),
        "b": pa.array(_cycle(BOOLS, n), pa.bool_()),
        "dt": pa.array(_cycle(DATES, n), pa.date32()),
        "ts": pa.array(_cycle(TIMESTAMPS, n), pa.timestamp("us", tz="UTC")),
    })


def write_typed_data(root: Path) -> None:
    """Write bucket ``t`` with ``typed.parquet`` and ``typed.csv`` (strings, header row)."""
    bucket = root / "t"
    bucket.mkdir(parents=True)
    table = typed_table()
    pq.write_table(table, bucket / "typed.parquet", row_group_size=8)
    # CSV: strings only; an empty field is NULL on both sides, so "" is left out there.
    keep = pc.and_(pc.not_equal(pc.fill_null(table["s"], "x"), ""),
                   pc.not_equal(pc.fill_null(table["s2"], "x"), ""))
    text = table.select(["id", "s", "s2"]).filter(keep)
    pacsv.write_csv(text, bucket / "typed.csv",
                    pacsv.WriteOptions(quoting_style="all_valid"))
    read_csv_headers(bucket, "typed.csv")


@pytest.fixture(scope="session")
def typed_data(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("typed")
    write_typed_data(root)
    return root


@pytest.fixture(scope="session")
def typed_server(typed_data: Path) -> Iterator[ServerProcess]:
    with running_server(typed_data) as server:
        yield server


@pytest.fixture(scope="session")
def spark() -> Iterator[object]:
    from compute_client.spark_source import local_session

    session = local_session("flight-select-tests")
    yield session
    session.stop()
