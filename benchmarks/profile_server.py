"""Where a query's time goes inside the server: py-spy on the server process.

Starts a server over the server-efficiency data, attaches ``py-spy record`` (raw collapsed
stacks, idle threads excluded), runs one query of :data:`benchmarks.queries.QUERIES` repeatedly,
and reports the share of samples per function (inclusive and self) and per stage (CSV
tokenizing, dataset glue, DataFusion, Flight, ...).

``--query endpoint_cost`` profiles the fixed cost of endpoints instead: the 0-row query of
:mod:`benchmarks.endpoint_cost` over its 64 endpoints (``--partition-mb 1``). ``--gil`` keeps
only the samples of the thread holding the GIL (the Python work the endpoints serialise on);
without it py-spy also counts threads blocked in native code or on a lock, so shares are of
samples, not of CPU (``benchmarks.endpoint_steps`` gives CPU per step).

    python -m benchmarks.profile_server --query like --quick
    python -m benchmarks.profile_server --query endpoint_cost --gil
"""

from __future__ import annotations

import argparse
import collections
import logging
import re
import signal
import subprocess
import time
from collections.abc import Sequence
from typing import Any

from benchmarks import common, endpoint_cost, server_efficiency
from benchmarks.queries import QUERIES

log = logging.getLogger("benchmarks.profile_server")

NAME = "profile_server"

# (stage, pattern on "function (file:line)"); the first stage found walking from the leaf wins.
STAGES: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("CSV reader (formats/csv_input.py)", re.compile(r"csv_input\.py")),
    ("JSON reading", re.compile(r"json_input\.py")),
    ("UDF kernels", re.compile(r"flight_storage/execution/udfs\.py")),
    ("CSV survey (formats/csv_guard.py)", re.compile(r"csv_guard\.py")),
    ("dataset scan glue", re.compile(r"streaming_dataset\.py")),
    ("result conversion", re.compile(r"arrow_result\.py|to_arrow_result")),
    ("DataFusion (planning, reading, executing)", re.compile(r"datafusion/")),
    ("engine (flight_storage/execution)", re.compile(r"flight_storage/execution/")),
    ("Flight server / stream",
     re.compile(r"flight_storage/rpc/(server|boundary|streams)\.py|pyarrow/flight")),
    ("catalog and object paths (flight_storage/storage)", re.compile(r"flight_storage/storage/")),
    ("request decoding (statement, tables, tickets)",
     re.compile(r"flight_storage/(request|protocol)/")),
    ("threads: start, locks, hand-off (threading.py)", re.compile(r"threading\.py")),
)
# A thread blocked on a Python lock still shows as active to py-spy.
_WAITING = re.compile(r"^(Condition\.wait|Event\.wait|Thread\.join|_wait_for_tstate_lock) "
                      r"\(.*threading\.py")
_FRAME = re.compile(r"^(?P<func>.*?) \((?P<file>[^:()]*)(?::(?P<line>\d+))?\)$")


def _options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--query", default="like", help="query name (benchmarks.queries)")
    parser.add_argument("--seconds", type=float, default=20.0, help="how long to sample")
    parser.add_argument("--rate", type=int, default=250, help="samples per second")
    parser.add_argument("--native", action="store_true", help="include native frames")
    parser.add_argument("--gil", action="store_true",
                        help="only samples of the thread holding the GIL")
    parser.add_argument("--partition-mb", type=int, default=None)


def parse_collapsed(text: str) -> list[tuple[list[str], int]]:
    """``frame;frame;... count`` lines -> (frames root first, samples)."""
    stacks = []
    for line in text.splitlines():
        stack, _, count = line.rpartition(" ")
        if stack and count.isdigit():
            stacks.append((stack.split(";"), int(count)))
    return stacks


def _short(frame: str) -> str:
    match = _FRAME.match(frame)
    if not match:
        return frame
    path = match.group("file")
    for marker in ("site-packages/", "/work/main/"):
        if marker in path:
            path = path.split(marker, 1)[1]
    return f"{match.group('func')} ({path})"


def summarize(stacks: list[tuple[list[str], int]], top: int = 15) -> dict[str, Any]:
    """Inclusive and self shares per function, and shares per stage."""
    total = sum(n for _, n in stacks) or 1
    inclusive: collections.Counter[str] = collections.Counter()
    self_time: collections.Counter[str] = collections.Counter()
    stages: collections.Counter[str] = collections.Counter()
    for frames, n in stacks:
        # the process/thread header frames py-spy adds are not functions
        frames = [f for f in frames if not f.startswith(("process ", "thread "))]
        for name in {_short(f) for f in frames}:
            inclusive[name] += n
        if frames:
            self_time[_short(frames[-1])] += n
        stage = "other"
        if frames and _WAITING.search(frames[-1]):
            stage = "waiting (thread blocked in threading)"
        for frame in ([] if stage != "other" else reversed(frames)):
            found = next((s for s, pattern in STAGES if pattern.search(frame)), None)
            if found:
                stage = found
                break
        stages[stage] += n

    def share(counter: collections.Counter[str]) -> list[dict[str, Any]]:
        return [{"name": k, "samples": v, "share": v / total} for k, v in counter.most_common(top)]

    return {"samples": total, "inclusive": share(inclusive), "self": share(self_time),
            "stages": share(stages)}


