"""Planning cost against a CSV's width, through the server (issue #37 item 3).

Each width (100, 1,000 and 4,000 columns; ``--widths``) is a two-line CSV, a header and one
record of integers, read on the standard surface (no configuration: the server sniffs the header
and types). Every timed run reads a fresh copy of the object, so nothing is cached: what is
timed is the first statement over an object, sniffing included.

* ``plan``: ``GetFlightInfo`` of ``SELECT count(*)`` (pyarrow's Flight client);
* ``query``: ``SELECT count(*)`` through the ADBC driver (prepare, plan, DoGet, answer);
* ``refuse``: ``SELECT *`` over a one-line record of 8,000 integers, refused with
  ``TooManyColumns`` (``--max-columns`` 4096);
* ``hits105``: ``GetFlightInfo`` of ``SELECT count(*)`` over a 105-column CSV shaped like
  ClickBench's ``hits`` (integers, text, timestamps, a date; ``benchmarks.hits``'s 70 columns
  and 35 more of the same kinds), 1,000 records, the 64 KiB sample sniffed.

The ratio of the 4,000- to the 1,000-column plan (best runs) is 4 when planning is linear in
the width and 16 when it is quadratic (it was about 10 before issue #37: 1.16 s and 11.5 s).

    python -m benchmarks.wide_csv --quick       # 3 timed runs per case
    python -m benchmarks.wide_csv --runs 7
"""

from __future__ import annotations

import argparse
import functools
import json
import re
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.csv as pa_csv

from benchmarks import common

NAME = "wide_csv"
WIDTHS = (100, 1000, 4000)
REFUSED_FIELDS = 8000
HITS_COLUMNS = 105
HITS_ROWS = 1000


BEFORE = """\
Before (issue #37, the same two-line CSVs through the server on this 2-core machine):
`count(*)` 0.33 s at 500 columns, 1.16 s at 1,000, 3.36 s at 2,000, 11.5 s at 4,000 (about
the square of the width), and one record of 8,000 fields refused only after 34 s. Three costs
grew with the square of the width, each found by profiling the planning thread and DataFusion:
the sniffer proved its types with one DataFusion statement holding an aggregate per column
(now one condition per type over a long table of the sample's values); a typed table was a
view `SELECT _1 AS a, _2 AS b, ...` whose planning DataFusion does in the square of its
columns (now the CSV is registered under the column names where no column needs a
conversion); and DataFusion's CSV reader allocates a whole batch (8,192 rows) for every column
before the first record, 10 s of zeroed pages for one record of 4,000 columns on a loaded
machine (now a batch holds about a million fields). The sniffer also typed every column twice
where the first record fails every type (a header); and `--max-columns` is now checked on
the first record before sniffing: a wider object reads as S3 Select reads it, so `SELECT *`
is refused at once and a statement naming its fields (`_N`) still reads it."""


def _copies(folder: Path, text: str, count: int) -> list[str]:
    """``count`` copies of one object under ``folder`` (a fresh one per run: nothing cached)."""
    folder.mkdir(parents=True, exist_ok=True)
    for index in range(count):
        path = folder / f"r{index}.csv"
        if not path.exists():
            path.write_text(text)
    return [f"{folder.name}/r{index}.csv" for index in range(count)]


def _wide(width: int) -> str:
    return (",".join(f"c{i}" for i in range(width)) + "\n"
            + ",".join(str(i) for i in range(width)) + "\n")


def _hits_csv(columns: int, rows: int) -> str:
    """A header and ``rows`` records of a hits-like table widened to ``columns`` columns."""
    from benchmarks.hits import hits_table

    table = hits_table(rows)
    extra = columns - table.num_columns
    for index in range(extra):
        source = table.column(index % table.num_columns)
        table = table.append_column(f"{table.column_names[index % table.num_columns]}_{index}",
                                    source)
    sink = pa.BufferOutputStream()
    pa_csv.write_csv(table, sink)
    return sink.getvalue().to_pybytes().decode("utf-8")


