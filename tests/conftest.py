"""Shared fixtures and helpers: a real storage server in a subprocess on a free loopback port,
and the bucket configuration most test data uses.

Helpers every test package uses live here; the server tests' own helpers (test data, TLS
certificates, log lines, Flight descriptors, client scripts) are in
``tests/flight_storage/test_server_support.py``.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import pytest
from hypothesis import settings

from tests.seaweedfs import SeaweedFS, start_seaweedfs

# CI runs every property test on the same examples (a red CI names a reproducible case); a
# developer's run explores new ones each time.
settings.register_profile("ci", derandomize=True, database=None)
if os.environ.get("CI"):
    settings.load_profile("ci")

ROOT = Path(__file__).resolve().parents[1]
SAMPLES = ROOT / "data" / "samples"

# Modules the fast loop (`pytest -m "not slow and not spark"`) skips; CI runs everything.
# Measured with --junitxml on 2 shared cores: each takes 2-37 s, together about 60% of the
# suite. They start servers per test, drive other clients or compilers, or sweep thousands of
# cases; the server's Flight SQL contract and the unit tests stay fast.
SLOW_MODULES: dict[str, str] = {
    "tests/select_dialect/test_builtin_paths.py": "1,971 builtin-versus-UDF comparisons",
    "tests/conformance/test_corpus.py": "1,069 corpus cases (tests/conformance/run.py runs them)",
    "tests/conformance/test_decoded_cache_corpus.py": "378 corpus cases, each filling an entry",
    "tests/flight_storage/test_server_bounds.py": "memory and time bounds under bombs",
    "tests/flight_storage/test_cli_query.py": "a CLI process per test",
    "tests/flight_storage/test_server_security.py": "TLS and login throttling servers",
    "tests/compute_client/tpch/test_tpch.py": "TPC-H data generation and queries",
    "tests/fuzz/test_differential.py": "generated queries against the oracle",
    "tests/flight_storage/test_server_reliability.py": "hostile clients, kill -9",
    "tests/flight_storage/test_s3_door_hostile.py": "384 MiB of refused uploads, silent sockets",
    "tests/flight_storage/test_cluster_failover.py": "a cluster node killed mid-query",
    "tests/flight_storage/test_server_integrity.py": "objects changed under running streams",
    "tests/flight_storage/test_server_operations.py": "graceful shutdown timings",
    "tests/flight_storage/test_server_stream.py": "stream limits and slow readers",
    "tests/flight_storage/test_cancellation.py": "a 20M-row GROUP BY per trigger, CPU sampled",
    "tests/flight_storage/test_compression.py": "decompression bombs",
    "tests/compute_client/test_datafusion_column_names.py": "a server per column-name case",
    "tests/compute_client/test_spark_reuse_guard.py": "compiles the JVM rule with javac",
    "tests/test_data_generator.py": "generates data sets",
    "tests/test_readme_walkthrough.py": "the README walkthrough end to end",
    "tests/flight_storage/test_foreign_clients.py": "third-party clients in subprocesses",
    "tests/flight_storage/test_sqlalchemy_clients.py": "SQLAlchemy in a subprocess",
    "tests/compute_client/test_failover.py": "replica servers killed and stopped mid-stream",
    "tests/flight_storage/test_object_store.py": "a SeaweedFS store, servers per fault",
    "tests/flight_storage/test_fleet.py": "three nodes over SeaweedFS, one killed mid-stream",
    "tests/compute_client/test_object_store_clients.py": "a SeaweedFS store and Spark",
    # Moved out of the fast loop when it had grown to 2m18s (issue 31): together 48 of its
    # 166 s of test time (--durations=0, 2 cores shared, load average 5), 82 s with the next.
    "tests/flight_storage/test_s3_door.py": "an S3 door server per test, boto3 and the AWS CLI",
    "tests/flight_storage/test_s3_door_clients.py": "awswrangler in a subprocess",
    "tests/flight_storage/test_s3_door_objects.py": "S3 door servers, boto3 per object call",
    "tests/flight_storage/test_s3_door_multipart.py": "a 100 MiB multipart upload and download",
    "tests/flight_storage/test_s3_door_store.py": "a SeaweedFS store behind the S3 door",
    "tests/flight_storage/test_s3_door_select_events.py": "70 MB of CSV scanned with progress",
    "tests/flight_storage/test_s3_door_tools.py": "the AWS CLI, s3fs and rclone in subprocesses",
    "tests/flight_storage/test_s3_door_cluster.py": "a two-node cluster with S3 doors",
    "tests/flight_storage/test_cluster.py": "a three-node cluster and a reference server",
    "tests/flight_storage/test_cluster_description.py": "serve processes given bad cluster files",
    "tests/flight_storage/test_cluster_bounds.py": "peers that never answer, waited out",
    "tests/flight_storage/test_cluster_auth.py": "a cluster with authentication",
    "tests/flight_storage/test_sqlalchemy_adbc_client.py": "SQLAlchemy in a subprocess",
    # 34 s where the shared corpus is beside the checkout (skipped where it is not)
    "tests/conformance/test_s3_door_corpus.py": "corpus cases through boto3 and the S3 door",
    "tests/flight_storage/test_iceberg_store.py": "Iceberg tables written into SeaweedFS",
}


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Mark every test of a module in SLOW_MODULES ``slow``."""
    for item in items:
        if item.path.relative_to(ROOT).as_posix() in SLOW_MODULES:
            item.add_marker(pytest.mark.slow)


