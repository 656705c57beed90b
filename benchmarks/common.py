"""Shared helpers of the benchmarks: data, servers, timing, memory sampling and reports.

Everything a benchmark generates lives under :data:`WORK` (gitignored); results go to
:data:`RESULTS` as ``<name>.json``, ``<name>.md`` and ``<name>*.png``.
"""

from __future__ import annotations

import argparse
import datetime as dt
import importlib.metadata
import json
import logging
import os
import platform
import secrets
import shutil
import socket
import statistics
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import pyarrow as pa

from benchmarks.process_cpu import (  # re-exported: the benchmarks read them through common
    process_cpu_seconds as process_cpu_seconds,
)
from benchmarks.process_cpu import (
    process_cpu_seconds_of,
)

log = logging.getLogger("benchmarks")

ROOT = Path(__file__).resolve().parents[1]
WORK = ROOT / "benchmarks" / "work"
RESULTS = ROOT / "benchmarks" / "results"
BIN = Path(sys.executable).parent
MAX_PARALLEL_READS = 8
"""DoGet streams one query keeps open at once (the server refuses more than its
``--max-concurrent-queries``, 16 by default, with SlowDown)."""

LINEITEM_COLUMNS: tuple[str, ...] = (
    "l_orderkey", "l_partkey", "l_suppkey", "l_linenumber", "l_quantity", "l_extendedprice",
    "l_discount", "l_tax", "l_returnflag", "l_linestatus", "l_shipdate", "l_commitdate",
    "l_receiptdate", "l_shipinstruct", "l_shipmode", "l_comment",
)
"""Header of tpchgen-cli's lineitem CSV (RFC 4180, ``l_comment`` always quoted)."""

CSV_USE_HEADER = {"CSV": {"FileHeaderInfo": "USE"}}
LINEITEM_BYTES_PER_SF = 732_000_000
"""About how many bytes of lineitem CSV one TPC-H scale factor gives (measured at SF 0.01)."""

LIBRARIES = (
    "pyarrow", "datafusion", "sqlglot", "pyspark", "duckdb", "py-partiql-parser", "psutil",
    "tpchgen-cli", "matplotlib", "adbc-driver-flightsql", "protobuf",
)

T = TypeVar("T")


