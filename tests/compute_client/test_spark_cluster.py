"""Spark on a real cluster manager: ``local-cluster[2,1,1024]`` (executors in their own JVMs and
Python workers) reads from three storage nodes on 127.0.0.2-127.0.0.4, each partition from its
endpoint's own location, with the answers of one server; a node killed between queries is
replaced by its replica.

The nodes are replicas (one data directory, one ticket secret); a proxy plans on the first and
spreads the endpoints' locations over the three, as a cluster's planner would. The Spark job
runs in its own process (``spark_cluster_job.py``): this process may already hold a local
SparkContext, and there is one per process.
"""

from __future__ import annotations

import json
import os
import queue
import shutil
import subprocess
import sys
import threading
from collections import defaultdict
from collections.abc import Iterator
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest

from tests.compute_client.replica_proxy import replica_proxy
from tests.compute_client.test_pipeline import expected_revenue
from tests.conftest import ROOT, SAMPLES, ServerProcess, start_server

pytestmark = [pytest.mark.spark, pytest.mark.slow]

ROWS = 200_000
GROUPS = 7
STEP_TIMEOUT_S = 300


def _write_rows(root: Path) -> None:
    (root / "b").mkdir(parents=True)
    (root / "b" / "rows.csv").write_text(
        "".join(f"{i},{i % GROUPS},{i * 3}\n" for i in range(ROWS)))


def _expected_groups() -> dict[str, list[int]]:
    groups: dict[str, list[int]] = defaultdict(lambda: [0, 0, 0])
    for i in range(ROWS):
        group = groups[str(i % GROUPS)]
        group[0] += 1
        group[1] += 1
        group[2] += i
    return dict(groups)


def _reads(node: ServerProcess) -> int:
    """Partitions a node has served (its DoGet log lines)."""
    return sum('"DO_GET"' in line for line in list(node.log_lines))


class _Job:
    """The Spark job's process; its stdout lines read with a deadline."""

    def __init__(self, planner: str, out: Path, log: Path) -> None:
        self._log = log.open("w")
        self.process = subprocess.Popen(
            [sys.executable, "-m", "tests.compute_client.spark_cluster_job", planner, str(out)],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self._log, text=True,
            cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)},
        )
        self._lines: queue.Queue[str] = queue.Queue()
        threading.Thread(target=self._pump, daemon=True).start()

    def _pump(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            self._lines.put(line)
        self._lines.put("")

    def step(self, name: str) -> dict[str, Any]:
        while True:
            try:
                line = self._lines.get(timeout=STEP_TIMEOUT_S)
            except queue.Empty:
                raise AssertionError(f"no {name!r} step within {STEP_TIMEOUT_S} s") from None
            if not line:
                raise AssertionError(f"job ended before {name!r}: see {self._log.name}")
            if line.startswith("{"):
                document: dict[str, Any] = json.loads(line)
                if document["step"] == name:
                    print(f"cluster job: {name} done after {document['elapsed_s']} s")
                    return document

    def proceed(self) -> None:
        assert self.process.stdin is not None
        self.process.stdin.write("go\n")
        self.process.stdin.flush()

    def close(self) -> None:
        try:
            self.process.wait(timeout=60)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        self._log.close()


@pytest.fixture
def nodes(tmp_path: Path) -> Iterator[list[ServerProcess]]:
    data = tmp_path / "data"
    shutil.copytree(SAMPLES / "sales", data / "sales")
    _write_rows(data)
    secret = tmp_path / "ticket.key"
    secret.write_text("one key for the whole cluster")
    with ExitStack() as stack:
        started = []
        for host in ("127.0.0.2", "127.0.0.3", "127.0.0.4"):
            node = start_server(data, "--host", host, "--ticket-secret-file", str(secret),
                                "--partition-mb", "1")
            stack.callback(node.stop)
            started.append(node)
        yield started


def test_spark_local_cluster_reads_each_partition_from_its_node(
        nodes: list[ServerProcess], tmp_path: Path) -> None:
    locations = [node.location for node in nodes]
    # Endpoint i: node i first, then the other two as its replicas.
    placements = [locations[i:] + locations[:i] for i in range(len(locations))]
    with replica_proxy(locations[0], *placements) as planner:
        job = _Job(planner, tmp_path / "out", tmp_path / "spark.log")
        try:
            cluster = job.step("cluster")
            assert cluster["master"] == "local-cluster[2,1,1024]"
            assert cluster["executors"] == 2
            assert cluster["driver_pid"] not in cluster["worker_pids"]
            assert job.step("batch")["groups"] == _expected_groups()
            # Only executors read partitions; the planner talks to the first node alone.
            assert all(_reads(node) > 0 for node in nodes[1:])

            pipeline = job.step("pipeline")
            table = pq.read_table(pipeline["output"])
            got = {(r["region"], r["month"]): (r["orders"], r["revenue"])
                   for r in table.to_pylist()}
            assert got == expected_revenue()

            nodes[1].process.kill()
            nodes[1].process.wait()
            job.proceed()
            assert job.step("batch-again")["groups"] == _expected_groups()
        finally:
            job.close()
    assert job.process.returncode == 0
