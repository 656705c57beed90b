"""Ingests under faults, with real parts: two server processes over one store (a folder, and
SeaweedFS) racing the real ADBC driver's ``adbc_ingest`` into one table, a client process
killed with SIGKILL mid-stream, a reader aborting a writer's job, and a restart after a crash
left temporaries (issue 35; ``storage/table_commits.py``, ``rpc/ingest.py``)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import adbc_driver_flightsql.dbapi as flightsql
import adbc_driver_manager
import pyarrow as pa
import pyarrow.parquet
import pytest

from compute_client.errors import RemoteQueryError
from compute_client.flight import ConnectionOptions, FlightSelectClient
from flight_storage.rpc.auth import add_user
from flight_storage.storage import table_commits
from flight_storage.storage.folder_store import FolderBuckets
from flight_storage.storage.s3_store import S3Buckets, S3Connection, S3Settings
from flight_storage.storage.stores import BucketSet
from flight_storage.storage.table_commits import Pending
from tests.conftest import ServerProcess, running_server, start_server
from tests.flight_storage.test_server_support import wait_for_event
from tests.seaweedfs import SeaweedFS

REPLACE_RACES = 20
CREATE_RACES = 10
ROOT = Path(__file__).resolve().parents[2]


@dataclass
class TwoNodes:
    """Two servers over one store, and how to list the store's keys under a prefix."""

    bucket: str
    servers: list[ServerProcess]
    keys: Callable[[str], list[str]]
    temporaries: Callable[[], list[str]]


def _folder_keys(folder: Path) -> Callable[[str], list[str]]:
    def keys(prefix: str) -> list[str]:
        base = folder / prefix
        return sorted(p.relative_to(folder).as_posix() for p in base.rglob("*")
                      if p.is_file()) if base.is_dir() else []
    return keys


@pytest.fixture(scope="module", params=["folder", "seaweedfs"])
def nodes(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
          ) -> Iterator[TwoNodes]:
    """Two servers over one store, shared by the tests of this module (each its own tables)."""
    tmp_path = tmp_path_factory.mktemp("nodes")
    temp = tmp_path / "tmp"  # the servers' system temporary folder
    temp.mkdir()
    env = {"TMPDIR": str(temp)}
    if request.param == "folder":
        bucket = tmp_path / "data" / "lake"
        bucket.mkdir(parents=True)
        where, name = str(tmp_path / "data"), "lake"
        keys = _folder_keys(bucket)
        watched = [bucket]
    else:
        seaweedfs: SeaweedFS = request.getfixturevalue("seaweedfs")
        name = seaweedfs.new_bucket(f"races-{os.getpid()}-{len(seaweedfs.buckets)}")
        where, env = f"s3://{name}", {**env, **seaweedfs.env()}
        client = seaweedfs.client()

        def keys(prefix: str) -> list[str]:
            pages = client.get_paginator("list_objects_v2").paginate(Bucket=name,
                                                                      Prefix=prefix)
            return sorted(o["Key"] for page in pages for o in page.get("Contents", []))
        watched = []
    servers = [start_server(where, "--writable", env=env) for _ in range(2)]

    def temporaries() -> list[str]:
        folders = [*watched, *(temp / "flight-select-stores").glob("*")]
        return sorted(p.name for f in folders for p in f.glob(".ingest-*"))
    try:
        yield TwoNodes(name, servers, keys, temporaries)
    finally:
        for server in servers:
            server.stop()


def _rows(writer: str, n: int = 50) -> pa.Table:
    return pa.table({"w": [writer] * n, "n": pa.array(range(n), pa.int64())})


