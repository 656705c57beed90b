"""Run the shared S3 Select conformance corpus against the local engine.

Usage::

    python tests/conformance/run.py [--json OUT] [CORPUS.jsonl ...]
        [--corpus-dir DIR] [--flavor standard|ceph|aws|minio] [-k SUBSTRING] [--seed N]
        [--show-failures N] [--nanosecond-build] [--write-known-failures FILE]

Without corpus files every ``*.jsonl`` of the corpus directory runs (``--corpus-dir``,
``$FLIGHT_SELECT_CORPUS_DIR`` or ``../shared/conformance`` beside the project). It prints one
table row per file and kind, and ends with the line ``N passed, M failed, K skipped``
(known failures that still fail are counted in the table's xfail column, not in that line).
Exit status 1 when any case failed.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any, TextIO

if __package__:
    from . import corpus
else:  # executed as a script: make the project and this directory importable
    sys.path[:0] = [str(Path(__file__).resolve().parents[2]), str(Path(__file__).resolve().parent)]
    import corpus  # type: ignore[no-redef]

from select_dialect.flavors import FLAVOR_NAMES  # noqa: E402 - after the path set-up above


def build_parser() -> argparse.ArgumentParser:
    """The command-line interface."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("files", nargs="*", type=Path, metavar="CORPUS.jsonl",
                        help="corpus files (default: every *.jsonl of the corpus directory)")
    parser.add_argument("--corpus-dir", type=Path, default=None,
                        help="directory holding generators.py (and the default corpus files)")
    parser.add_argument("--json", type=Path, default=None, metavar="OUT",
                        help="write per-case results (id, status, detail) as JSON")
    parser.add_argument("--flavor", choices=FLAVOR_NAMES, default=None,
                        help="run every case with this flavour (default: from the source)")
    parser.add_argument("-k", dest="substring", default=None,
                        help="run only cases whose id contains SUBSTRING")
    parser.add_argument("--seed", type=int, default=1, help="seed of generated inputs")
    parser.add_argument("--show-failures", type=int, default=0, metavar="N",
                        help="print query / expected / got of the first N failures")
    parser.add_argument("--nanosecond-build", action="store_true",
                        help="judge timestamps against Ceph's NANO_SEC build expectations")
    parser.add_argument("--skips", type=Path, default=corpus.DEFAULT_SKIPS)
    parser.add_argument("--known-failures", type=Path, default=corpus.DEFAULT_KNOWN_FAILURES)
    parser.add_argument("--write-known-failures", type=Path, default=None, metavar="FILE",
                        help="write every still-failing case id with its failure as the reason")
    return parser


Row = tuple[str, str]  # (file, kind)


def summary_table(results: Sequence[tuple[corpus.Case, corpus.Outcome]]) -> str:
    """One row per (file, kind) with the count of each status, plus a total row."""
    counts: dict[Row, Counter[str]] = {}
    for case, outcome in results:
        counts.setdefault((case.file, case.kind), Counter())[outcome.status] += 1
    total: Counter[str] = Counter()
    for row in counts.values():
        total.update(row)
    header = f"{'file':<24} {'kind':<18}" + "".join(f"{s:>8}" for s in corpus.STATUSES)
    lines = [header, "-" * len(header)]
    for (file, kind), row in sorted(counts.items()):
        lines.append(f"{file:<24} {kind:<18}" + "".join(f"{row[s]:>8}" for s in corpus.STATUSES))
    lines.append("-" * len(header))
    lines.append(f"{'total':<24} {'':<18}" + "".join(f"{total[s]:>8}" for s in corpus.STATUSES))
    return "\n".join(lines)


def final_line(results: Sequence[tuple[corpus.Case, corpus.Outcome]]) -> str:
    """``N passed, M failed, K skipped``."""
    count = Counter(outcome.status for _, outcome in results)
    return (
        f"{count[corpus.PASSED]} passed, {count[corpus.FAILED]} failed, "
        f"{count[corpus.SKIPPED]} skipped"
    )


def _clip(text: str | None, limit: int = 2000) -> str:
    if text is None:
        return "-"
    shown = repr(text)
    return shown if len(shown) <= limit else shown[:limit] + f"... ({len(shown)} chars)"


