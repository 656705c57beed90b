"""Ceph's leading NOT, end to end: it negates the whole OR-chain after it (issue #14)."""

from __future__ import annotations

import pytest

from flight_storage.execution.engine import InputSpec, SelectEngine
from flight_storage.storage.sources import BytesSource

QUERY = "select _1 from s3object where not _1 = '1' and _1 = '3' or _1 = '2'"


@pytest.mark.parametrize(("flavor", "rows"), [
    ("ceph", ["1", "3"]),  # not ((_1 = 1 and _1 = 3) or _1 = 2)
    ("aws", ["2", "3"]),  # ((not _1 = 1) and _1 = 3) or _1 = 2
])
def test_leading_not_follows_each_flavours_grammar(flavor: str, rows: list[str]) -> None:
    engine = SelectEngine()
    plan = engine.plan(QUERY, BytesSource(b"1\n2\n3\n", "b/k"), InputSpec("csv"), flavor=flavor)
    assert [v for batch in engine.execute(plan) for v in batch.column(0).to_pylist()] == rows
