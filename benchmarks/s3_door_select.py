"""The S3 door's SelectObjectContent, end to end through boto3 (issue 40, item 3).

One ``flight-select serve --s3-port`` subprocess; boto3's ``select_object_content`` runs each
case ``--runs`` times after one warm-up, drains the event stream and checks the records it got.
Each case reports the median wall time (min–max) and the server process's CPU-seconds per run
(user + system, every thread: what the door, the engine and any loopback call cost together).

| case | object | what it exercises |
|---|---|---|
| ``small`` | a 1,000-row CSV | the fixed cost of one request (planning, one endpoint, a few records) |
| ``scan_filter`` | the ~50 MB orders CSV | a whole scan returning few records |
| ``scan_all`` | the same object | a whole scan returning every record as CSV events |

    python -m benchmarks.s3_door_select [--quick] [--runs 20]
"""

from __future__ import annotations

import json
import logging
import statistics
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from benchmarks import common

log = logging.getLogger("benchmarks.s3_door_select")

NAME = "s3_door_select"
BUCKET = "bench"
SIZES = {"quick": 5, "full": 50}
"""Orders CSV megabytes per mode."""
CASES: tuple[tuple[str, str, str], ...] = (
    ("small", "small.csv", "SELECT s._1, s._2 FROM s3object s WHERE s._1 = '7'"),
    ("scan_filter", "orders.csv", "SELECT s._1 FROM s3object s WHERE s._1 = '123'"),
    ("scan_all", "orders.csv", "SELECT * FROM s3object s"),
)


def _client(url: str) -> Any:
    import boto3
    from botocore.config import Config

    return boto3.client("s3", endpoint_url=url, aws_access_key_id="bench",
                        aws_secret_access_key="bench", region_name="us-east-1",
                        config=Config(s3={"addressing_style": "path"},
                                      retries={"max_attempts": 1}, read_timeout=600))


def _select(client: Any, key: str, expression: str) -> int:
    """Bytes of records the door answered (the stream must end with End)."""
    answer = client.select_object_content(
        Bucket=BUCKET, Key=key, Expression=expression, ExpressionType="SQL",
        InputSerialization={"CSV": {"FileHeaderInfo": "NONE"}},
        OutputSerialization={"CSV": {}})
    received, ended = 0, False
    for event in answer["Payload"]:
        if "Records" in event:
            received += len(event["Records"]["Payload"])
        ended = ended or "End" in event
    if not ended:
        raise RuntimeError(f"{key}: the event stream ended without End")
    return received


def _start(root: Path) -> tuple[common.Server, str]:
    server = common.start_server(root, "--s3-port", "0")
    assert server.process.stdout is not None
    line = server.process.stdout.readline()
    if "s3 listening on " not in line:
        server.stop()
        raise RuntimeError(f"no S3 door: {line!r}")
    return server, line.split("s3 listening on ", 1)[1].strip()


def run(argv: Sequence[str] | None = None) -> dict[str, Any]:
    args = common.bench_args(__doc__ or NAME, argv)
    size = SIZES["quick" if args.quick else "full"]
    orders = common.orders_csv(size)
    small = common.WORK / "s3_door_select" / "small.csv"
    small.parent.mkdir(parents=True, exist_ok=True)
    small.write_text("".join(f"{i},name-{i},{i * 3}\n" for i in range(1000)))
    root = common.data_root(NAME, {f"{BUCKET}/orders.csv": orders,
                                   f"{BUCKET}/small.csv": small})
    server, url = _start(root)
    results: dict[str, Any] = {"environment": common.environment(), "orders_bytes":
                               orders.stat().st_size, "runs": args.runs, "cases": {}}
    try:
        client = _client(url)
        for name, key, expression in CASES:
            expected = _select(client, key, expression)  # warm-up, and the answer's size
            walls, cpus = [], []
            for _ in range(args.runs):
                cpu = common.process_cpu_seconds(server.pid)
                started = time.perf_counter()
                got = _select(client, key, expression)
                walls.append(time.perf_counter() - started)
                cpus.append(common.process_cpu_seconds(server.pid) - cpu)
                if got != expected:
                    raise RuntimeError(f"{name}: {got} bytes, then {expected}")
            results["cases"][name] = {"key": key, "expression": expression,
                                      "returned_bytes": expected,
                                      "wall": common.Stat.of(walls).to_json(),
                                      "server_cpu_median": statistics.median(cpus)}
            log.info("%s: wall %s, server CPU %s per run, %s returned", name,
                     common.Stat.of(walls).cell(), common.fmt_cpu(statistics.median(cpus)),
                     common.fmt_bytes(expected))
    finally:
        server.stop()
        if not args.keep_data:
            common.remove_work(root)
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / f"{NAME}.json").write_text(json.dumps(results, indent=2))
    return results


if __name__ == "__main__":
    run()