def print_failures(
    results: Sequence[tuple[corpus.Case, corpus.Outcome]], limit: int, out: TextIO
) -> None:
    """Print query, expected and got of the first ``limit`` failures."""
    failures = [o for _, o in results if o.status == corpus.FAILED][:limit]
    for outcome in failures:
        out.write(f"\nFAILED {outcome.case_id}: {outcome.detail}\n")
        out.write(f"  query:    {outcome.query}\n")
        out.write(f"  expected: {_clip(outcome.expected)}\n")
        out.write(f"  got:      {_clip(outcome.got)}\n")


def known_failures_from(results: Sequence[tuple[corpus.Case, corpus.Outcome]]) -> dict[str, str]:
    """Every case that still fails (failed or xfail) -> ``not yet conformant: <detail>``.

    A known failure that now passes is reported as failed with an "xpass" detail; it is left
    out, so rewriting the file removes it.
    """
    return {
        outcome.case_id: corpus.known_failure_reason(outcome.detail)
        for _, outcome in results
        if outcome.status == corpus.XFAIL
        or (outcome.status == corpus.FAILED and not outcome.detail.startswith("known failure now"))
    }


def _counting(engine: corpus.Engine, readers: Counter[str]) -> corpus.Engine:
    """``engine``, counting which reader served each request (``SelectResult.reader``)."""

    def run(*args: Any, **kwargs: Any) -> Any:
        result = engine(*args, **kwargs)
        readers[str(getattr(result, "reader", "unknown"))] += 1
        return result

    return run  # type: ignore[return-value]


def _missing_corpus(given: Sequence[Path], corpus_dir: Path, files: Sequence[Path]) -> str | None:
    """Why the corpus cannot be read (None when it can): it is not part of this repository."""
    where = (f"the shared corpus is not part of this repository: pass its *.jsonl files, or "
             f"name its folder with --corpus-dir or ${corpus.CORPUS_DIR_ENV} (default: "
             f"{corpus.default_corpus_dir()})")
    absent = [p for p in given if not p.is_file()]
    if absent:
        pattern = " (a shell pattern that matched nothing)" if "*" in str(absent[0]) else ""
        return f"no corpus file {absent[0]}{pattern}; {where}"
    if not files:
        return f"no *.jsonl corpus file in {corpus_dir}; {where}"
    return None


def main(
    argv: Sequence[str] | None = None,
    out: TextIO = sys.stdout,
    engine: corpus.Engine | None = None,
) -> int:
    """Run the corpus; return the exit status (``engine`` defaults to ``run_select``)."""
    parser = build_parser()
    args = parser.parse_args(argv)
    corpus_dir = args.corpus_dir or (
        args.files[0].resolve().parent if args.files else corpus.default_corpus_dir()
    )
    files = args.files or corpus.corpus_files(corpus_dir)
    missing = _missing_corpus(args.files, corpus_dir, files)
    if missing is not None:
        parser.error(missing)  # exit status 2 with the usage line, no traceback
    cases = [
        case for case in corpus.load_cases(files)
        if args.substring is None or args.substring in case.id
    ]
    readers: Counter[str] = Counter()
    ctx = corpus.RunContext(
        engine=_counting(engine or corpus.load_engine(), readers), corpus_dir=corpus_dir,
        seed=args.seed,
        flavor=args.flavor, nanosecond_build=args.nanosecond_build,
    )
    results = list(corpus.run_cases(
        cases, ctx, corpus.SkipRules.load(args.skips),
        corpus.load_known_failures(args.known_failures),
    ))
    if args.json is not None:
        args.json.write_text(json.dumps(
            [{**o.to_json(), "file": c.file, "kind": c.kind} for c, o in results], indent=1
        ) + "\n", encoding="utf-8")
    if args.write_known_failures is not None:
        args.write_known_failures.write_text(
            json.dumps(known_failures_from(results), indent=2, sort_keys=True) + "\n",
            encoding="utf-8",
        )
    if args.show_failures:
        print_failures(results, args.show_failures, out)
    out.write(summary_table(results) + "\n")
    if readers:
        out.write("engine requests by reader: " + ", ".join(
            f"{name} {count}" for name, count in sorted(readers.items())) + "\n")
    out.write(final_line(results) + "\n")
    return 1 if any(o.status == corpus.FAILED for _, o in results) else 0


if __name__ == "__main__":
    sys.exit(main())
