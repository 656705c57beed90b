"""Run the differential fuzzer for a while with fresh seeds, and list distinct mismatches.

Usage::

    python -m tests.fuzz.run --minutes 30 [--flavor ceph|aws|standard] [--source csv|json|parquet]

Rounds of 200 examples rotate over the flavours and sources until the time is up (the
``standard`` flavour runs its CSV and JSON Lines cases against DuckDB,
:mod:`tests.fuzz.standard_sql` and :mod:`tests.fuzz.standard_json`; no Parquet); each
mismatch is shrunk by hypothesis and printed once, when found (query, data, expected,
actual). Exit status 1 when any mismatch was found.

Every answer from a filled decoded cache (issue #36)::

    FUZZ_DECODED_CACHE_DIR=$(mktemp -d) FLIGHT_SELECT_DECODED_CACHE=fill-first \
        python -m tests.fuzz.run --minutes 30
"""

from __future__ import annotations

import argparse
import itertools
import sys
import time

from hypothesis import HealthCheck, Phase, given, settings

from tests.fuzz.differential import check, check_standard
from tests.fuzz.generate import Case_, fuzz_cases
from tests.fuzz.oracle import UndefinedCase
from tests.fuzz.standard_json import json_cases
from tests.fuzz.standard_sql import StandardCase, standard_cases

_STANDARD = "standard"
_STANDARD_CASES = {"csv": standard_cases(), "json": json_cases()}
"""The standard surface's cases per source (DuckDB reads the same bytes)."""


def _mismatch(case: Case_ | StandardCase) -> str | None:
    """The description of a disagreement, None when engine and oracle agree."""
    if isinstance(case, StandardCase):
        standard = check_standard(case)
        return None if standard.agrees else standard.describe(case)
    outcome = check(case)
    return None if outcome.agrees else outcome.describe(case)


def _round(flavor: str, source: str, examples: int, found: dict[str, str]) -> int:
    """One hypothesis run; returns how many cases were checked."""
    checked = 0
    cases = (_STANDARD_CASES[source] if flavor == _STANDARD else fuzz_cases(flavor, source))

    @settings(max_examples=examples, deadline=None, database=None,
              phases=[Phase.generate, Phase.shrink], suppress_health_check=list(HealthCheck))
    @given(cases)
    def run(case: Case_ | StandardCase) -> None:
        nonlocal checked
        try:
            mismatch = _mismatch(case)
        except UndefinedCase:
            return
        checked += 1
        if mismatch is not None:
            raise AssertionError(mismatch)

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
    parser.add_argument("--flavor", choices=("ceph", "aws", _STANDARD), default=None)
    parser.add_argument("--source", choices=("csv", "json", "parquet"), default=None)
    parser.add_argument("--examples", type=int, default=200, help="examples per round")
    args = parser.parse_args(argv)
    flavors = [args.flavor] if args.flavor else ["ceph", "aws", _STANDARD]
    sources = [args.source] if args.source else ["csv", "json", "parquet"]
    combinations = [(f, s) for f, s in itertools.product(flavors, sources)
                    if f != _STANDARD or s in _STANDARD_CASES]
    deadline = time.monotonic() + args.minutes * 60
    found: dict[str, str] = {}
    checked = rounds = 0
    for flavor, source in itertools.cycle(combinations):
        if time.monotonic() >= deadline:
            break
        checked += _round(flavor, source, args.examples, found)
        rounds += 1
    print(f"{rounds} rounds, {checked} cases checked, {len(found)} distinct mismatches")
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