@dataclass
class ServerProcess:
    """A running ``flight-select serve`` and what it printed."""

    location: str
    process: subprocess.Popen[str]
    log_lines: list[str]

    @property
    def address(self) -> tuple[str, int]:
        """Host and port of :attr:`location` (for clients that take them apart)."""
        host, port = self.location.split("://", 1)[1].rsplit(":", 1)
        return host, int(port)

    def stop(self) -> int:
        self.process.terminate()
        try:
            return self.process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            self.process.kill()
            return self.process.wait()


def start_server(data_dir: Path | str, *extra: str, env: dict[str, str] | None = None) -> ServerProcess:
    """Start ``python -m flight_storage serve`` and wait for its ``listening on`` line."""
    command = [sys.executable, "-m", "flight_storage", "serve", "--data", str(data_dir),
               "--port", "0", *extra]
    process = subprocess.Popen(
        command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=ROOT,
        env={**os.environ, **(env or {})},
    )
    log_lines: list[str] = []
    threading.Thread(
        target=lambda: log_lines.extend(iter(process.stderr.readline, "")),  # type: ignore[union-attr]
        daemon=True,
    ).start()
    assert process.stdout is not None
    line = process.stdout.readline()
    if "listening on " not in line:
        process.kill()
        raise RuntimeError(f"server did not start: {line!r} {''.join(log_lines)}")
    location = line.split("listening on ", 1)[1].strip()
    return ServerProcess(location, process, log_lines)


@contextmanager
def running_server(data_dir: Path | str, *extra: str, env: dict[str, str] | None = None
                   ) -> Iterator[ServerProcess]:
    """:func:`start_server` for the length of a ``with`` block (a fixture's ``yield``)."""
    server = start_server(data_dir, *extra, env=env)
    try:
        yield server
    finally:
        server.stop()


def read_csv_headers(bucket: Path, prefix: str = "") -> None:
    """Configure ``bucket`` so that its CSV objects under ``prefix`` are read with
    ``FileHeaderInfo: USE`` (columns named by the header) when a query names no options."""
    config = {"tables": [{"prefix": prefix,
                          "InputSerialization": {"CSV": {"FileHeaderInfo": "USE"}}}]}
    (bucket / ".flight-select.json").write_text(json.dumps(config))


@pytest.fixture(scope="session")
def sample_server() -> Iterator[ServerProcess]:
    """One server over data/samples for the whole session."""
    with running_server(SAMPLES) as server:
        yield server


@pytest.fixture(scope="session")
def seaweedfs(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SeaweedFS]:
    """A real S3-compatible object store (SeaweedFS) for the whole session
    (``tests/seaweedfs.py``); tests create buckets with unique names in it."""
    store = start_seaweedfs(tmp_path_factory.mktemp("seaweedfs"))
    try:
        yield store
    finally:
        store.stop(wait_s=5.0)
