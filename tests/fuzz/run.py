"""Run the differential fuzzer for a while with fresh seeds, and list distinct mismatches.

Usage::

    python -m tests.fuzz.run --minutes 30 [--flavor ceph|aws] [--source csv|json|parquet]

Rounds of 200 examples rotate over the flavours and sources until the time is up; each
mismatch is shrunk by hypothesis and printed once, when found (query, data, expected,
actual). Exit status 1 when any mismatch was found.
"""

from __future__ import annotations

import argparse
import itertools
import sys
import time

from hypothesis import HealthCheck, Phase, given, settings

from tests.fuzz.differential import check
from tests.fuzz.generate import Case_, fuzz_cases
from tests.fuzz.oracle import UndefinedCase


def _round(flavor: str, source: str, examples: int, found: dict[str, str]) -> int:
    """One hypothesis run; returns how many cases were checked."""
    checked = 0

    @settings(max_examples=examples, deadline=None, database=None,
              phases=[Phase.generate, Phase.shrink], suppress_health_check=list(HealthCheck))
    @given(fuzz_cases(flavor, source))
    def run(case: Case_) -> None:
        nonlocal checked
        try:
            outcome = check(case)
        except UndefinedCase:
            return
        checked += 1
        if not outcome.agrees:
            raise AssertionError(outcome.describe(case))

    try:
        run()
    except AssertionError as exc:
        text = str(exc)
        key = text.split("\ndata:")[0]
        if key not in found:
            found[key] = text
            print(text, "\n---", flush=True)  # at once: a long run may be stopped
    return checked


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--minutes", type=float, default=5.0)
    parser.add_argument("--flavor", choices=("ceph", "aws"), default=None)
    parser.add_argument("--source", choices=("csv", "json", "parquet"), default=None)
    parser.add_argument("--examples", type=int, default=200, help="examples per round")
    args = parser.parse_args(argv)
    flavors = [args.flavor] if args.flavor else ["ceph", "aws"]
    sources = [args.source] if args.source else ["csv", "json", "parquet"]
    deadline = time.monotonic() + args.minutes * 60
    found: dict[str, str] = {}
    checked = rounds = 0
    for flavor, source in itertools.cycle(list(itertools.product(flavors, sources))):
        if time.monotonic() >= deadline:
            break
        checked += _round(flavor, source, args.examples, found)
        rounds += 1
    print(f"{rounds} rounds, {checked} cases checked, {len(found)} distinct mismatches")
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
