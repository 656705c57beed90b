"""One DataFrame reused across filtered and unfiltered actions, against Spark's own readers.

What PySpark 4.3.0 does (observed with a tracing toy source and read off the JVM classes): a
query whose filters include one Spark can hand to Python runs ``reader(schema)``,
``pushFilters`` and ``partitions()`` on a fresh reader in a driver-side planner worker, and the
JVM stores the result (the pickled reader inside the read function, plus the partitions) on the
relation's ``PythonDataSourceV2``, which every DataFrame derived from one ``load()`` shares. A
later query on that relation with no such filter (a plain count, a collect, an ``OR``) calls no
Python while planning and would read with the stored read function: the pushed predicates of
the last filtered query. ``compute_client.spark_reuse_guard`` installs an optimizer rule that
clears such a stale read, and the source returns every pushed filter to Spark too. The tests
pin that every action answers what Spark's CSV reader answers *and* that the server still
sends only the filtered rows to a filtered action (pushdown kept), batch and streaming; the
two fallbacks (a ``load()`` per action, ``filter_pushdown=false``) and our half of the contract
(no pushed state outlives its reader).
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from compute_client.spark_source import FlightSelectDataSource
from tests.conftest import SAMPLES, ServerProcess, start_server

pytestmark = pytest.mark.spark

ORDERS = "sales/orders/2024-01.csv"
# not product/note: quoted fields with doubled quotes read differently under Ceph's rules
COLUMNS = ["order_id", "region", "quantity", "status"]


def _sorted_rows(frame) -> list[tuple]:
    return sorted((tuple(r) for r in frame.select(COLUMNS).collect()), key=repr)


def _reuse_steps(frame: Callable[[], Any]) -> list[tuple[str, Callable[[], object]]]:
    """The actions, in order; each starts from ``frame()`` (one DataFrame, or a fresh one)."""
    kept: dict[str, Any] = {}

    def returned() -> Any:  # one filtered Dataset, executed twice (its plan is kept)
        if "frame" not in kept:
            kept["frame"] = frame().where("status = 'returned'")
        return kept["frame"]

    def planned_only_then_count() -> object:
        frame().where("quantity = '3'")._jdf.queryExecution().executedPlan()  # never run
        return frame().count()

    return [
        ("count", lambda: frame().count()),
        ("count where status = 'delivered'",
         lambda: frame().where("status = 'delivered'").count()),
        ("count again", lambda: frame().count()),
        ("collect", lambda: _sorted_rows(frame())),
        ("collect where region = 'east'",
         lambda: _sorted_rows(frame().where("region = 'east'"))),
        # Spark never offers an OR to a Python source: planned without calling Python
        ("count where status = 'returned' OR region = 'west'",
         lambda: frame().where("status = 'returned' OR region = 'west'").count()),
        ("count once more", lambda: frame().count()),
        ("collect where status = 'returned'", lambda: _sorted_rows(returned())),
        ("count after planning a filter never run", planned_only_then_count),
        ("collect where status = 'returned', the same Dataset again",
         lambda: _sorted_rows(returned())),
        ("count at the end", lambda: frame().count()),
    ]


def _run(steps: list[tuple[str, Callable[[], object]]]) -> list[tuple[str, object]]:
    return [(label, action()) for label, action in steps]


def _size(value: object) -> int:
    """A count, or the number of rows collected."""
    return len(value) if isinstance(value, list) else int(value)  # type: ignore[call-overload]


def _describe(value: object) -> str:
    return f"{_size(value)} rows" if isinstance(value, list) else str(value)


def _assert_same(got: list[tuple[str, object]], expected: list[tuple[str, object]]) -> None:
    wrong = [
        f"{label}: {_describe(value)}, Spark's own reader {_describe(want)}"
        for (label, value), (_, want) in zip(got, expected, strict=True) if value != want
    ]
    assert not wrong, "; ".join(wrong)


def _load(spark, server: ServerProcess, **options: str):
    # ceph: an empty field is NULL, as Spark's own CSV reader (the baseline) reads it
    return (
        spark.read.format("flight-select").option("location", server.location)
        .option("table", ORDERS).option("flavor", "ceph").options(**options).load()
    )


def _spark_csv_answers(spark) -> list[tuple[str, object]]:
    """The steps on one DataFrame of Spark's own CSV reader (its answers do not depend on
    reuse); checked to be worth comparing: each filter keeps some rows and drops some."""
    local = spark.read.option("header", "true").csv(str(SAMPLES / ORDERS))
    answers = _run(_reuse_steps(lambda: local))
    total = _size(answers[0][1])
    for label, value in answers:
        if "where" in label:
            assert 0 < _size(value) < total, label
    return answers


def _rows_sent(server: ServerProcess, since: int) -> tuple[int, int]:
    """Rows the server sent in DoGet calls logged after line ``since``, and the new line count.

    A DoGet is logged when its gRPC call completes, which may be just after Spark has its
    rows: wait until the log stops growing (a guard for the log, not a timing assertion)."""
    seen, quiet_since = len(server.log_lines), time.monotonic()
    deadline = time.monotonic() + 10
    while time.monotonic() - quiet_since < 0.5 and time.monotonic() < deadline:
        time.sleep(0.1)
        if len(server.log_lines) != seen:
            seen, quiet_since = len(server.log_lines), time.monotonic()
    rows = 0
    for line in server.log_lines[since:seen]:
        try:
            event = json.loads(line)
        except json.JSONDecodeError:
            continue
        if event.get("event") == "call" and event.get("method") == "DO_GET":
            rows += int(event.get("rows", 0))
    return rows, seen


def test_reused_dataframe_reads_what_spark_csv_reads_and_keeps_pushdown(
    spark, sample_server: ServerProcess
) -> None:
    remote = _load(spark, sample_server)
    got: list[tuple[str, object]] = []
    sent: dict[str, int] = {}
    mark = len(sample_server.log_lines)
    for label, action in _reuse_steps(lambda: remote):
        got.append((label, action()))
        sent[label], mark = _rows_sent(sample_server, mark)
    expected = _spark_csv_answers(spark)
    _assert_same(got, expected)
    total = _size(expected[0][1])
    for label, answer in expected:
        # an offered filter runs on the server: it sends the matching rows only; an action
        # with no offered filter (Spark never offers an OR) gets every row
        offered = "where" in label and " OR " not in label
        assert sent[label] == (_size(answer) if offered else total), (label, sent[label])


def test_a_load_per_action_reads_what_spark_csv_reads(
    spark, sample_server: ServerProcess
) -> None:
    """The workaround the module docstring of ``compute_client.spark_source`` gives: the stored
    read function belongs to one ``load()``, so a DataFrame loaded per action is never stale."""
    _assert_same(_run(_reuse_steps(lambda: _load(spark, sample_server))),
                 _spark_csv_answers(spark))


def test_reused_dataframe_without_filter_pushdown_reads_what_spark_csv_reads(
    spark, sample_server: ServerProcess
) -> None:
    """The fallback for one DataFrame reused across actions: no read carries a pushed filter,
    so the read Spark stores and reuses is the unfiltered one and Spark filters every row."""
    remote = _load(spark, sample_server, filter_pushdown="false")
    _assert_same(_run(_reuse_steps(lambda: remote)), _spark_csv_answers(spark))


def test_filter_pushdown_option_pushes_nothing_when_off(sample_server: ServerProcess) -> None:
    from pyspark.sql.datasource import EqualTo
    from pyspark.sql.types import StringType, StructField, StructType

    schema = StructType([StructField(c, StringType()) for c in COLUMNS])
    options = {"location": sample_server.location, "table": ORDERS}
    offered = [EqualTo(("status",), "delivered")]
    off = FlightSelectDataSource({**options, "filter_pushdown": "FALSE"}).reader(schema)
    assert list(off.pushFilters(offered)) == offered
    assert "WHERE" not in off.statement()
    on = FlightSelectDataSource({**options, "filter_pushdown": "true"}).reader(schema)
    assert list(on.pushFilters(offered)) == offered  # pushed, and checked again by Spark
    assert "WHERE" in on.statement()
    with pytest.raises(ValueError, match="'filter_pushdown' must be true or false"):
        FlightSelectDataSource({**options, "filter_pushdown": "maybe"}).reader(schema)


def test_each_reader_starts_without_pushed_filters(sample_server: ServerProcess) -> None:
    """Our half of the contract: pushed state lives on one reader, never on the data source,
    so every planning pass (``reader(schema)`` then ``pushFilters``) starts from the options."""
    from pyspark.sql.datasource import EqualTo
    from pyspark.sql.types import StringType, StructField, StructType

    schema = StructType([StructField(c, StringType()) for c in COLUMNS])
    source = FlightSelectDataSource({"location": sample_server.location, "table": ORDERS})
    first = source.reader(schema)
    list(first.pushFilters([EqualTo(("status",), "delivered")]))
    assert "WHERE" in first.statement()
    second = source.reader(schema)
    assert "WHERE" not in second.statement()


# ---------------------------------------------------------------------------- streaming
def _write_object(root: Path, number: int) -> None:
    path = root / "s" / "in" / f"part-{number:03d}.csv"
    path.parent.mkdir(parents=True, exist_ok=True)
    rows = [f"{number * 100 + i},{'wx' if i % 2 else 'w'}{i}" for i in range(4)]
    path.write_text("id,word\n" + "\n".join(rows) + "\n", encoding="utf-8")


def test_reused_stream_reads_what_spark_csv_reads(spark, tmp_path: Path) -> None:
    """A stream has no pushed filters in PySpark 4.3.0 (the stream reader has no
    ``pushFilters``; ``where`` is an option of the relation, the same for every query), yet the
    JVM stores its read function on the relation too: pin that a streaming DataFrame reused by
    unfiltered and filtered queries reads each time what Spark's CSV reader reads."""
    root = tmp_path / "data"
    (root / "s").mkdir(parents=True)
    (root / "s" / ".flight-select.json").write_text(json.dumps(
        {"tables": [{"prefix": "", "InputSerialization": {"CSV": {"FileHeaderInfo": "USE"}}}]}
    ))
    for number in range(3):
        _write_object(root, number)
    local = spark.read.option("header", "true").csv(str(root / "s" / "in"))
    server = start_server(root)
    try:
        stream = (
            spark.readStream.format("flight-select").option("location", server.location)
            .option("prefix", "s/in/").schema("id string, word string").load()
        )

        def drain(frame, name: str) -> list[tuple]:
            query = (
                frame.writeStream.format("memory").queryName(name)
                .option("checkpointLocation", str(tmp_path / name))
                .trigger(availableNow=True).start()
            )
            deadline = time.monotonic() + 300  # a guard against hanging, not a timing assertion
            while query.isActive:
                assert time.monotonic() < deadline, f"{name} did not finish"
                query.awaitTermination(5)
            assert query.exception() is None
            return sorted(tuple(r) for r in spark.table(name).collect())

        def spark_csv(condition: str | None) -> list[tuple]:
            frame = local.where(condition) if condition else local
            return sorted(tuple(r) for r in frame.collect())

        conditions = [None, "word LIKE 'wx%'", None, "id = '101' OR word = 'w0'", None]
        got = [drain(stream.where(c) if c else stream, f"reuse_{i}")
               for i, c in enumerate(conditions)]
        expected = [spark_csv(c) for c in conditions]
        assert 0 < len(expected[1]) < len(expected[0])
        assert got == expected
    finally:
        server.stop()