# --------------------------------------------------------------------------- arguments
def bench_args(description: str, argv: Sequence[str] | None = None,
               extra: Callable[[argparse.ArgumentParser], None] | None = None
               ) -> argparse.Namespace:
    """Common command line: ``--quick``, ``--runs``, ``--keep-data``, ``--out``."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--quick", action="store_true",
                        help="small data, about a minute; what the committed results come from")
    parser.add_argument("--runs", type=int, default=3, help="timed runs per case (>= 3)")
    parser.add_argument("--keep-data", action="store_true",
                        help="keep generated data under benchmarks/work/ when done")
    parser.add_argument("--out", type=Path, default=RESULTS, help="results directory")
    if extra is not None:
        extra(parser)
    args = parser.parse_args(argv)
    args.runs = max(3, args.runs)
    logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(message)s",
                        stream=sys.stderr)
    logging.getLogger("benchmarks").setLevel(logging.INFO)
    return args


# --------------------------------------------------------------------------- timing
@dataclass(frozen=True)
class Stat:
    """Median, min and max of repeated timings (seconds)."""

    median: float
    min: float
    max: float
    samples: tuple[float, ...]

    @classmethod
    def of(cls, samples: Sequence[float]) -> Stat:
        return cls(statistics.median(samples), min(samples), max(samples), tuple(samples))

    def to_json(self) -> dict[str, Any]:
        return {"median": self.median, "min": self.min, "max": self.max,
                "samples": list(self.samples)}

    def cell(self) -> str:
        """``median (min–max)`` for Markdown tables."""
        return f"{fmt_s(self.median)} ({fmt_s(self.min)}–{fmt_s(self.max)})"


def measure(fn: Callable[[], T], runs: int, warmup: int = 1) -> tuple[Stat, T]:
    """Call ``fn`` ``warmup`` times untimed, then ``runs`` times timed; the last result too."""
    result: T
    for _ in range(warmup):
        result = fn()
    samples = []
    for _ in range(runs):
        started = time.perf_counter()
        result = fn()
        samples.append(time.perf_counter() - started)
    return Stat.of(samples), result


@dataclass(frozen=True)
class Timed:
    """Wall time of repeated runs and the CPU-seconds each run cost.

    Attributes:
        wall: seconds per run.
        cpu: CPU-seconds per run of this process (the client, or the in-process engine).
        server_cpu: CPU-seconds per run of the server processes (empty when none).
    """

    wall: Stat
    cpu: Stat
    server_cpu: Stat | None = None

    def to_json(self) -> dict[str, Any]:
        return {"wall": self.wall.to_json(), "cpu": self.cpu.to_json(),
                "server_cpu": None if self.server_cpu is None else self.server_cpu.to_json()}


SERVER_SETTLE_S = 0.02
"""Pause before each run that reads a server's CPU: a stream's producer thread may still be
closing after the client has its last batch, and that belongs to the run before."""


def measure_rounds(cases: Mapping[str, Callable[[], Any]], runs: int,
                   server_pids: Mapping[str, Sequence[int]] | None = None, warmup: int = 1
                   ) -> dict[str, tuple[Timed, Any]]:
    """Time every case with its CPU-seconds, here and in its ``server_pids``, one run of each
    case per round, ``runs`` rounds after ``warmup``: on a machine shared with other work,
    every case sees the same load, so their ratios hold better than their absolute times.

    Returns:
        Each case's :class:`Timed` and the result of its last run.
    """
    pids = {name: tuple((server_pids or {}).get(name, ())) for name in cases}
    results: dict[str, Any] = {}
    for _ in range(warmup):
        for name, fn in cases.items():
            results[name] = fn()
    samples: dict[str, tuple[list[float], list[float], list[float]]] = {
        name: ([], [], []) for name in cases}

    for _ in range(runs):
        for name, fn in cases.items():
            if pids[name]:
                time.sleep(SERVER_SETTLE_S)
            server0 = process_cpu_seconds_of(pids[name])
            cpu0, started = time.process_time(), time.perf_counter()
            results[name] = fn()
            walls, here, there = samples[name]
            walls.append(time.perf_counter() - started)
            here.append(time.process_time() - cpu0)
            if pids[name]:
                time.sleep(SERVER_SETTLE_S)
                there.append(process_cpu_seconds_of(pids[name]) - server0)
    return {name: (Timed(Stat.of(walls), Stat.of(here), Stat.of(there) if there else None),
                   results[name])
            for name, (walls, here, there) in samples.items()}


def fmt_cpu(seconds: float) -> str:
    """CPU-seconds in ms (one decimal below 10 ms)."""
    ms = seconds * 1e3
    return f"{ms:.1f} ms" if ms < 10 else f"{ms:.0f} ms"


def fmt_s(seconds: float) -> str:
    """Seconds in a readable unit."""
    if seconds < 1e-3:
        return f"{seconds * 1e6:.0f} µs"
    if seconds < 1:
        return f"{seconds * 1e3:.0f} ms"
    return f"{seconds:.2f} s"


def fmt_bytes(n: float) -> str:
    """Bytes in a readable unit (powers of 1024)."""
    for unit in ("B", "KiB", "MiB", "GiB"):
        if abs(n) < 1024 or unit == "GiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n:.1f} GiB"


# --------------------------------------------------------------------------- environment
def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def _git_commit() -> str | None:
    try:
        out = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT,
                             capture_output=True, text=True, check=True)
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"],
                               cwd=ROOT, capture_output=True, text=True, check=True)
    except (OSError, subprocess.CalledProcessError):
        return None
    return out.stdout.strip() + ("+dirty" if dirty.stdout.strip() else "")


def environment() -> dict[str, Any]:
    """The machine and the library versions a result was measured with."""
    import psutil

    versions = {}
    for name in LIBRARIES:
        try:
            versions[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            versions[name] = None
    java = shutil.which("java")
    java_version = None
    if java:
        probe = subprocess.run([java, "-version"], capture_output=True, text=True)
        java_version = (probe.stderr.splitlines() or [""])[0]
    return {
        "when": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        "commit": _git_commit(),
        "python": platform.python_version(),
        "platform": platform.platform(),
        "cpu": _cpu_model(),
        "cores": os.cpu_count(),
        "memory_gib": round(psutil.virtual_memory().total / 2**30, 1),
        "java": java_version,
        "load_average": [round(x, 2) for x in os.getloadavg()],
        "libraries": versions,
    }


# --------------------------------------------------------------------------- data
def lineitem(scale: float, fmt: str = "csv") -> Path:
    """TPC-H lineitem at ``scale`` as ``csv`` or ``parquet`` (generated once by tpchgen-cli)."""
    directory = WORK / "tpch" / f"sf{scale:g}"
    path = directory / f"lineitem.{fmt}"
    if path.exists():
        return path
    directory.mkdir(parents=True, exist_ok=True)
    tool = BIN / "tpchgen-cli"
    command = [str(tool if tool.exists() else "tpchgen-cli"), fmt, "-s", f"{scale:g}",
               "--tables", "lineitem", "-o", str(directory), "--overwrite"]
    log.info("generating %s", " ".join(command[1:]))
    subprocess.run(command, check=True, capture_output=True)
    return path


def scale_for_mb(megabytes: float) -> float:
    """The TPC-H scale factor whose lineitem CSV is about ``megabytes`` MB (10^6 bytes)."""
    return round(megabytes * 1e6 / LINEITEM_BYTES_PER_SF, 4)


def orders_csv(size_mb: int, seed: int = 42) -> Path:
    """The retail orders CSV of ``python -m data.generate --size-mb`` (generated once)."""
    root = WORK / "orders" / f"{size_mb}mb"
    path = root / "sales" / "orders" / "orders.csv"
    if not path.exists():
        subprocess.run([sys.executable, "-m", "data.generate", "--size-mb", str(size_mb),
                        "--formats", "csv", "--seed", str(seed), "--out", str(root)],
                       cwd=ROOT, check=True, capture_output=True)
    return path


def data_root(name: str, objects: Mapping[str, Path],
              tables: Mapping[str, Sequence[Mapping[str, Any]]] | None = None) -> Path:
    """A server data root ``WORK/roots/<name>`` holding ``objects`` (``bucket/key`` -> file).

    Files are hard-linked (no copy); ``tables`` gives each bucket's ``.flight-select.json``
    table entries (``{"prefix": ..., "InputSerialization": ...}``).
    """
    root = WORK / "roots" / name
    if root.exists():
        shutil.rmtree(root)
    for name_in_root, source in objects.items():
        target = root / name_in_root
        target.parent.mkdir(parents=True, exist_ok=True)
        try:
            os.link(source, target)
        except OSError:
            shutil.copyfile(source, target)
    for bucket, entries in (tables or {}).items():
        (root / bucket).mkdir(parents=True, exist_ok=True)
        (root / bucket / ".flight-select.json").write_text(json.dumps({"tables": list(entries)}))
    return root


def remove_work(*paths: Path) -> None:
    """Delete generated data (files or directories under WORK)."""
    for path in paths:
        if WORK not in path.resolve().parents:
            raise ValueError(f"refusing to delete {path}: not under {WORK}")
        if path.is_dir():
            shutil.rmtree(path, ignore_errors=True)
        elif path.exists():
            path.unlink()


# --------------------------------------------------------------------------- servers
def free_port(address: str = "127.0.0.1") -> int:
    """A port free on ``address`` now (cluster and fleet files name fixed ports)."""
    with socket.socket() as s:
        s.bind((address, 0))
        return int(s.getsockname()[1])


class MemorySampler:
    """Samples the resident set size of some processes in a thread; keeps the peak.

    Args:
        pids: processes to watch (their children are included).
        interval_s: sampling period.
    """

    def __init__(self, pids: Iterable[int], interval_s: float = 0.02) -> None:
        import psutil

        self._processes = [psutil.Process(pid) for pid in pids]
        self._interval = interval_s
        self._lock = threading.Lock()
        self._peak = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def current(self) -> int:
        """Summed RSS of the watched processes now (bytes)."""
        import psutil

        total = 0
        for process in self._processes:
            try:
                total += process.memory_info().rss
                total += sum(c.memory_info().rss for c in process.children(recursive=True))
            except psutil.Error:
                continue
        return total

    def _run(self) -> None:
        while not self._stop.wait(self._interval):
            value = self.current()
            with self._lock:
                self._peak = max(self._peak, value)

    def reset(self) -> None:
        """Start a new peak from the current RSS."""
        with self._lock:
            self._peak = self.current()

    def peak(self) -> int:
        """Largest summed RSS seen since the last :meth:`reset` (bytes)."""
        with self._lock:
            return max(self._peak, self.current())

    def close(self) -> None:
        self._stop.set()
        self._thread.join()


@dataclass
class Server:
    """One ``flight-select serve`` subprocess."""

    location: str
    process: subprocess.Popen[str]
    log_lines: list[str] = field(default_factory=list)

    @property
    def pid(self) -> int:
        return self.process.pid

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()


def start_server(data_dir: Path | str, *extra: str, secret_file: Path | None = None,
                 env: Mapping[str, str] | None = None) -> Server:
    """Run ``python -m flight_storage serve`` on a free loopback port; wait until it listens
    (``data_dir`` may be any ``--data`` location; ``env`` adds to the environment, e.g. an
    object store's ``AWS_*`` variables)."""
    command = [sys.executable, "-m", "flight_storage", "serve", "--data", str(data_dir),
               "--port", "0", "--log-level", "WARNING", *extra]
    if secret_file is not None:
        command += ["--ticket-secret-file", str(secret_file)]
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                               text=True, cwd=ROOT, env={**os.environ, **(env or {})})
    server = Server("", process)
    assert process.stderr is not None
    assert process.stdout is not None
    threading.Thread(target=lambda: server.log_lines.extend(iter(process.stderr.readline, "")),
                     daemon=True).start()
    line = process.stdout.readline()
    if "listening on " not in line:
        process.kill()
        time.sleep(0.2)
        raise RuntimeError(f"server did not start: {line!r} {''.join(server.log_lines)[-2000:]}")
    server.location = line.split("listening on ", 1)[1].strip()
    return server


