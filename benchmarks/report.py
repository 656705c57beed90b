"""Write ``docs/benchmarks.md`` from what is in ``benchmarks/results/``.

    python -m benchmarks.report

The page holds how to reproduce, the targets and whether the latest results meet them, and
each benchmark's latest table and plot (relative links into ``benchmarks/results/``).
"""

from __future__ import annotations

import json
import re
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from benchmarks import common

DOC = common.ROOT / "docs" / "benchmarks.md"
ORDER = ("typed_csv", "wide_csv", "server_efficiency", "endpoint_steps", "flight_floor",
         "object_store", "iceberg", "pushdown", "peers", "scaling", "cluster", "udf_cost")
PROFILES = "profile_server_"

INTRO = """\
# Benchmarks

The benchmarks measure what the project claims. Each is a module under `benchmarks/` that runs
as `python -m benchmarks.<name>`; `--quick` runs on small data in about a minute (the scaling
and pushdown ones in two to three, bounded by the server's CSV reader and by Spark), without it
on larger data. Every case is timed at least three times after one warm-up; tables give the
median and, in brackets, the min–max. Each run writes `benchmarks/results/<name>.json` (every
sample, the machine, the load average and library versions), `<name>.md` and PNG plots; this
page is assembled from those files by `python -m benchmarks.report`.

The numbers below come from a 2-core VM that was also running other work (see the load
average under each table): compare ratios within one table rather than absolute times across
tables.

## Reproduce

```bash
.venv/bin/pip install -e '.[bench]'     # duckdb, tpchgen-cli, matplotlib, py-partiql-parser, psutil
.venv/bin/pip install py-spy            # only for the profile
.venv/bin/python -m benchmarks.server_efficiency --quick   # + CPU-seconds, ADBC, endpoint cost; --cores N
.venv/bin/python -m benchmarks.endpoint_steps            # CPU of each step of a DoGet, 64 endpoints
.venv/bin/python -m benchmarks.flight_floor              # a bare pyarrow Flight DoGet: the floor
.venv/bin/python -m benchmarks.object_store --quick      # SeaweedFS buckets vs folders, fleets
.venv/bin/python -m benchmarks.iceberg --quick           # Iceberg tables: pruning, vs pyiceberg
.venv/bin/python -m benchmarks.pushdown --quick          # starts a local Spark (Java 17)
.venv/bin/python -m benchmarks.peers --quick             # Ceph's column: see below
.venv/bin/python -m benchmarks.scaling --quick           # full run: objects up to 2 GB
.venv/bin/python -m benchmarks.cluster --quick           # 1, 2, 3 storage nodes on 127.0.0.2-4
.venv/bin/python -m benchmarks.udf_cost --quick
.venv/bin/python -m benchmarks.wide_csv --quick            # planning against a CSV's width
.venv/bin/python -m benchmarks.profile_server --quick --query like   # py-spy on the server
.venv/bin/python -m benchmarks.profile_server --query endpoint_cost --gil   # ... on 64 endpoints
.venv/bin/python -m benchmarks.report                    # rewrite this page
```

Data: TPC-H `lineitem` from `tpchgen-cli` (CSV with a header; `l_comment` is always quoted) at
the scale factor each benchmark picks, and the retail orders CSV of `python -m data.generate
--size-mb N` (ISO 8601 timestamps with zones). Everything generated lives in `benchmarks/work/`
(gitignored): the data files of `server_efficiency`, `pushdown`, `peers` and `udf_cost` are
cached there between runs, `scaling` deletes each object after use unless `--keep-data`, and
`rm -rf benchmarks/work` frees it all. Common options: `--runs N`, `--out DIR`; benchmarks
that start a server take `--partition-mb`. The fuller runs below were made with

```bash
.venv/bin/python -m benchmarks.server_efficiency --out benchmarks/results/full   # lineitem SF 0.15, orders 50 MB, 2M-row peer CSV
.venv/bin/python -m benchmarks.pushdown --scale 1.4 --selectivities 0.01 --out benchmarks/results/full   # 1 GB CSV
.venv/bin/python -m benchmarks.udf_cost --out benchmarks/results/full
.venv/bin/python -m benchmarks.cluster --out benchmarks/results/full   # 600 MB over 1, 2, 3 nodes
.venv/bin/python -m benchmarks.scaling --sizes 100,500,1000,2000 --queries filter_1pct \
    --processes 1 --out benchmarks/results/full
FLIGHT_SELECT_CEPH_S3SELECT=/path/to/s3select_example .venv/bin/python -m benchmarks.peers --queries 'peer_*' --out benchmarks/results/full   # 2M-row peer CSV, Ceph (see below)
```

| benchmark | question | compared |
|---|---|---|
| `server_efficiency` | what does serving add to the engine, in time and CPU-seconds, and per endpoint? | the same translated SQL through Flight (our client and the ADBC driver) vs DataFusion in process on the same file; a 0-row query over 1–64 endpoints; a ClickBench-shaped query on wide Parquet vs DuckDB |
| `pushdown` | what does pushdown save at 0.1–100% selectivity? | DataFusion remote table, whole-object fetch, Spark source with and without pushdown, Spark reading the CSV |
| `peers` | how do others answer the same queries? | DuckDB on the CSV; moto's S3 Select emulation (py-partiql-parser) on a small file; Ceph's s3select engine on the six peer queries |
| `scaling` | time and server memory as one object grows; one vs two server processes | objects 10 MB – 2 GB |
| `cluster` | what do 1, 2, 3 storage nodes cost and give (same data split over them)? | one node vs a cluster on this machine; the model for N machines is in docs/cluster.md |
| `udf_cost` | what do our UDFs cost? | each UDF vs the nearest DataFusion builtin, in memory |

**Ceph's s3select engine** (github.com/ceph/s3select, the engine behind Ceph RGW's S3 Select)
is a header-only C++ library with no package in Debian or PyPI, so it is not a dependency of
the project and none of its code or build files are committed here. `benchmarks.peers` runs its
command-line example program when the environment variable `FLIGHT_SELECT_CEPH_S3SELECT` names
the binary (`benchmarks/ceph_peer.py`); without it the Ceph column says "not measured". The
figures below come from the example program (`example/s3select_example.cpp`) of ceph/s3select
at commit 58fe02f8 (2025-07-06), with its two submodules at the commits that commit pins
(fast-cpp-csv-parser 5a417973, rapidjson fcb23c2d; Debian's rapidjson 1.1.0 is too old for its
JSON reader), compiled with Debian 12's g++ 12.2 at the repository's release flags
(`-std=gnu++17 -O3`) against Debian's Boost 1.74, without Arrow/Parquet. The benchmark invokes it
as `s3select_example -key <csv> -q "<statement>"`: the s3-select text of each peer query
unchanged (`FROM s3object`, `_N` columns, Ceph's default CSV rules), the object read in 4 MiB
chunks into the CSV handler that RGW uses, one process per query run. Each answer is compared
with the server's. The peer rows time the server, DuckDB and Ceph in turn within each round and
also give CPU seconds: Ceph's engine is single-threaded, the server uses every core, so on a
machine busy with other work the wall-clock ratio moves with the load more than the CPU figures.
"""