def _race(nodes: TwoNodes, table: str, data: list[pa.Table], mode: str
          ) -> list[int | adbc_driver_manager.Error]:
    """Server ``i`` ingests ``data[i]``, all at once (connections opened first)."""
    barrier = threading.Barrier(len(data))
    outcomes: list[int | adbc_driver_manager.Error] = [0] * len(data)

    def run(i: int) -> None:
        with flightsql.connect(nodes.servers[i].location) as conn, conn.cursor() as cursor:
            barrier.wait()
            try:
                outcomes[i] = cursor.adbc_ingest(table, data[i], mode=mode,
                                                 catalog_name=nodes.bucket)
                conn.commit()
            except adbc_driver_manager.Error as exc:
                outcomes[i] = exc

    threads = [threading.Thread(target=run, args=(i,)) for i in range(len(data))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    return outcomes


def _writers(nodes: TwoNodes, table: str) -> list[str]:
    with flightsql.connect(nodes.servers[0].location) as conn, conn.cursor() as cursor:
        cursor.execute(f'SELECT DISTINCT w FROM "{nodes.bucket}"."{table}/"')
        return sorted(str(row[0]) for row in cursor.fetchall())


def test_replace_races_across_two_nodes_leave_exactly_one_writers_rows(
        nodes: TwoNodes) -> None:
    assert _race(nodes, "t", [_rows("seed")], "create")[0] == 50
    lost = 0
    for race in range(REPLACE_RACES):
        names = [f"{race}-a", f"{race}-b"]
        outcomes = _race(nodes, "t", [_rows(n) for n in names], "replace")
        won = [n for n, o in zip(names, outcomes, strict=True) if o == 50]
        for outcome in outcomes:
            if isinstance(outcome, adbc_driver_manager.Error):
                assert "ConditionalRequestConflict" in str(outcome) and "replaced" in str(
                    outcome), outcome
        lost += len(names) - len(won)
        found = _writers(nodes, "t")
        assert len(found) == 1 and found[0] in won, (race, outcomes, found)
        # the winner's one object is all the table holds: no loser's object is left
        assert len(nodes.keys("t/")) == 1, nodes.keys("t/")
    assert nodes.temporaries() == []
    print(f"{REPLACE_RACES} replace races: {lost} ingests lost theirs with a conflict")


def test_create_races_across_two_nodes_succeed_once(nodes: TwoNodes) -> None:
    for race in range(CREATE_RACES):
        table = f"c{race}"
        names = [f"{race}-a", f"{race}-b"]
        outcomes = _race(nodes, table, [_rows(n) for n in names], "create")
        won = [n for n, o in zip(names, outcomes, strict=True) if o == 50]
        assert len(won) == 1, outcomes
        (error,) = [o for o in outcomes if isinstance(o, adbc_driver_manager.Error)]
        assert "TableAlreadyExists" in str(error) and f"{table}/" in str(error), error
        assert _writers(nodes, table) == won
        assert len(nodes.keys(f"{table}/")) == 1
    assert nodes.temporaries() == []


_STREAMING_CLIENT = """
import sys, time
import adbc_driver_flightsql.dbapi as flightsql
import pyarrow as pa

location, bucket = sys.argv[1:3]
schema = pa.schema([("n", pa.int64())])

def batches():
    start = 0
    while True:
        yield pa.record_batch([pa.array(range(start, start + 1000), pa.int64())],
                              schema=schema)
        start += 1000
        if start == 20_000:
            print("streaming", flush=True)
        time.sleep(0.005)

with flightsql.connect(location) as conn, conn.cursor() as cursor:
    cursor.adbc_ingest("killed", pa.RecordBatchReader.from_batches(schema, batches()),
                       mode="create", catalog_name=bucket)
"""


def test_a_client_killed_mid_stream_leaves_nothing(nodes: TwoNodes) -> None:
    server = nodes.servers[0]
    client = subprocess.Popen([sys.executable, "-c", _STREAMING_CLIENT, server.location,
                               nodes.bucket], stdout=subprocess.PIPE, text=True, cwd=ROOT)
    try:
        assert client.stdout is not None and client.stdout.readline().strip() == "streaming"
        deadline = time.monotonic() + 10
        while not nodes.temporaries():  # the server is writing what it received
            assert time.monotonic() < deadline, "no temporary while the client streams"
            time.sleep(0.02)
        time.sleep(0.3)
    finally:
        client.send_signal(signal.SIGKILL)
        client.wait()
    line = wait_for_event(server, ingest="killed")
    assert line["status"] != "ok", line
    assert nodes.keys("killed/") == []
    assert nodes.temporaries() == []
    with flightsql.connect(server.location) as conn, conn.cursor() as cursor, \
            pytest.raises(adbc_driver_manager.Error, match="NoSuchKey"):
        cursor.execute(f'SELECT count(*) FROM "{nodes.bucket}"."killed/"')


def test_aborting_needs_the_write_right_and_marks_are_bounded(tmp_path: Path) -> None:
    data = tmp_path / "data"
    (data / "lake").mkdir(parents=True)
    users = tmp_path / "users.json"
    add_user(users, "reader", "pw-reader", ["lake"])
    add_user(users, "writer", "pw-writer", ["lake"], write=["lake"])
    schema = pa.schema([("n", pa.int64())])
    batch = pa.record_batch([pa.array([1, 2, 3], pa.int64())], schema=schema)
    marks = 20
    with running_server(data, "--writable", "--auth", str(users), "--max-abort-marks",
                        str(marks)) as server:
        writer = FlightSelectClient(ConnectionOptions(server.location, username="writer",
                                                      password="pw-writer"))
        reader = FlightSelectClient(ConnectionOptions(server.location, username="reader",
                                                      password="pw-reader"))
        _, token = writer.ingest("lake", "staged", schema, [batch], staged_job="ab12")
        assert token is not None
        with pytest.raises(RemoteQueryError) as refused:
            reader.finish_ingest([], commit=False, job="ab12", bucket="lake")
        assert refused.value.code == "AccessDenied"
        assert "may not write bucket lake" in refused.value.message
        assert not list((data / "lake").glob(".ingest-aborted-*"))  # no mark was made
        writer.finish_ingest([token], commit=True)  # the reader removed nothing
        assert len(list((data / "lake" / "staged").iterdir())) == 1
        for job in range(marks):
            writer.finish_ingest([], commit=False, job=f"{job:x}", bucket="lake")
        assert len(list((data / "lake").glob(".ingest-aborted-*"))) == marks
        writer.finish_ingest([], commit=False, job="0", bucket="lake")  # marked already
        with pytest.raises(RemoteQueryError) as bounded:
            writer.finish_ingest([], commit=False, job="fffff", bucket="lake")
        assert bounded.value.code == "TooManyAbortedJobs"
    with running_server(data) as server, pytest.raises(RemoteQueryError) as read_only:
        FlightSelectClient(ConnectionOptions(server.location)).finish_ingest(
            [], commit=False, job="ab13", bucket="lake")
    assert read_only.value.code == "ReadOnly"


def test_a_restart_sweeps_old_temporaries(tmp_path: Path) -> None:
    data, temp = tmp_path / "data", tmp_path / "tmp"
    (data / "lake").mkdir(parents=True)
    stores = temp / "flight-select-stores" / "0123abcd"
    stores.mkdir(parents=True)
    old = time.time() - 2 * 3600  # past ServerConfig.temporary_max_age_s
    paths = {
        "old": data / "lake" / ".ingest-crashed.parquet",
        "old store": stores / ".ingest-crashed.parquet",
        "young": data / "lake" / ".ingest-running.parquet",
        "old staged": data / "lake" / ".ingest-staged-ab-12.parquet",  # --ticket-max-age
    }
    for path in paths.values():
        path.write_bytes(b"PAR1")
    for name in ("old", "old store", "old staged"):
        os.utime(paths[name], (old, old))
    with running_server(data, "--writable", env={"TMPDIR": str(temp)}) as server:
        swept = wait_for_event(server, event="ingest_sweep")
    assert sorted(swept["removed"]) == sorted(str(paths[n].resolve())
                                              for n in ("old", "old store"))
    assert [n for n, p in paths.items() if p.exists()] == ["young", "old staged"]


@pytest.mark.parametrize("kind", ["folder", "seaweedfs"])
def test_records_are_created_once_pruned_and_leave_with_their_bucket(
        kind: str, request: pytest.FixtureRequest, tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch) -> None:
    """The stores' side of commits, with no server: a generation is created once, old records
    are pruned, and an objectless bucket is deleted with its tables' records."""
    sets: BucketSet
    if kind == "folder":
        (tmp_path / "b").mkdir()
        sets, name = FolderBuckets(tmp_path), "b"
    else:
        seaweedfs: SeaweedFS = request.getfixturevalue("seaweedfs")
        name = seaweedfs.new_bucket(f"records-{os.getpid()}")
        for variable, value in seaweedfs.env().items():
            monkeypatch.setenv(variable, value)
        sets = S3Buckets(S3Connection(S3Settings(endpoint_url=seaweedfs.endpoint)))
    store = sets.bucket(name)
    assert store is not None
    assert store.create_commit("t/", 1, b"{}") and not store.create_commit("t/", 1, b"[]")
    assert store.read_commit("t/", 1) == b"{}" and store.read_commit("t/", 2) is None
    store.delete_commit("t/", 1)
    for n in range(12):
        part = tmp_path / f"part-{n}.parquet"
        pa.parquet.write_table(_rows(str(n)), part)
        table_commits.commit(store, "t/", [Pending(f"t/p{n:02d}.parquet", part,
                                                   part.stat().st_size)],
                             mode="replace" if n % 3 == 0 else "append",
                             check=lambda _objects, _head: None)
    assert list(store.commit_generations("t/")) == list(range(5, 13))  # KEEP_RECORDS behind
    newest = table_commits.latest(store, "t/")
    assert newest is not None and (newest.mode, newest.replaced) == ("append", 10)
    assert [o.key for o in store.list("t/")] == ["t/p09.parquet", "t/p10.parquet",
                                                  "t/p11.parquet"]
    assert [o.key for o in store.list("")] == [o.key for o in store.list("t/")]  # hidden
    for obj in list(store.list("")):
        store.delete(obj.key)
    sets.delete_bucket(name)
    assert name not in sets.names()


def test_an_abort_reaches_only_its_buckets_staged_files(seaweedfs: SeaweedFS,
                                                         tmp_path: Path) -> None:
    """Object-store buckets stage in folders of their own: aborting a job in one bucket
    leaves what the same job id staged for another."""
    first = seaweedfs.new_bucket(f"staged-a-{os.getpid()}")
    second = seaweedfs.new_bucket(f"staged-b-{os.getpid()}")
    schema = pa.schema([("n", pa.int64())])
    batch = pa.record_batch([pa.array([1, 2, 3], pa.int64())], schema=schema)
    with running_server(f"{first}=s3://{first}", "--data", f"{second}=s3://{second}",
                        "--writable", env={"TMPDIR": str(tmp_path), **seaweedfs.env()}
                        ) as server:
        client = FlightSelectClient(ConnectionOptions(server.location))
        _, kept = client.ingest(second, "t", schema, [batch], staged_job="ab")
        _, dropped = client.ingest(first, "t", schema, [batch], staged_job="ab")
        assert kept is not None and dropped is not None
        client.finish_ingest([], commit=False, job="ab", bucket=first)
        with pytest.raises(RemoteQueryError) as gone:
            client.finish_ingest([dropped], commit=True)
        assert gone.value.code == "NoSuchKey"
        client.finish_ingest([kept], commit=True)
    keys = [o["Key"] for o in seaweedfs.client().list_objects_v2(
        Bucket=second, Prefix="t/").get("Contents", [])]
    assert len(keys) == 1 and keys[0].endswith(".parquet")
    assert len(list((tmp_path / "flight-select-stores").iterdir())) == 2