class ServerGroup:
    """``n`` replicas over one data root sharing a ticket secret, plus a memory sampler.

    Use as a context manager; :meth:`query` plans on the first replica and redeems endpoint
    ``i`` on replica ``i % n`` (tickets are stateless, so any replica serves any of them).
    """

    def __init__(self, data_dir: Path | str, processes: int = 1, *extra: str,
                 env: Mapping[str, str] | None = None, sample_memory: bool = True,
                 headers: Mapping[str, str] | None = None) -> None:
        WORK.mkdir(parents=True, exist_ok=True)
        self._secret = WORK / f".ticket-secret-{os.getpid()}"
        self._secret.write_text(secrets.token_hex(32))
        self.servers: list[Server] = []
        try:
            for _ in range(processes):
                self.servers.append(start_server(data_dir, *extra, secret_file=self._secret,
                                                 env=env))
        except BaseException:
            self.close()
            raise
        # the sampler's thread costs this process CPU: off where the client's CPU is measured
        self.memory = MemorySampler(s.pid for s in self.servers) if sample_memory else None
        from compute_client.flight import ConnectionOptions, FlightSelectClient

        self.clients = [FlightSelectClient(ConnectionOptions(s.location,
                                                             headers=dict(headers or {})))
                        for s in self.servers]

    @property
    def pids(self) -> list[int]:
        """The server processes."""
        return [s.pid for s in self.servers]

    @property
    def location(self) -> str:
        return self.servers[0].location

    def query(self, statement: str, parallel: bool = True) -> FlightResult:
        """Plan ``statement`` and read every endpoint, up to :data:`MAX_PARALLEL_READS` at once."""
        from compute_client.flight import Endpoint

        plan = self.clients[0].execute(statement)
        n = len(self.clients)
        jobs = [(self.clients[i % n], Endpoint(e.ticket, ()))
                for i, e in enumerate(plan.endpoints)]

        def drain(job: tuple[Any, Endpoint]) -> tuple[int, int]:
            client, endpoint = job
            rows = nbytes = 0
            for batch in client.read(endpoint):
                rows += batch.num_rows
                nbytes += batch.nbytes
            return rows, nbytes

        if parallel and len(jobs) > 1:
            with ThreadPoolExecutor(min(len(jobs), MAX_PARALLEL_READS)) as pool:
                parts = list(pool.map(drain, jobs))
        else:
            parts = [drain(job) for job in jobs]
        return FlightResult(sum(p[0] for p in parts), sum(p[1] for p in parts), len(jobs),
                            str(plan.about.reader or "?"))

    def close(self) -> None:
        for client in getattr(self, "clients", []):
            client.close()
        if getattr(self, "memory", None) is not None:
            self.memory.close()
        for server in self.servers:
            server.stop()
        self._secret.unlink(missing_ok=True)

    def __enter__(self) -> ServerGroup:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class AdbcReader:
    """The ADBC Flight SQL driver on one server: a client that holds no GIL while it reads.

    ``adbc_driver_flightsql`` is native (Go): ``execute`` prepares the statement, asks for its
    FlightInfo and reads every endpoint concurrently in its own threads, so what it costs the
    server is measured apart from our Python client's per-batch work.
    """

    def __init__(self, location: str, headers: Mapping[str, str] | None = None) -> None:
        import adbc_driver_flightsql.dbapi as dbapi
        from adbc_driver_flightsql import DatabaseOptions

        prefix = DatabaseOptions.RPC_CALL_HEADER_PREFIX.value
        self._connection = dbapi.connect(
            location, db_kwargs={prefix + k: v for k, v in (headers or {}).items()},
            autocommit=True)
        self._cursor = self._connection.cursor()
        self._endpoints: dict[str, int] = {}

    def endpoints(self, statement: str) -> int:
        """How many endpoints the FlightInfo the driver gets for ``statement`` has
        (``adbc_execute_partitions``: one partition per endpoint; asked once per statement)."""
        if statement not in self._endpoints:
            partitions, _schema = self._cursor.adbc_execute_partitions(statement)
            self._endpoints[statement] = len(partitions)
        return self._endpoints[statement]

    def query(self, statement: str) -> FlightResult:
        """Run ``statement`` and read its whole answer."""
        self._cursor.execute(statement)
        table = self._cursor.fetch_arrow_table()
        return FlightResult(table.num_rows, table.nbytes, self.endpoints(statement), "?")

    def close(self) -> None:
        self._cursor.close()
        self._connection.close()

    def __enter__(self) -> AdbcReader:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


