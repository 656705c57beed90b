"""The pipeline end to end: server started by the job, Spark, Parquet out, summary."""

from __future__ import annotations

import csv
import decimal
import re
from collections import defaultdict
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from compute_client import pipeline
from tests.conftest import SAMPLES


def expected_revenue() -> dict[tuple[str | None, str], tuple[int, decimal.Decimal | None]]:
    """Delivered orders per (region, month) computed straight from the sample CSVs."""
    orders: dict[tuple[str | None, str], int] = defaultdict(int)
    revenue: dict[tuple[str | None, str], decimal.Decimal | None] = {}
    for table in pipeline.ORDER_TABLES:
        with open(SAMPLES / table, newline="", encoding="utf-8") as f:
            for row in csv.DictReader(f):
                if row["status"] != "delivered":
                    continue
                group = (row["region"] or None, row["order_ts"][:7])
                orders[group] += 1
                revenue.setdefault(group, None)
                if row["unit_price"] and row["quantity"]:
                    amount = int(row["quantity"]) * decimal.Decimal(row["unit_price"])
                    revenue[group] = (revenue[group] or 0) + amount
    return {g: (orders[g], revenue[g]) for g in orders}


@pytest.mark.spark
def test_pipeline_end_to_end(spark, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert pipeline.main(["--out", str(tmp_path)], session=spark) == 0
    output = capsys.readouterr().out
    table = pq.read_table(tmp_path / "revenue_by_region_month")
    got = {
        (r["region"], r["month"]): (r["orders"], r["revenue"]) for r in table.to_pylist()
    }
    expected = expected_revenue()
    assert got == expected
    rows_read = int(re.search(r"rows read by Spark:\s+(\d+)", output).group(1))
    assert rows_read == sum(n for n, _ in expected.values())
    scanned = int(re.search(r"bytes scanned by the server:\s+(\d+)", output).group(1))
    sent = int(re.search(r"bytes sent to Spark \(Arrow\):\s+(\d+)", output).group(1))
    assert scanned == sum((SAMPLES / t).stat().st_size for t in pipeline.ORDER_TABLES)
    assert 0 < sent < scanned


@pytest.mark.parametrize(("line", "expected"), [
    ('{"event": "call", "method": "DO_GET", "rows": 3, "bytes": 40, "scanned": 900}',
     {"rows": 3, "bytes": 40, "scanned": 900}),
    ('INFO {"event": "query", "rows": 1, "bytes": 8, "bytes_scanned": 70}',
     {"rows": 1, "bytes": 8, "scanned": 70}),
    ('{"event": "call", "method": "GET_FLIGHT_INFO", "endpoints": 1}', None),
    ("listening on grpc://127.0.0.1:1", None),
    ("{not json", None),
])
def test_partition_read_events(line: str, expected: dict[str, int] | None) -> None:
    assert pipeline.partition_read_event(line) == expected
