"""Benchmark 5: what our UDFs cost against DataFusion builtins doing the nearest thing.

The objects are read once into memory (Utf8 columns ``_1.._N``, empty -> NULL, batches of
65,536 rows as the server's reader yields them, split over two partitions) and registered as
``s3object``, so the timings are expression evaluation only. Each pair asks one question with
a UDF from ``flight_storage.execution.udfs`` and with builtins; both answers are recorded. Builtins do
not always have the s3-select semantics (that is why the UDF exists): a differing answer is
marked, not hidden.

    python -m benchmarks.udf_cost --quick
"""

from __future__ import annotations

import argparse
import logging
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.csv as pa_csv

from benchmarks import common, server_efficiency

log = logging.getLogger("benchmarks.udf_cost")

NAME = "udf_cost"
BATCH_ROWS = 65_536
_TS = "'2025-01-01T00:00:00Z'"


@dataclass(frozen=True)
class Pair:
    """One question asked with a UDF and with builtins."""

    name: str
    table: str
    udf: str
    builtin: str
    note: str = ""


PAIRS: tuple[Pair, ...] = (
    Pair("cast_int", "lineitem",
         "SELECT sum(s3_cast_int(_5)) FROM s3object",
         "SELECT sum(CAST(_5 AS BIGINT)) FROM s3object"),
    Pair("cast_float", "lineitem",
         "SELECT sum(s3_cast_float(_6)) FROM s3object",
         "SELECT sum(CAST(_6 AS DOUBLE)) FROM s3object"),
    Pair("like", "lineitem",
         "SELECT count(*) FROM s3object WHERE s3_like(_16, '%regular%deposits%', '\\')",
         "SELECT count(*) FROM s3object WHERE _16 LIKE '%regular%deposits%'",
         "the translator emits regexp_like for LIKE without ESCAPE; s3_like serves ESCAPE"),
    Pair("to_timestamp", "orders",
         "SELECT max(get_field(s3_to_timestamp(_7), 'utc')) FROM s3object",
         "SELECT max(to_timestamp(_7)) FROM s3object",
         "s3_to_timestamp also keeps the written offset and precision"),
    Pair("date_diff", "orders",
         f"SELECT sum(s3_date_diff('day', s3_to_timestamp(_7), s3_to_timestamp({_TS}))) "
         "FROM s3object",
         f"SELECT sum(date_part('day', to_timestamp({_TS}) - to_timestamp(_7))) FROM s3object"),
    Pair("date_add", "orders",
         "SELECT max(get_field(s3_date_add('day', 7, s3_to_timestamp(_7)), 'utc')) "
         "FROM s3object",
         "SELECT max(to_timestamp(_7) + INTERVAL '7 days') FROM s3object"),
    Pair("to_string", "orders",
         "SELECT max(s3_to_string(s3_to_timestamp(_7), 'yyyy-MM-dd')) FROM s3object",
         "SELECT max(to_char(to_timestamp(_7), '%Y-%m-%d')) FROM s3object",
         "s3 to_string prints the local date of the written offset; to_char prints UTC"),
    Pair("extract_hour", "orders",
         "SELECT sum(date_part('hour', s3_local_time(s3_to_timestamp(_7)))) FROM s3object",
         "SELECT sum(date_part('hour', to_timestamp(_7))) FROM s3object",
         "s3 extract(hour) is the hour at the written offset; the builtin gives UTC"),
)


def load(path: Path, width: int) -> list[list[pa.RecordBatch]]:
    """The CSV as Utf8 ``_1.._N`` batches, split over two partitions."""
    names = [f"_{i}" for i in range(1, width + 1)]
    table = pa_csv.read_csv(path, read_options=pa_csv.ReadOptions(column_names=names,
                                                                    skip_rows=1),
                            convert_options=pa_csv.ConvertOptions(
                                column_types={n: pa.string() for n in names},
                                strings_can_be_null=True))
    batches = table.to_batches(BATCH_ROWS)
    return [batches[0::2], batches[1::2]]


def _context(partitions: list[list[pa.RecordBatch]]) -> Any:
    from datafusion import SessionContext

    from flight_storage.execution.udfs import register_udfs

    ctx = SessionContext()
    register_udfs(ctx)
    ctx.register_record_batches("s3object", [p for p in partitions if p])
    return ctx


def main(argv: Sequence[str] | None = None) -> int:
    args = common.bench_args(__doc__.splitlines()[0], argv)
    files, headers = server_efficiency.dataset(args.quick)
    data = {t: load(p, len(headers[t])) for t, p in files.items()}
    rows = {t: sum(b.num_rows for part in d for b in part) for t, d in data.items()}
    contexts = {t: _context(d) for t, d in data.items()}
    results = []
    for pair in PAIRS:
        ctx = contexts[pair.table]
        udf_stat, udf_answer = common.measure(lambda q=pair.udf: ctx.sql(q).to_pylist(),
                                              args.runs)
        builtin_stat, builtin_answer = common.measure(
            lambda q=pair.builtin: ctx.sql(q).to_pylist(), args.runs)
        udf_value = list(udf_answer[0].values())[0]
        builtin_value = list(builtin_answer[0].values())[0]
        n = rows[pair.table]
        row = {"pair": pair.name, "table": pair.table, "rows": n, "udf_sql": pair.udf,
               "builtin_sql": pair.builtin, "udf": udf_stat, "builtin": builtin_stat,
               "slowdown": udf_stat.median / builtin_stat.median,
               "udf_ns_per_row": udf_stat.median / n * 1e9,
               "builtin_ns_per_row": builtin_stat.median / n * 1e9,
               "udf_answer": str(udf_value), "builtin_answer": str(builtin_value),
               "answers_agree": _same(udf_value, builtin_value), "note": pair.note}
        results.append(row)
        log.info("%-14s udf %s  builtin %s  %.1fx", pair.name, udf_stat.cell(),
                 builtin_stat.cell(), row["slowdown"])
    markdown, figures = report(results, rows, args)
    payload = {"mode": "quick" if args.quick else "full", "runs": args.runs,
               "batch_rows": BATCH_ROWS, "rows": rows, "results": results}
    common.write_results(args.out, NAME, payload, markdown, figures)
    return 0


def _same(a: Any, b: Any) -> bool:
    if isinstance(a, float) and isinstance(b, float):
        return abs(a - b) <= 1e-9 * max(1.0, abs(a), abs(b))
    if hasattr(a, "timestamp") and hasattr(b, "timestamp"):
        a, b = a.replace(tzinfo=None), b.replace(tzinfo=None)
    return bool(a == b)


def report(results: list[dict[str, Any]], rows: dict[str, int], args: argparse.Namespace
           ) -> tuple[str, dict[str, Any]]:
    """Markdown table and a bar plot of ns per row."""
    table = common.md_table(
        ["pair", "rows", "UDF median (min–max)", "builtin median (min–max)", "UDF / builtin",
         "UDF ns/row", "same answer", "note"],
        [[r["pair"], f"{r['rows']:,}", r["udf"].cell(), r["builtin"].cell(),
          f"{r['slowdown']:.1f}x", f"{r['udf_ns_per_row']:.0f}",
          "yes" if r["answers_agree"] else f"no ({r['udf_answer']} vs {r['builtin_answer']})",
          r["note"]] for r in results])
    text = (f"## UDF cost ({'quick' if args.quick else 'full'} run)\n\n"
            f"In-memory tables ({', '.join(f'{t} {n:,} rows' for t, n in rows.items())}), "
            f"batches of {BATCH_ROWS:,} rows; {args.runs} timed runs after one warm-up.\n\n"
            + table + "\n\n![udf cost](udf_cost.png)\n")
    plt = common.pyplot()
    fig, ax = plt.subplots(figsize=(9, 4.5))
    xs = range(len(results))
    ax.bar([i - 0.2 for i in xs], [r["udf_ns_per_row"] for r in results], 0.4, label="our UDF")
    ax.bar([i + 0.2 for i in xs], [r["builtin_ns_per_row"] for r in results], 0.4,
           label="DataFusion builtin")
    ax.set_xticks(list(xs), [r["pair"] for r in results], rotation=30, ha="right")
    ax.set_ylabel("ns per row (median)")
    ax.set_yscale("log")
    ax.legend()
    ax.set_title("UDF cost vs builtins")
    return text, {"udf_cost.png": fig}


if __name__ == "__main__":
    raise SystemExit(main())
