"""The decoded cache over typed JSON Lines tables (``execution/decoded_table.py`` with the JSON
driver's reader): answers from a filled entry equal the object's, through both of the driver's
readers (pyarrow's and the reference's: ``json`` and ``date`` columns); the entry's name holds
the columns and the record limit; a rewrite (same size, same mtime) is never answered from the
old entry; a value that does not convert gets no entry and fails as before. A real server
(folder and SeaweedFS buckets) says ``cache: miss`` then ``hit`` for a sniffed object."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Any

import pytest

from flight_storage.errors import StorageError
from flight_storage.execution.engine import SelectEngine
from flight_storage.execution.plan_types import EngineConfig, InputSpec, SelectPlan
from flight_storage.formats.typed_columns import TypedColumns
from flight_storage.storage.sources import FileSource
from tests.flight_storage.test_decoded_cache_server import _check_miss_then_hit, _health
from tests.flight_storage.test_server_support import statement_descriptor
from tests.seaweedfs import SeaweedFS

_COLUMNS = TypedColumns(
    names=("id", "name", "score", "ok", "ts", "day", "extra"),
    types=("int64", "string", "float64", "bool", "timestamp", "date", "json"))
_FAST = TypedColumns(names=_COLUMNS.names[:5], types=_COLUMNS.types[:5])
"""The columns pyarrow's reader reads (no ``json`` or ``date``)."""


def _record(i: int) -> dict[str, Any]:
    record: dict[str, Any] = {
        "id": i, "name": f"n{i % 101}" if i % 13 else None, "score": i * 0.25,
        "ok": i % 3 == 0, "ts": f"2024-08-{1 + i % 28:02d}T{i % 24:02d}:07:00+02:00",
        "day": f"2025-01-{1 + i % 30:02d}", "extra": {"k": [i, "x"]} if i % 5 else 7}
    if i % 17 == 0:
        del record["score"]
    return record


def _lines(rows: int = 6000, first: int = 0) -> str:
    return "".join(json.dumps(_record(i)) + "\n" for i in range(first, first + rows))


def _renamed(rows: int) -> str:
    """The object of ``_lines(rows)`` rewritten at the same size (names ``m..``)."""
    return _lines(rows).replace('"name": "n', '"name": "m')


_QUERIES = [
    "select * from s3object",
    "select name, score from s3object where id > 5990",
    "select count(*), sum(id), max(ts), min(day) from s3object where ok",
    "select extra from s3object where name = 'n7' limit 4",
    "select id from s3object where score is null order by id desc limit 5",
    "select extract(year from ts) as y, count(*) from s3object group by extract(year from ts)",
]


def _engine(folder: Path | None, **config: Any) -> SelectEngine:
    return SelectEngine(EngineConfig(cache_dir=str(folder) if folder else None, **config))


def _run(engine: SelectEngine, query: str, path: Path, columns: TypedColumns
         ) -> tuple[SelectPlan | None, Any]:
    spec = InputSpec("json", options={"Type": "LINES"}, columns=columns)
    try:
        plan = engine.plan(query, FileSource(path, path.name, path.stat().st_size), spec,
                           flavor="standard")
        rows: list[Any] = []
        if plan.parallel_safe:  # endpoint by endpoint, in order
            for planned in plan.partitions:
                for batch in engine.execute(plan, [planned.partition]):
                    rows.extend(batch.to_pylist())
            return plan, rows
        return plan, [r for b in engine.execute(plan) for r in b.to_pylist()]
    except StorageError as exc:
        return None, (type(exc).__name__, exc.code, str(exc))


