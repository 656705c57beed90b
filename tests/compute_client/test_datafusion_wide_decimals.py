"""Decimals wider than a double through the DataFusion remote table: named in the server's
projection (the server answers decimals as decimals), exact to the last digit."""

from __future__ import annotations

import decimal
from collections.abc import Iterator

import datafusion
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from compute_client.datafusion_source import register_flight_table
from tests.conftest import ServerProcess, running_server

_WIDE = pa.decimal128(38, 10)
_VALUES = [decimal.Decimal("1234567890123456789012345678.0123456789"),
           decimal.Decimal("-0.0000000001"), None]


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    root = tmp_path_factory.mktemp("wide")
    (root / "t").mkdir()
    pq.write_table(pa.table({"w": pa.array(_VALUES, _WIDE), "i": pa.array([1, 2, 3])}),
                   root / "t" / "wide.parquet")
    with running_server(root) as process:
        yield process


def test_a_wide_decimal_is_projected_by_name_and_exact(server: ServerProcess) -> None:
    ctx = datafusion.SessionContext()
    dataset = register_flight_table(ctx, "t", server.location, "t/wide.parquet")
    table = ctx.sql("SELECT w FROM t").to_arrow_table()
    assert table.column("w").type == _WIDE
    assert table.column("w").to_pylist() == _VALUES
    assert dataset.scans[-1].query.startswith('SELECT s3object."w" FROM')  # named, not *


def test_a_filter_on_a_wide_decimal_stays_on_the_client_and_is_exact(
        server: ServerProcess) -> None:
    ctx = datafusion.SessionContext()
    dataset = register_flight_table(ctx, "t", server.location, "t/wide.parquet")
    rows = ctx.sql("SELECT i FROM t WHERE w > 0").to_pylist()
    assert rows == [{"i": 1}]
    assert dataset.scans[-1].pushed == ""
