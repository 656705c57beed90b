"""Helpers shared by the server tests: test data, certificates, log lines, a Flight client.

(Named ``test_server_*`` so it sits with the tests it serves; it defines no tests itself.)
"""

from __future__ import annotations

import csv
import json
import os
import shutil
import socket
import subprocess
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.flight as flight
import pyarrow.parquet as pq

from benchmarks.process_cpu import process_tree
from flight_storage import protocol
from flight_storage.protocol import pb
from flight_storage.storage.catalog import Catalog
from tests.conftest import SAMPLES, ServerProcess, read_csv_headers


def write_numbers_parquet(path: Path, rows: int) -> None:
    """A Parquet file of ``rows`` rows of two int64 columns ``k`` and ``v`` (0..rows-1), in
    row groups of 500,000: a GROUP BY k of many groups keeps the engine busy for seconds."""
    numbers = pa.array(range(rows), pa.int64())
    pq.write_table(pa.table({"k": numbers, "v": numbers}), path, row_group_size=500_000)


def tree_cpu_rate(pid: int, seconds: float) -> float:
    """The cores ``pid``'s process tree (a server and its engine workers) used over the next
    ``seconds``."""
    start = _tree_cpu_s(pid)
    time.sleep(seconds)
    return (_tree_cpu_s(pid) - start) / seconds