def _flight_info(location: str, sql: str) -> Any:
    import pyarrow.flight as flight

    from flight_storage import protocol

    client = flight.FlightClient(location)
    try:
        return client.get_flight_info(flight.FlightDescriptor.for_command(
            protocol.pack_any(protocol.pb.CommandStatementQuery(query=sql))))
    finally:
        client.close()


def _adbc_count(location: str, sql: str) -> int:
    import adbc_driver_flightsql.dbapi as flightsql

    with flightsql.connect(location, autocommit=True) as conn, conn.cursor() as cursor:
        cursor.execute(sql)
        return int(cursor.fetch_arrow_table().column(0)[0].as_py())


def _refusal(location: str, sql: str) -> str:
    try:
        _flight_info(location, sql)
    except pa.ArrowException as exc:  # InvalidArgument arrives as ArrowInvalid, JSON inside
        found = re.search(r'"code": "(\w+)"', str(exc))
        return found.group(1) if found else str(exc)
    return "answered"


def _timed(keys: list[str], run: Callable[[str], Any]) -> tuple[common.Stat, Any]:
    """One untimed run on the first key, then one timed run per further key."""
    result = run(keys[0])
    samples = []
    for key in keys[1:]:
        started = time.perf_counter()
        result = run(key)
        samples.append(time.perf_counter() - started)
    return common.Stat.of(samples), result


def run(widths: Sequence[int], runs: int) -> dict[str, Any]:
    root = common.WORK / NAME
    bucket = root / "wide"
    bucket.mkdir(parents=True, exist_ok=True)
    server = common.start_server(root)
    cases: dict[str, Any] = {}
    try:
        for width in widths:
            text = _wide(width)
            plans = _copies(bucket / f"plan{width}", text, runs + 1)
            queries = _copies(bucket / f"query{width}", text, runs + 1)
            cpu: list[float] = []
            plan, _ = _timed(plans, functools.partial(_planned, server, cpu))
            query_cpu: list[float] = []
            query, answer = _timed(queries, functools.partial(_counted, server, query_cpu))
            plan_cpu = common.Stat.of(cpu[1:])  # the untimed run left out
            cases[f"{width} columns"] = {"width": width, "plan": plan, "plan_cpu": plan_cpu,
                                         "query": query,
                                         "query_cpu": common.Stat.of(query_cpu[1:]),
                                         "answer": answer}
            print(f"{width:>5} columns  plan {plan.cell():>26}  server CPU "
                  f"{plan_cpu.cell():>26}  query {query.cell():>26}  count={answer}", flush=True)
        line = ",".join(str(i) for i in range(REFUSED_FIELDS)) + "\n"
        refused = _copies(bucket / "refuse", line, runs + 1)
        refuse, code = _timed(refused, lambda key: _refusal(
            server.location, f'SELECT * FROM "wide"."{key}"'))
        cases["refuse"] = {"fields": REFUSED_FIELDS, "plan": refuse, "answer": code}
        print(f"{REFUSED_FIELDS} fields refused: {refuse.cell()} {code}", flush=True)
        hits = _copies(bucket / "hits105", _hits_csv(HITS_COLUMNS, HITS_ROWS), runs + 1)
        hits_plan, info = _timed(hits, lambda key: _flight_info(
            server.location, f'SELECT count(*) FROM "wide"."{key}"'))
        about = json.loads(info.app_metadata)
        warm, _ = common.measure(lambda: _flight_info(
            server.location, f'SELECT count(*) FROM "wide"."{hits[0]}"'), runs)
        cases["hits105"] = {"columns": HITS_COLUMNS, "plan": hits_plan, "warm": warm,
                            "reader": about.get("reader"), "typed": about.get("columns")}
        print(f"hits-like {HITS_COLUMNS} columns plan {hits_plan.cell()} warm {warm.cell()} "
              f"reader={about.get('reader')}", flush=True)
    finally:
        server.stop()
    ratio = cpu_ratio = None
    if 1000 in widths and 4000 in widths:
        ratio = cases["4000 columns"]["plan"].min / cases["1000 columns"]["plan"].min
        cpu_ratio = cases["4000 columns"]["plan_cpu"].min / cases["1000 columns"]["plan_cpu"].min
        print(f"plan 4000/1000 (best runs): {ratio:.2f} wall, {cpu_ratio:.2f} server CPU")
    return {"runs": runs, "cases": cases, "plan_ratio_4000_1000": ratio,
            "plan_cpu_ratio_4000_1000": cpu_ratio}