@pytest.mark.parametrize("columns", [_COLUMNS, _FAST], ids=["reference", "pyarrow"])
def test_answers_from_a_filled_entry_equal_the_objects(
        tmp_path: Path, columns: TypedColumns, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "t.jsonl"
    path.write_text(_lines())
    plain, cached = _engine(None, batch_rows=1000), _engine(tmp_path / "cache", batch_rows=1000)
    hits = 0
    queries = [q for q in _QUERIES if columns is _COLUMNS or not re.search(r"\b(day|extra)\b", q)]
    for query in queries:
        _, expected = _run(plain, query, path, columns)
        assert not isinstance(expected, tuple), expected
        monkeypatch.setenv("FLIGHT_SELECT_DECODED_CACHE", "fill-first")
        plan, got = _run(cached, query, path, columns)
        monkeypatch.delenv("FLIGHT_SELECT_DECODED_CACHE")
        assert got == expected, query
        assert plan is not None
        hits += plan.cache == "hit"
    assert cached.decoded is not None
    assert hits == len(queries) >= 4, cached.decoded.stats()
    assert cached.decoded.fills == 1  # one entry serves every query of the table


def test_other_columns_or_record_limit_are_other_entries(tmp_path: Path,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FLIGHT_SELECT_DECODED_CACHE", "fill-first")
    path = tmp_path / "t.jsonl"
    path.write_text(_lines(500))
    as_text = TypedColumns(names=("id", "extra"), types=("string", "json"))
    engine = _engine(tmp_path / "cache")
    _, typed = _run(engine, "select id, extra from s3object limit 2", path, _COLUMNS)
    plan, texts = _run(engine, "select id, extra from s3object limit 2", path, as_text)
    assert [list(r.values()) for r in typed] == [[0, "7"], [1, '{"k":[1,"x"]}']]
    assert [list(r.values()) for r in texts] == [["0", "7"], ["1", '{"k":[1,"x"]}']]
    assert plan is not None and plan.cache == "hit"
    assert engine.decoded is not None and engine.decoded.fills == 2
    # a server with a smaller record limit refuses the object: it never reads an entry
    shared = _engine(tmp_path / "cache", max_record_bytes=64)
    plan, refused = _run(shared, "select count(*) from s3object", path, _COLUMNS)
    assert plan is None and refused[1] == "OverMaxRecordSize", refused


def test_a_rewrite_with_the_same_size_and_mtime_is_not_answered_from_the_old_entry(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FLIGHT_SELECT_DECODED_CACHE", "fill-first")
    engine = _engine(tmp_path / "cache")
    path = tmp_path / "a.jsonl"
    columns = TypedColumns(names=("id", "v"), types=("int64", "string"))
    path.write_text('{"id": 1, "v": "aaa"}\n{"id": 2, "v": "bbb"}\n')
    stat = path.stat()
    _, first = _run(engine, "select v from s3object", path, columns)
    plan, again = _run(engine, "select v from s3object", path, columns)
    assert plan is not None and plan.cache == "hit"
    path.write_text('{"id": 1, "v": "zzz"}\n{"id": 2, "v": "yyy"}\n')  # same size
    os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns))  # same mtime
    _, second = _run(engine, "select v from s3object", path, columns)
    assert first == again == [{"c0": "aaa"}, {"c0": "bbb"}]
    assert second == [{"c0": "zzz"}, {"c0": "yyy"}]
    assert engine.decoded is not None
    assert engine.decoded.fills == 2  # the second version got its own entry


@pytest.mark.parametrize("bad", ['"n/a"', "1.5"], ids=["string", "fraction"])
def test_a_value_that_does_not_convert_gets_no_entry_and_fails_as_before(
        tmp_path: Path, bad: str, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "bad.jsonl"
    path.write_text(_lines(3000) + '{"id": ' + bad + "}\n")
    columns = TypedColumns(names=("id", "name"), types=("int64", "string"), sniffed=True)
    query = "select sum(id) from s3object"
    _, expected = _run(_engine(None), query, path, columns)
    monkeypatch.setenv("FLIGHT_SELECT_DECODED_CACHE", "fill-first")
    cached = _engine(tmp_path / "cache")
    for _ in range(2):
        _, got = _run(cached, query, path, columns)
        assert expected[:2] == ("InputFormatError", "CastFailed"), expected
        assert got == expected
    assert cached.decoded is not None
    assert cached.decoded.stats()["entries"] == 0
    assert cached.decoded.stats()["failures"] >= 1


_SQL = 'SELECT name, score, ts FROM "{bucket}"."t.jsonl" WHERE id % 97 = 5 ORDER BY id'


def test_a_folder_bucket_serves_a_sniffed_object_from_its_entry(tmp_path: Path) -> None:
    from tests.conftest import running_server

    bucket = tmp_path / "data" / "b"
    bucket.mkdir(parents=True)
    (bucket / "t.jsonl").write_text(_lines(20000))
    with running_server(tmp_path / "data", "--cache-dir", str(tmp_path / "cache")) as server:
        warm = _check_miss_then_hit(server, statement_descriptor(_SQL.format(bucket="b")), 1)
        assert warm.num_rows == 20000 // 97 + 1
        assert warm.schema.field("ts").type.tz == "UTC"
        stat = (bucket / "t.jsonl").stat()
        (bucket / "t.jsonl").write_text(_renamed(20000))
        os.utime(bucket / "t.jsonl", ns=(stat.st_atime_ns, stat.st_mtime_ns))
        assert (bucket / "t.jsonl").stat().st_size == stat.st_size
        rewritten = _check_miss_then_hit(server, statement_descriptor(_SQL.format(bucket="b")),
                                         2)
        assert rewritten.column("name")[0].as_py() == "m5"
        assert rewritten.drop_columns(["name"]).equals(warm.drop_columns(["name"]))
        assert _health(server)["entries"] == 2


def test_a_store_bucket_serves_a_sniffed_object_from_its_entry(tmp_path: Path,
                                                               seaweedfs: SeaweedFS) -> None:
    from tests.conftest import running_server

    name = seaweedfs.new_bucket("decodedjson")
    s3 = seaweedfs.client()
    s3.put_object(Bucket=name, Key="t.jsonl", Body=_lines(20000).encode())
    sql = _SQL.format(bucket=name)
    with running_server(f"s3://{name}", "--cache-dir", str(tmp_path / "cache"),
                        env=seaweedfs.env()) as server:
        _check_miss_then_hit(server, statement_descriptor(sql), 1)
        s3.put_object(Bucket=name, Key="t.jsonl", Body=_renamed(20000).encode())
        rewritten = _check_miss_then_hit(server, statement_descriptor(sql), 2)
        assert rewritten.column("name")[0].as_py() == "m5"
        assert _health(server)["entries"] == 2
