"""The decoded cache in a real server (``serve --cache-dir``): Flight SQL statements and S3
Select requests over a folder bucket and a SeaweedFS bucket say ``cache: miss`` then ``hit``
in their FlightInfo, answer the same rows from the entry, and never answer a rewritten
(same size, same mtime) or deleted object from its old entry."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.flight as flight
import pytest

from tests.conftest import ServerProcess, running_server
from tests.flight_storage.test_server_support import (
    PARTITIONED,
    error_document,
    json_descriptor,
    statement_descriptor,
)
from tests.seaweedfs import SeaweedFS


def _text(tag: str, rows: int = 20000) -> str:
    return "".join(f"{i},{tag}{i % 1000:03d},{i % 97}\n" for i in range(rows))


def _ask(server: ServerProcess, descriptor: flight.FlightDescriptor
         ) -> tuple[dict[str, Any], pa.Table]:
    client = flight.connect(server.location)
    info = client.get_flight_info(descriptor, PARTITIONED)
    tables = [client.do_get(e.ticket).read_all() for e in info.endpoints]
    return json.loads(info.app_metadata), pa.concat_tables(tables)


def _health(server: ServerProcess) -> dict[str, Any]:
    client = flight.connect(server.location)
    [result] = list(client.do_action(flight.Action("health", b"")))
    return json.loads(result.body.to_pybytes())["decoded_cache"]  # type: ignore[no-any-return]


def _filled(server: ServerProcess, fills: int) -> None:
    deadline = time.monotonic() + 60
    while _health(server)["fills"] < fills:
        assert time.monotonic() < deadline, _health(server)
        time.sleep(0.1)


_SQL = 'SELECT _1, _2 FROM "b"."t.csv" WHERE _3 = \'5\''
_SELECT = {"Bucket": "b", "Key": "t.csv", "Expression": "SELECT s._2 FROM s3object s WHERE "
           "s._3 = '7'", "InputSerialization": {"CSV": {}}, "OutputSerialization": {"CSV": {}}}


def _check_miss_then_hit(server: ServerProcess, descriptor: flight.FlightDescriptor,
                         fills: int) -> pa.Table:
    about, cold = _ask(server, descriptor)
    assert about.get("cache") == "miss", about
    _filled(server, fills)
    about, warm = _ask(server, descriptor)
    assert about["cache"] == "hit"
    assert warm.equals(cold)
    return warm


def test_a_folder_bucket_answers_from_its_entries(tmp_path: Path) -> None:
    bucket = tmp_path / "data" / "b"
    bucket.mkdir(parents=True)
    (bucket / "t.csv").write_text(_text("a"))
    with running_server(tmp_path / "data", "--no-sniff", "--cache-dir",
                        str(tmp_path / "cache")) as server:
        rows = _check_miss_then_hit(server, statement_descriptor(_SQL), 1)
        assert rows.num_rows == 20000 // 97 + 1
        _check_miss_then_hit(server, json_descriptor(_SELECT), 2)  # S3 Select over Flight
        stats = _health(server)
        assert stats["entries"] == 2
        assert stats["hits"] > 0
        # a rewrite with the same size and modification time is another entry
        stat = (bucket / "t.csv").stat()
        (bucket / "t.csv").write_text(_text("z"))
        os.utime(bucket / "t.csv", ns=(stat.st_atime_ns, stat.st_mtime_ns))
        about, rewritten = _ask(server, statement_descriptor(_SQL))
        assert about["cache"] == "miss"
        assert rewritten.column(1)[0].as_py().startswith("z")
        (bucket / "t.csv").unlink()
        with pytest.raises(pa.ArrowException) as info:
            _ask(server, statement_descriptor(_SQL))
        assert error_document(info.value)["code"] == "NoSuchKey"
    assert any("decoded cache: filled" in line for line in server.log_lines)
    # a restart reuses the entries (the object is gone; the other entry's file stays)
    assert len(list((tmp_path / "cache").glob("*.parquet"))) >= 2


def test_a_store_bucket_answers_from_its_entries(tmp_path: Path, seaweedfs: SeaweedFS) -> None:
    name = seaweedfs.new_bucket("decoded")
    s3 = seaweedfs.client()
    s3.put_object(Bucket=name, Key="t.csv", Body=_text("a").encode())
    sql = _SQL.replace('"b"', f'"{name}"')
    with running_server(f"s3://{name}", "--no-sniff", "--cache-dir", str(tmp_path / "cache"),
                        env=seaweedfs.env()) as server:
        _check_miss_then_hit(server, statement_descriptor(sql), 1)
        s3.put_object(Bucket=name, Key="t.csv", Body=_text("z").encode())  # same size
        about, rewritten = _ask(server, statement_descriptor(sql))
        assert about["cache"] == "miss"
        assert rewritten.column(1)[0].as_py().startswith("z")


def test_the_s3_door_answers_from_the_entries(tmp_path: Path) -> None:
    from tests.flight_storage.test_s3_door import s3_client, start_door

    bucket = tmp_path / "data" / "b"
    bucket.mkdir(parents=True)
    (bucket / "t.csv").write_text(_text("a"))
    server, url = start_door(tmp_path / "data", "--cache-dir", str(tmp_path / "cache"))
    try:
        s3 = s3_client(url)

        def select() -> tuple[bytes, dict[str, Any]]:
            answer = s3.select_object_content(
                Bucket="b", Key="t.csv", ExpressionType="SQL",
                Expression="SELECT s._2 FROM s3object s WHERE CAST(s._3 AS INT) = 7",
                InputSerialization={"CSV": {}}, OutputSerialization={"CSV": {}})
            events = list(answer["Payload"])
            records = b"".join(e["Records"]["Payload"] for e in events if "Records" in e)
            stats = next(e["Stats"]["Details"] for e in events if "Stats" in e)
            return records, stats

        cold = select()
        _filled(server, 1)
        hits = _health(server)["hits"]
        warm = select()
        assert warm == cold  # the same records and the same Stats
        assert cold[0].count(b"\n") == 20000 // 97 + (20000 % 97 > 7)
        assert _health(server)["hits"] > hits
    finally:
        server.stop()