def _load(name: str, results: Path) -> dict[str, Any] | None:
    path = results / f"{name}.json"
    return json.loads(path.read_text()) if path.exists() else None


def targets(results: Path) -> str:
    """The targets table, filled from the latest JSON results."""
    rows = []
    eff = _load("server_efficiency", results / "full") or _load("server_efficiency", results)
    if eff:
        ratios = {r["query"]: r["ratio"] for r in eff["results"]}
        worst = min(ratios, key=lambda k: ratios[k])
        met = sum(1 for v in ratios.values() if v >= 0.8)
        rows.append(["server efficiency ≥ 0.8 of in-process DataFusion on every query",
                     f"{met} of {len(ratios)} queries ({eff['mode']} run); worst `{worst}` "
                     f"{ratios[worst]:.2f}, best {max(ratios.values()):.2f}",
                     "met" if met == len(ratios) else "**missed**"])
    push = _load("pushdown", results / "full") or _load("pushdown", results)
    if push:
        at = {r["variant"]: r for r in push["results"] if r["selectivity"] == 0.01}
        if "spark_pushdown" in at and "spark_csv" in at:
            speed = at["spark_csv"]["time"]["median"] / at["spark_pushdown"]["time"]["median"]
            fewer = at["spark_csv"]["bytes"] / max(1, at["spark_pushdown"]["bytes"])
            rows.append(["at 1%, Spark through the server ≥ 3x faster than Spark on the CSV",
                         f"{speed:.2f}x ({push['mode']} run, "
                         f"{push['object']['bytes'] / 1e6:.0f} MB CSV)",
                         "met" if speed >= 3 else "**missed**"])
            rows.append(["… with ≥ 50x fewer bytes reaching Spark", f"{fewer:.0f}x",
                         "met" if fewer >= 50 else "**missed**"])
        if "datafusion_remote" in at and "datafusion_local" in at:
            ratio = (at["datafusion_local"]["time"]["median"]
                     / at["datafusion_remote"]["time"]["median"])
            rows.append(["at 1%, the DataFusion remote table ≥ 0.8 of DataFusion reading the "
                         "file locally", f"{ratio:.2f}", "met" if ratio >= 0.8 else "**missed**"])
    scale = _load("scaling", results / "full") or _load("scaling", results)
    if scale:
        one = [r for r in scale["results"] if r["processes"] == 1 and r["size_mb"] >= 100]
        sizes = sorted({r["size_mb"] for r in one})
        if len(sizes) > 1:
            lo = max(r["peak_rss"] for r in one if r["size_mb"] == sizes[0])
            hi = max(r["peak_rss"] for r in one)
            rows.append(["server peak memory within 2x from 100 MB to 2 GB objects",
                         f"{hi / lo:.2f}x from {sizes[0]} MB to {sizes[-1]} MB "
                         f"({scale['mode']} run)",
                         "met" if hi / lo <= 2 else "**missed**"])
        else:
            rows.append(["server peak memory within 2x from 100 MB to 2 GB objects",
                         "not measured (quick run stops at 100 MB)", "–"])
    udf = _load("udf_cost", results / "full") or _load("udf_cost", results)
    if udf and udf.get("results") and "slowdown" in udf["results"][0]:
        worst_udf = max(udf["results"], key=lambda r: r["slowdown"])
        met = sum(1 for r in udf["results"] if r["slowdown"] <= 2)
        rows.append(["every UDF ≤ 2x its nearest builtin",
                     f"{met} of {len(udf['results'])}; worst `{worst_udf.get('pair', '?')}` "
                     f"{worst_udf['slowdown']:.1f}x ({udf['mode']} run)",
                     "met" if met == len(udf["results"]) else "**missed**"])
    rows.append(_ceph_target(results))
    return "## Targets\n\n" + common.md_table(["target", "latest", "status"], rows) + "\n"