@dataclass(frozen=True)
class FlightResult:
    """What one end-to-end query returned: rows, Arrow bytes and endpoints."""

    rows: int
    nbytes: int
    endpoints: int
    reader: str = "?"
    """Which reader the server says served the query (``datafusion`` or ``reference``)."""


# --------------------------------------------------------------------------- in-process
def peer_csv(rows: int, seed: int = 7) -> Path:
    """A headerless CSV of ``rows`` synthetic records (generated once), the peer-query file.

    Columns: ``_1`` id, ``_2`` int 0-999, ``_3`` int 0-99 (``_3 = '0'`` is 1% of rows),
    ``_4`` price with two decimals, ``_5`` ISO-8601 timestamp (2020-2025, UTC),
    ``_6`` text of three words from a small vocabulary.
    """
    import numpy as np

    path = WORK / "peer" / f"peer_{rows}.csv"
    if path.exists():
        return path
    path.parent.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(seed)
    words = np.array(["alpha", "bravo", "charlie", "delta", "echo", "foxtrot", "golf", "hotel",
                      "india", "juliet", "kilo", "lima", "mike", "november", "oscar", "papa"])
    start = np.datetime64("2020-01-01T00:00:00")
    tmp = path.with_suffix(".tmp")
    with tmp.open("w") as out:
        for lo in range(0, rows, 500_000):
            n = min(500_000, rows - lo)
            stamps = start + rng.integers(0, 6 * 365 * 86400, n).astype("timedelta64[s]")
            text = [" ".join(t) for t in words[rng.integers(0, len(words), (n, 3))]]
            columns = [
                np.arange(lo + 1, lo + n + 1).astype(str),
                rng.integers(0, 1000, n).astype(str),
                rng.integers(0, 100, n).astype(str),
                np.char.mod("%.2f", rng.uniform(1, 1000, n)),
                np.char.add(np.datetime_as_string(stamps, unit="s"), "Z"),
                np.array(text),
            ]
            out.write("\n".join(",".join(r) for r in zip(*columns, strict=True)) + "\n")
    tmp.rename(path)
    return path