def _planned(server: common.Server, samples: list[float], key: str) -> Any:
    """GetFlightInfo of ``count(*)`` over ``key``, the server's CPU appended to ``samples``."""
    return _server_cpu(server, samples, lambda: _flight_info(
        server.location, f'SELECT count(*) FROM "wide"."{key}"'))


def _counted(server: common.Server, samples: list[float], key: str) -> int:
    """``count(*)`` over ``key`` through ADBC, the server's CPU appended to ``samples``."""
    answer: int = _server_cpu(server, samples, lambda: _adbc_count(
        server.location, f'SELECT count(*) FROM "wide"."{key}"'))
    return answer


def _server_cpu(server: common.Server, samples: list[float], call: Callable[[], Any]) -> Any:
    """``call()``, appending the server's CPU-seconds during it to ``samples``."""
    before = common.process_cpu_seconds(server.pid)
    result = call()
    samples.append(common.process_cpu_seconds(server.pid) - before)
    return result


def markdown(result: dict[str, Any]) -> str:
    cases = result["cases"]
    rows = [[f"{c['width']:,} columns, `count(*)`", c["plan"].cell(),
             common.fmt_cpu(c["plan_cpu"].min), c["query"].cell(),
             common.fmt_cpu(c["query_cpu"].min), c["answer"]]
            for c in cases.values() if "width" in c]
    refuse = cases["refuse"]
    rows.append([f"one record of {refuse['fields']:,} fields, `SELECT *`", refuse["plan"].cell(),
                 "", "", "", refuse["answer"]])
    hits = cases["hits105"]
    rows.append([f"hits-like CSV, {hits['columns']} columns, `count(*)`", hits["plan"].cell(),
                 "", "", "", f"reader {hits['reader']}"])
    rows.append(["the same, an object already planned once (sniff and survey cached)",
                 hits["warm"].cell(), "", "", "", f"reader {hits['reader']}"])
    ratio, cpu_ratio = result["plan_ratio_4000_1000"], result["plan_cpu_ratio_4000_1000"]
    said = "" if ratio is None else (
        f"\n\nPlan of 4,000 columns over 1,000 (best runs): **{cpu_ratio:.2f}** in the "
        f"server's CPU-seconds, {ratio:.2f} in wall time (4 is linear, 16 quadratic; the wall "
        "time moves with the machine's load, the CPU much less).")
    return (
        "## Planning against a CSV's width (`python -m benchmarks.wide_csv`)\n\n"
        "A header and one record per width, the standard surface (sniffed header and types), "
        f"a fresh object per run (nothing cached); medians (min–max) of {result['runs']} timed "
        "runs after one untimed. `plan` is `GetFlightInfo`, `query` the ADBC driver's whole "
        "statement; `CPU` the server's CPU-seconds of the best run.\n\n"
        + common.md_table(["case", "plan", "plan CPU", "query", "query CPU", "answer"], rows) + said + "\n\n"
        + BEFORE + "\n")


def _options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--widths", type=int, nargs="+", default=list(WIDTHS),
                        help="widths of the two-line CSVs (default: 100 1000 4000)")


def main(argv: Sequence[str] | None = None) -> int:
    args = common.bench_args(__doc__.splitlines()[0] if __doc__ else NAME, argv, _options)
    result = run(args.widths, args.runs)
    common.write_results(args.out, NAME, result, markdown(result))
    if not args.keep_data:
        common.remove_work(common.WORK / NAME)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