def _target(args: argparse.Namespace) -> tuple[str, Any, str, list[str]]:
    """(name, data root, statement, server arguments) of the query to profile."""
    extra = ["--partition-mb", str(args.partition_mb)] if args.partition_mb else []
    if args.query == endpoint_cost.NAME:
        root = common.data_root(NAME, {f"{endpoint_cost.BUCKET}/{endpoint_cost.KEY}":
                                       endpoint_cost._object()})
        statement = endpoint_cost.QUERY.replace(
            " FROM s3object", f' FROM "{endpoint_cost.BUCKET}"."{endpoint_cost.KEY}"', 1)
        return args.query, root, statement, extra or ["--partition-mb", "1"]
    query = next(q for q in QUERIES if q.name == args.query)
    files, _headers = server_efficiency.dataset(args.quick, {query.table})
    statement = query.on(server_efficiency.BUCKET, f"{query.table}.csv")
    return query.name, server_efficiency.server_root(files), statement, extra


def main(argv: Sequence[str] | None = None) -> int:
    args = common.bench_args(__doc__.splitlines()[0], argv, _options)
    name, root, statement, extra = _target(args)
    raw = common.WORK / f"{NAME}-{name}.txt"
    raw.parent.mkdir(parents=True, exist_ok=True)
    with common.ServerGroup(root, 1, *extra, sample_memory=False) as servers:
        servers.query(statement)  # warm up before sampling
        command = [str(common.BIN / "py-spy"), "record", "--pid", str(servers.servers[0].pid),
                   "--format", "raw", "--rate", str(args.rate), "-o", str(raw),
                   "--duration", str(int(args.seconds) + 30)]
        if args.native:
            command.append("--native")
        if args.gil:
            command.append("--gil")
        spy = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                               text=True)
        time.sleep(1.0)
        runs, started = 0, time.perf_counter()
        cpu = common.process_cpu_seconds(servers.pids[0])
        while time.perf_counter() - started < args.seconds:
            servers.query(statement)
            runs += 1
        elapsed = time.perf_counter() - started
        cpu = common.process_cpu_seconds(servers.pids[0]) - cpu
        spy.send_signal(signal.SIGINT)
        _, err = spy.communicate(timeout=60)
    if not raw.exists():
        raise RuntimeError(f"py-spy wrote nothing: {err[-2000:]}")
    summary = summarize(parse_collapsed(raw.read_text()))
    per_query = elapsed / max(runs, 1)
    server_cpu = cpu / max(runs, 1)
    text = _markdown(name, summary, runs, per_query, server_cpu, args)
    payload = {"query": name, "statement": statement, "runs": runs,
               "seconds_per_query": per_query, "server_cpu_per_query": server_cpu,
               "native": args.native, "gil": args.gil, "profile": summary}
    common.write_results(args.out, f"{NAME}_{name}{'_gil' if args.gil else ''}", payload, text)
    if not args.keep_data:
        raw.unlink(missing_ok=True)
        common.remove_work(common.WORK / "roots" / server_efficiency.NAME,
                           common.WORK / "roots" / NAME)
    return 0


def _markdown(query: str, summary: dict[str, Any], runs: int, per_query: float,
              server_cpu: float, args: argparse.Namespace) -> str:
    def rows(items: list[dict[str, Any]]) -> list[list[str]]:
        return [[f"`{i['name']}`", f"{i['share']:.1%}"] for i in items]

    data = "the 64-endpoint 0-row query" if query == endpoint_cost.NAME else (
        f"{'quick' if args.quick else 'full'} data")
    kinds = ", ".join(k for k, on in (("native frames", args.native),
                                     ("GIL holder only", args.gil)) if on)
    return (
        f"## Server profile: `{query}` ({data})\n\n"
        f"py-spy at {args.rate} Hz on the server process{f' ({kinds})' if kinds else ''}"
        f", {runs} queries, {common.fmt_s(per_query)} each end to end, "
        f"{common.fmt_cpu(server_cpu)} of server CPU each (with py-spy attached), "
        f"{summary['samples']} non-idle samples.\n\n"
        "### By stage (innermost matching frame)\n\n"
        + common.md_table(["stage", "share of samples"], rows(summary["stages"]))
        + "\n\n### Self time (leaf function)\n\n"
        + common.md_table(["function", "share"], rows(summary["self"]))
        + "\n\n### Inclusive time\n\n"
        + common.md_table(["function", "share"], rows(summary["inclusive"]))
        + "\n"
    )


if __name__ == "__main__":
    raise SystemExit(main())