def datafusion_csv_context(path: Path, num_columns: int, *, has_header: bool = True,
                           config: Any = None) -> Any:
    """A DataFusion session with our UDFs and ``path`` registered as ``s3object``.

    The table has the columns the server gives a CSV object: Utf8 ``_1 .. _N`` (empty -> NULL),
    read by DataFusion's own CSV reader with its default parallelism (or ``config``, a
    ``SessionConfig``).
    """
    from datafusion import SessionContext

    from flight_storage.execution.udfs import register_udfs

    ctx = SessionContext(config)
    register_udfs(ctx)
    schema = pa.schema([pa.field(f"_{i}", pa.string()) for i in range(1, num_columns + 1)])
    ctx.register_csv("s3object", str(path), schema=schema, has_header=has_header,
                     file_extension=path.suffix)
    return ctx


def drain_datafusion(ctx: Any, sql: str) -> tuple[int, int]:
    """Run ``sql`` to the end; (rows, Arrow bytes)."""
    rows = nbytes = 0
    for batch in ctx.sql(sql).execute_stream():
        arrow = batch.to_pyarrow()
        rows += arrow.num_rows
        nbytes += arrow.nbytes
    return rows, nbytes


# --------------------------------------------------------------------------- results
def md_table(headers: Sequence[str], rows: Iterable[Sequence[Any]]) -> str:
    """A Markdown table."""
    lines = ["| " + " | ".join(headers) + " |", "|" + "|".join("---" for _ in headers) + "|"]
    lines += ["| " + " | ".join(str(c) for c in row) + " |" for row in rows]
    return "\n".join(lines)


