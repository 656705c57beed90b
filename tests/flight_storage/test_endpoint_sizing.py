"""Endpoints sized by work (issue 37): an object is cut into one byte range per core only while
each range keeps ``endpoint_min_bytes``, so a range's fixed cost (a DoGet, a plan, a stream)
stays small beside the engine's work on it; a smaller object is one endpoint, read on every core
when its statement asks for no order."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from flight_storage.execution.engine import EngineConfig, InputSpec, SelectEngine
from flight_storage.storage.sources import FileSource

MIB = 1 << 20


@pytest.mark.parametrize(("size", "cores", "ranges"), [
    (100 * MIB, 16, 1),      # 16 ranges of 6 MiB would cost more than they save
    (130 * MIB, 16, 2),      # two ranges of 65 MiB; the 128 MiB cap alone would also make 2
    (1024 * MIB, 16, 16),    # 16 ranges of 64 MiB: one per core
    (1024 * MIB, 64, 16),    # 64 cores: still no range under 64 MiB
    (4096 * MIB, 16, 32),    # over partition_bytes: full waves of 16
    (215 * MIB, 2, 2),
    (30 * MIB, 2, 1),
])
def test_ranges_keep_enough_work(size: int, cores: int, ranges: int) -> None:
    assert SelectEngine(EngineConfig(cores=cores)).range_count(size) == ranges


def test_endpoint_minimum_is_a_setting() -> None:
    engine = SelectEngine(EngineConfig(cores=16, endpoint_min_bytes=4 * MIB))
    assert engine.range_count(100 * MIB) == 16


def test_one_endpoint_reads_its_ranges_at_once_in_record_order(tmp_path: Path) -> None:
    """One endpoint over a CSV of several DataFusion ranges (four cores): every record once,
    in the object's order, whether the ranges run one by one or at once."""
    path = tmp_path / "rows.csv"
    path.write_text("".join(f"{i},{'x' * (i % 7)}\n" for i in range(600_000)))
    source = FileSource(path, path.name, path.stat().st_size)
    expected = [str(i) for i in range(600_000) if i % 7 != 3]
    for cores in (1, 4):
        engine = SelectEngine(EngineConfig(cores=cores))
        plan = engine.plan("SELECT _1 FROM s3object WHERE _2 <> 'xxx'", source,
                           InputSpec("csv"), flavor="standard")
        assert [v for b in engine.execute(plan) for v in b.column(0).to_pylist()] == expected


def test_in_order_stops_its_producers_and_raises_in_turn() -> None:
    from flight_storage.execution.in_order import in_order

    def failing() -> Iterator[int]:
        yield 10
        raise ValueError("third range broke")

    merged = in_order([lambda: iter(range(5)), failing, lambda: iter(range(100, 200))])
    assert [next(merged) for _ in range(6)] == [0, 1, 2, 3, 4, 10]
    with pytest.raises(ValueError, match="third range"):
        next(merged)
    endless = in_order([lambda: iter(range(10**9)), lambda: iter(range(10**9))], depth=2)
    assert next(endless) == 0
    endless.close()  # the producers see the stop and end (daemon threads, bounded queues)
