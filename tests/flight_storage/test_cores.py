"""The server computes on the cores it may use (its CPU affinity), not on the machine's.

A storage host pins the server to some of its cores (``taskset``, a cgroup cpuset).
DataFusion sizes its own partitions and threads from the affinity; the server's byte ranges,
endpoints and aggregate partitions must follow the same count, or each object is cut into more
ranges (each with a fixed cost) than there are cores to run them.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from pyarrow import flight

from flight_storage.cores import usable_cores
from flight_storage.execution.engine import EngineConfig
from tests.conftest import ROOT, running_server
from tests.flight_storage.test_server_support import statement_descriptor

pytestmark = pytest.mark.skipif(not hasattr(os, "sched_setaffinity"),
                                reason="the platform has no CPU affinity")


@contextmanager
def _pinned_to_one_core() -> Iterator[None]:
    """This thread (and any process it starts, which inherits the mask) on one core."""
    before = os.sched_getaffinity(0)
    if len(before) < 2:
        pytest.skip("needs at least two usable cores to tell the affinity from the machine")
    os.sched_setaffinity(0, {min(before)})
    try:
        yield
    finally:
        os.sched_setaffinity(0, before)


def test_usable_cores_is_the_affinity() -> None:
    assert usable_cores() == len(os.sched_getaffinity(0))
    with _pinned_to_one_core():
        assert usable_cores() == 1


def test_engine_parallelism_follows_the_affinity_of_a_pinned_process() -> None:
    """What ``taskset -c 0 flight-select serve`` gives the engine: one core, as DataFusion's
    own default session sees it."""
    code = ("from datafusion import SessionContext\n"
            "from flight_storage.execution.engine import EngineConfig\n"
            "rows = SessionContext().sql(\"SELECT value FROM information_schema.df_settings "
            "WHERE name = 'datafusion.execution.target_partitions'\").to_pylist()\n"
            "print(EngineConfig().parallelism, rows[0]['value'])\n")
    with _pinned_to_one_core():
        out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                             cwd=ROOT, check=True).stdout.split()
    assert out == ["1", "1"]
    assert EngineConfig(cores=3).parallelism == 3  # an explicit count still wins


def test_pinned_server_plans_one_range_per_usable_core(tmp_path: Path) -> None:
    """A 3 MiB CSV is worth splitting per core: a server pinned to one core of a machine
    with more serves it as one endpoint, says it computes on one core, and gives every row."""
    bucket = tmp_path / "bkt"
    bucket.mkdir()
    rows = 300_000
    (bucket / "rows.csv").write_bytes(b"".join(b"%07d,abc\n" % i for i in range(rows)))
    assert (bucket / "rows.csv").stat().st_size > 2 << 20
    with _pinned_to_one_core(), running_server(tmp_path) as server:
        client = flight.connect(server.location)
        info = client.get_flight_info(statement_descriptor('SELECT _1 FROM "bkt"."rows.csv"'))
        about = json.loads(info.app_metadata)
        assert (about["cores"], about["endpoints"], len(info.endpoints)) == (1, 1, 1)
        got = client.do_get(info.endpoints[0].ticket).read_all().column(0).to_pylist()
        client.close()
    assert got == [f"{i:07d}" for i in range(rows)]