def write_results(out: Path, name: str, payload: Mapping[str, Any], markdown: str,
                  figures: Mapping[str, Any] | None = None) -> None:
    """Write ``<name>.json`` (payload + environment), ``<name>.md`` and the PNG figures."""
    out.mkdir(parents=True, exist_ok=True)
    env = environment()
    document = {"benchmark": name, "environment": env, **payload}
    (out / f"{name}.json").write_text(json.dumps(document, indent=2, default=_json_default))
    libs = ", ".join(f"{k} {v}" for k, v in env["libraries"].items() if v)
    load = "/".join(f"{x:.1f}" for x in env["load_average"])
    footer = (f"\n\n_Measured {env['when']} on {env['cpu']} ({env['cores']} cores, "
              f"{env['memory_gib']} GiB, load average {load} when written), Python {env['python']}, commit {env['commit']}; "
              f"{libs}._\n")
    (out / f"{name}.md").write_text(markdown.rstrip() + footer)
    for filename, figure in (figures or {}).items():
        figure.savefig(out / filename, dpi=110, bbox_inches="tight")
    log.info("wrote %s/%s.{json,md}%s", out, name,
             "".join(f" {f}" for f in (figures or {})))


def _json_default(value: Any) -> Any:
    if isinstance(value, Stat):
        return value.to_json()
    if hasattr(value, "__dataclass_fields__"):
        return asdict(value)
    if isinstance(value, Path):
        return str(value)
    raise TypeError(f"not JSON serializable: {type(value).__name__}")


def pyplot() -> Any:
    """matplotlib's pyplot on the Agg backend (no display)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt
