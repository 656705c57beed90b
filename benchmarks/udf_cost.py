"""Benchmark 5: what s3-select functions cost against DataFusion builtins doing the nearest thing.

The objects are read once into memory (Utf8 columns ``_1.._N``, empty -> NULL, batches of
65,536 rows as the server's reader yields them, split over two partitions) and registered as
``s3object``, so the timings are expression evaluation only. Each pair asks one question in
s3-select, run as the translator emits it (builtins where they are exact, the UDFs of
``flight_storage.execution.udfs`` for the rows they cannot answer), and with builtins; both
answers are recorded. Builtins do not always have the s3-select semantics (that is why the
UDFs exist): a differing answer is marked, not hidden.

    python -m benchmarks.udf_cost --quick
"""

from __future__ import annotations

import argparse
import logging
from collections.abc import Sequence
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.csv as pa_csv

from benchmarks import common, server_efficiency
from select_dialect import translate, udf_names

log = logging.getLogger("benchmarks.udf_cost")

NAME = "udf_cost"
BATCH_ROWS = 65_536
_TS = "'2025-01-01T00:00:00Z'"


@dataclass(frozen=True)
class Pair:
    """One question asked in s3-select (run as the translator emits it) and with builtins."""

    name: str
    table: str
    s3select: str
    builtin: str
    note: str = ""

    @property
    def emitted(self) -> str:
        """The DataFusion SQL the server runs for ``s3select`` (positional CSV columns)."""
        return translate(self.s3select, input_format="csv").sql


PAIRS: tuple[Pair, ...] = (
    Pair("cast_int", "lineitem",
         "SELECT sum(int(_5)) FROM s3object",
         "SELECT sum(CAST(_5 AS BIGINT)) FROM s3object"),
    Pair("cast_float", "lineitem",
         "SELECT sum(float(_6)) FROM s3object",
         "SELECT sum(CAST(_6 AS DOUBLE)) FROM s3object"),
    Pair("like", "lineitem",
         "SELECT count(*) FROM s3object WHERE _16 LIKE '%regular%deposits%'",
         "SELECT count(*) FROM s3object WHERE _16 LIKE '%regular%deposits%'"),
    Pair("like_escape", "lineitem",
         "SELECT count(*) FROM s3object WHERE _16 LIKE '%regular#_%' ESCAPE '#'",
         "SELECT count(*) FROM s3object WHERE _16 LIKE '%regular\\_%'"),
    Pair("to_timestamp", "orders",
         f"SELECT count(*) FROM s3object WHERE to_timestamp(_7) > to_timestamp({_TS})",
         f"SELECT count(*) FROM s3object WHERE to_timestamp(_7) > to_timestamp({_TS})"),
    Pair("date_diff", "orders",
         f"SELECT sum(date_diff(day, to_timestamp(_7), to_timestamp({_TS}))) FROM s3object",
         f"SELECT sum(date_part('day', to_timestamp({_TS}) - to_timestamp(_7))) FROM s3object"),
    Pair("date_add", "orders",
         f"SELECT count(*) FROM s3object WHERE date_add(day, 7, to_timestamp(_7)) > "
         f"to_timestamp({_TS})",
         "SELECT count(*) FROM s3object WHERE to_timestamp(_7) + INTERVAL '7 days' > "
         f"to_timestamp({_TS})"),
    Pair("to_string", "orders",
         "SELECT max(to_string(to_timestamp(_7), 'yyyy-MM-dd')) FROM s3object",
         "SELECT max(to_char(to_timestamp(_7), '%Y-%m-%d')) FROM s3object",
         "s3 to_string prints the local date of the written offset; to_char prints UTC"),
    Pair("extract_hour", "orders",
         "SELECT sum(extract(hour from to_timestamp(_7))) FROM s3object",
         "SELECT sum(date_part('hour', to_timestamp(_7))) FROM s3object",
         "s3 extract(hour) is the hour at the written offset; the builtin gives UTC"),
    Pair("extract_year", "orders",
         "SELECT count(*) FROM s3object WHERE extract(year from to_timestamp(_7)) = 2024",
         "SELECT count(*) FROM s3object WHERE date_part('year', to_timestamp(_7)) = 2024",
         "s3 reads the year at the written offset, the builtin in UTC"),
    Pair("peer_year", "peer",
         "SELECT count(*) FROM s3object WHERE extract(year from to_timestamp(_5)) = 2023",
         "SELECT count(*) FROM s3object WHERE date_part('year', to_timestamp(_5)) = 2023",
         "the peer query 'year of to_timestamp' (timestamps written in UTC)"),
)

# Tables whose CSV has no header row.
_HEADERLESS = frozenset({"peer"})


def load(path: Path, width: int, has_header: bool = True) -> list[list[pa.RecordBatch]]:
    """The CSV as Utf8 ``_1.._N`` batches, split over two partitions."""
    names = [f"_{i}" for i in range(1, width + 1)]
    table = pa_csv.read_csv(path, read_options=pa_csv.ReadOptions(column_names=names,
                                                                    skip_rows=int(has_header)),
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
    # the pairs read the plain CSV tables, loaded in memory (not the Parquet or gzip ones)
    files, headers = server_efficiency.dataset(args.quick, {pair.table for pair in PAIRS})
    data = {t: load(p, len(headers[t]), t not in _HEADERLESS) for t, p in files.items()}
    rows = {t: sum(b.num_rows for part in d for b in part) for t, d in data.items()}
    contexts = {t: _context(d) for t, d in data.items()}
    results = []
    for pair in PAIRS:
        ctx = contexts[pair.table]
        emitted = pair.emitted
        udf_stat, udf_answer = common.measure(partial(_rows, ctx, emitted), args.runs)
        builtin_stat, builtin_answer = common.measure(partial(_rows, ctx, pair.builtin),
                                                      args.runs)
        udf_value = next(iter(udf_answer[0].values()))
        builtin_value = next(iter(builtin_answer[0].values()))
        n = rows[pair.table]
        row = {"pair": pair.name, "table": pair.table, "rows": n, "s3select": pair.s3select,
               "udf_sql": emitted, "udf_calls": _udf_calls(emitted),
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


def _rows(ctx: Any, sql: str) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = ctx.sql(sql).to_pylist()
    return rows


def _udf_calls(sql: str) -> list[str]:
    """The s3-select UDFs the emitted SQL calls (on the rows the builtins leave to them)."""
    return sorted(name for name in udf_names.UDF_NAMES if f"{name}(" in sql)


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
        ["pair", "rows", "s3-select median (min–max)", "builtin median (min–max)",
         "s3-select / builtin", "s3-select ns/row", "UDFs in the emitted SQL", "same answer",
         "note"],
        [[r["pair"], f"{r['rows']:,}", r["udf"].cell(), r["builtin"].cell(),
          f"{r['slowdown']:.1f}x", f"{r['udf_ns_per_row']:.0f}",
          ", ".join(r["udf_calls"]) or "none",
          "yes" if r["answers_agree"] else f"no ({r['udf_answer']} vs {r['builtin_answer']})",
          r["note"]] for r in results])
    text = (f"## UDF cost ({'quick' if args.quick else 'full'} run)\n\n"
            f"In-memory tables ({', '.join(f'{t} {n:,} rows' for t, n in rows.items())}), "
            f"batches of {BATCH_ROWS:,} rows; {args.runs} timed runs after one warm-up. "
            "The s3-select side runs the SQL the translator emits (the JSON file has it).\n\n"
            + table + "\n\n![udf cost](udf_cost.png)\n")
    plt = common.pyplot()
    fig, ax = plt.subplots(figsize=(9, 4.5))
    xs = range(len(results))
    ax.bar([i - 0.2 for i in xs], [r["udf_ns_per_row"] for r in results], 0.4, label="s3-select as translated")
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