def _tree_cpu_s(pid: int) -> float:
    total = 0.0
    for member in process_tree(pid):
        try:
            fields = Path(f"/proc/{member}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue  # ended meanwhile
        total += (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    return total


def settled_tree(pid: int, quiet_s: float = 1.0, wait_s: float = 15.0) -> list[int]:
    """:func:`process_tree` once it has not changed for ``quiet_s`` (an engine worker replaced
    after its last job is forked asynchronously: a measurement starting before the fork would
    count the new process's whole RSS as the next query's)."""
    deadline = time.monotonic() + wait_s
    tree, since = process_tree(pid), time.monotonic()
    while time.monotonic() - since < quiet_s and time.monotonic() < deadline:
        time.sleep(0.1)
        now = process_tree(pid)
        if now != tree:
            tree, since = now, time.monotonic()
    return tree


def tree_status_mib(pid: int, field: str, members: list[int] | None = None) -> float:
    """A ``/proc/<pid>/status`` memory field (``VmRSS``, ``VmHWM``) summed over
    :func:`process_tree` (or over ``members``, those still running), in MiB."""
    total = 0
    for member in process_tree(pid) if members is None else members:
        try:
            status = Path(f"/proc/{member}/status").read_text()
        except OSError:
            continue  # ended meanwhile
        line = next(x for x in status.splitlines() if x.startswith(f"{field}:"))
        total += int(line.split()[1])
    return total / 1024


def reset_tree_peak_rss(pid: int) -> None:
    """Reset every member's ``VmHWM`` to its current RSS (writing 5 to ``clear_refs``,
    proc(5))."""
    for member in process_tree(pid):
        try:
            Path(f"/proc/{member}/clear_refs").write_text("5")
        except OSError:
            continue  # ended meanwhile


BIG_ROWS = 1_000_000
MEDIUM_ROWS = 150_000


def write_rows(path: Path, rows: int) -> None:
    """A CSV object ``id,name,value`` with ``rows`` records (ids 0..rows-1)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(f"{i},name{i % 97},{i % 1000}\n" for i in range(rows)))


def write_bucket(root: Path, files: dict[str, str], config: dict[str, Any] | None = None,
                 bucket: str = "b") -> Catalog:
    """Bucket ``bucket`` under ``root`` holding ``files`` (key -> text), with ``config`` as its
    ``.flight-select.json``; the catalog of ``root``."""
    folder = root / bucket
    for key, text in files.items():
        path = folder / key
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    folder.mkdir(parents=True, exist_ok=True)
    if config is not None:
        (folder / ".flight-select.json").write_text(json.dumps(config))
    return Catalog(root)


def free_port(address: str) -> int:
    """A port free on ``address`` now (a cluster file names fixed ports)."""
    with socket.socket() as sock:
        sock.bind((address, 0))
        return int(sock.getsockname()[1])


def partition_do_gets(process: ServerProcess, obj: str | None = None) -> int:
    """Partition DoGets in a server's log: of ``obj``, or (None) of any object, refused
    ones included (a DoGet refused with WrongNode names no object in its line)."""
    lines = [json.loads(x) for x in process.log_lines if x.startswith("{")]
    return sum(x.get("method") == "DO_GET" and (
        x.get("object") == obj if obj is not None
        else x.get("object") is not None or x.get("error") == "WrongNode") for x in lines)


def make_data(root: Path) -> Path:
    """A data root: the samples' ``sales`` bucket, a ``big`` bucket and a ``private`` one."""
    shutil.copytree(SAMPLES / "sales", root / "sales")
    write_rows(root / "big" / "medium.csv", MEDIUM_ROWS)
    write_rows(root / "big" / "huge.csv", BIG_ROWS)
    (root / "private").mkdir()
    (root / "private" / "secret.csv").write_text("s3cr3t,1\n")
    return root


def write_orders(root: Path, rows: int, note: Callable[[int], str]) -> Path:
    """``shop/orders.csv`` under ``root``: header ``order_id,region,note``, ``rows`` records
    (region ``r{i % 5}``), read with its header as column names. Returns the object's path."""
    path = root / "shop" / "orders.csv"
    path.parent.mkdir(parents=True)
    with path.open("w", newline="") as out:
        writer = csv.writer(out)
        writer.writerow(["order_id", "region", "note"])
        for i in range(rows):
            writer.writerow([i, f"r{i % 5}", note(i)])
    read_csv_headers(path.parent)
    return path


FLIGHTSQL_DBAPI_PYTHON = SAMPLES.parents[1] / ".venv-flightsql-dbapi" / "bin" / "python"
"""flightsql-dbapi's own venv (``scripts/setup.sh``, ``clients/requirements-flightsql-dbapi.txt``):
it pins SQLAlchemy<2, the project's venv has SQLAlchemy>=2 (pyiceberg's SQL catalog)."""


def run_client_script(script: str, argument: Any) -> dict[str, Any]:
    """Run a flightsql-dbapi ``script`` in its own Python process (its venv) with ``argument``
    as JSON in argv[1]; its answer is the JSON document on the last line it prints.

    A client we did not write runs apart: its generated Flight SQL messages and ours cannot
    share one protobuf descriptor pool (what a user's process has is theirs only), and its
    SQLAlchemy<2 pin cannot share the project's venv.
    """
    if not FLIGHTSQL_DBAPI_PYTHON.exists():
        raise RuntimeError(f"{FLIGHTSQL_DBAPI_PYTHON} is missing: run scripts/setup.sh to create "
                           "flightsql-dbapi's venv")
    done = subprocess.run([str(FLIGHTSQL_DBAPI_PYTHON), "-c", script, json.dumps(argument)],
                          capture_output=True, text=True, timeout=120, check=True)
    answer = json.loads(done.stdout.strip().splitlines()[-1])
    assert isinstance(answer, dict)
    return answer


def make_certificates(directory: Path) -> dict[str, Path]:
    """A CA, a server certificate for 127.0.0.1/localhost and a client certificate (openssl)."""
    def run(*args: str) -> None:
        subprocess.run(["openssl", *args], cwd=directory, check=True, capture_output=True)

    run("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", "ca.key", "-out", "ca.pem",
        "-days", "2", "-subj", "/CN=flight-select test CA")
    (directory / "server.ext").write_text(
        "subjectAltName=IP:127.0.0.1,DNS:localhost\nextendedKeyUsage=serverAuth\n"
    )
    (directory / "client.ext").write_text("extendedKeyUsage=clientAuth\n")
    for name in ("server", "client"):
        run("req", "-newkey", "rsa:2048", "-nodes", "-keyout", f"{name}.key", "-out",
            f"{name}.csr", "-subj", f"/CN={name}")
        run("x509", "-req", "-in", f"{name}.csr", "-CA", "ca.pem", "-CAkey", "ca.key",
            "-CAcreateserial", "-out", f"{name}.pem", "-days", "2", "-extfile", f"{name}.ext")
    return {n: directory / n for n in
            ("ca.pem", "server.pem", "server.key", "client.pem", "client.key")}


def events(server: ServerProcess, **match: Any) -> list[dict[str, Any]]:
    """The server's JSON log lines whose fields include ``match``."""
    out = []
    for line in list(server.log_lines):
        try:
            record = json.loads(line)
        except ValueError:
            continue
        if all(record.get(k) == v for k, v in match.items()):
            out.append(record)
    return out


def wait_for_event(server: ServerProcess, timeout: float = 30.0, **match: Any) -> dict[str, Any]:
    """Poll the log until a matching line appears (fails the test after ``timeout``)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = events(server, **match)
        if found:
            return found[-1]
        time.sleep(0.05)
    raise AssertionError(f"no log line with {match}; log:\n{''.join(server.log_lines)[-4000:]}")


def statement_descriptor(sql: str) -> flight.FlightDescriptor:
    """A Flight SQL ``CommandStatementQuery`` descriptor."""
    return flight.FlightDescriptor.for_command(
        protocol.pack_any(pb.CommandStatementQuery(query=sql))
    )


PARTITIONED_HEADERS = [(protocol.ENDPOINTS_HEADER.encode(),
                        protocol.ENDPOINTS_PARTITIONED.encode())]
PARTITIONED = flight.FlightCallOptions(headers=PARTITIONED_HEADERS)
"""Call options of a pyarrow client that reads every endpoint and asks for one per partition
(without them a statement's FlightInfo has one endpoint)."""


def json_descriptor(request: dict[str, Any]) -> flight.FlightDescriptor:
    """A descriptor carrying an S3 SelectObjectContent request as JSON."""
    return flight.FlightDescriptor.for_command(json.dumps(request).encode())


def error_document(exc: BaseException) -> dict[str, Any]:
    """The JSON error document at the start of a Flight error's message."""
    text = str(exc)
    start = text.index("{")
    document, _ = json.JSONDecoder().raw_decode(text[start:])
    assert isinstance(document, dict)
    return document