def _ceph_target(results: Path) -> list[str]:
    """The Ceph target's row, from the latest peers run that measured Ceph (full first)."""
    title = "the server ≥ 5x Ceph's s3select engine on the peer queries"
    for run in (_load("peers", results / "full"), _load("peers", results)):
        measured = [r for r in (run or {}).get("peer_results", [])
                    if r["ceph"]["time"] and r["flight_select"]["time"]]
        if not measured or run is None:
            continue
        speedups = {r["query"]: r["ceph"]["time"]["median"] / r["flight_select"]["time"]["median"]
                    for r in measured}
        worst = min(speedups, key=lambda k: speedups[k])
        met = sum(1 for v in speedups.values() if v >= 5)
        disagree = [r["query"] for r in measured if r.get("ceph_agrees") is False]
        latest = (f"{met} of {len(speedups)}; worst `{worst}` {speedups[worst]:.1f}x, "
                  f"best {max(speedups.values()):.1f}x ({run['mode']} run)")
        if disagree:
            latest += f"; answers differ on {', '.join(disagree)}"
        return [title, latest, "met" if met == len(speedups) and not disagree else "**missed**"]
    return [title, "not measured: no peers run had FLIGHT_SELECT_CEPH_S3SELECT set", "–"]


def _section(path: Path, prefix: str = "") -> str:
    text = path.read_text()
    text = re.sub(r"^(#{2,5}) ", r"#\1 ", text, flags=re.M)  # each heading one level down
    return re.sub(r"!\[([^\]]*)\]\(([^)/]+\.png)\)", rf"![\1](../benchmarks/results/{prefix}\2)", text)


def build(results: Path = common.RESULTS, extra: str = "") -> str:
    """The whole page."""
    parts = [INTRO, targets(results)]
    if extra:
        parts.append(extra)
    parts.append("## Latest results\n")
    for name in ORDER:
        md = results / f"{name}.md"
        if md.exists():
            parts.append(_section(md))
    full = results / "full"
    if any((full / f"{name}.md").exists() for name in ORDER):
        parts.append("## Fuller runs\n\nLarger data than the quick runs above "
                     "(`--out benchmarks/results/full`).\n")
        for name in ORDER:
            md = full / f"{name}.md"
            if md.exists():
                parts.append(_section(md, "full/"))
    profiles = sorted(results.glob(f"{PROFILES}*.md"))
    if profiles:
        parts.append("## Where the server's time goes\n")
        parts += [_section(p) for p in profiles]
    return "\n".join(p.rstrip() + "\n" for p in parts)


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    findings = common.RESULTS / "FINDINGS.md"
    extra = findings.read_text() if findings.exists() else ""
    DOC.write_text(build(common.RESULTS, extra))
    print(f"wrote {DOC.relative_to(common.ROOT)}{' ' + ' '.join(args) if args else ''}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
