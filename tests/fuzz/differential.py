"""Run one fuzz case through the engine and through the oracle, and compare.

The engine is the in-process request path (``flight_storage.execution.select_local``, what
the conformance runner uses); its CSV output text is compared with the oracle's. Floats that
an aggregate adds up are compared with a relative tolerance of 1e-12: the order of a float sum
is not part of the language.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from flight_storage.errors import StorageError
from flight_storage.execution.select_local import run_select
from select_dialect import SelectDialectError
from tests.fuzz.generate import Case_
from tests.fuzz.oracle import answer, render_csv
from tests.fuzz.query_ast import render_query


@dataclass
class Outcome:
    sql: str
    expected: str
    actual: str
    agrees: bool

    def describe(self, case: Case_) -> str:
        return (f"flavor={case.flavor} source={case.source}\nquery: {self.sql}\n"
                f"data: {case.data!r}\nexpected: {self.expected!r}\nactual:   {self.actual!r}")


def _close(expected: str, actual: str) -> bool:
    ours, theirs = expected.split(","), actual.split(",")
    if len(ours) != len(theirs):
        return False
    for a, b in zip(ours, theirs, strict=True):
        if a == b:
            continue
        try:
            if not math.isclose(float(a), float(b), rel_tol=1e-12):
                return False
        except ValueError:
            return False
    return True


def engine_answer(case: Case_, sql: str) -> str:
    """The engine's CSV output, or ``ERROR <code>: <message>``."""
    try:
        result = run_select(case.data, sql, input_serialization=case.input_serialization,
                            output_serialization={"CSV": {}}, flavor=case.flavor)
    except (StorageError, SelectDialectError) as exc:  # an answer to compare; a crash raises
        return f"ERROR {exc.code}: {exc}"
    return result.records.decode("utf-8", "replace")


def check(case: Case_) -> Outcome:
    """Both answers, and whether they agree."""
    sql = render_query(case.query)
    records = answer(case.query, case.rows, case.flavor)
    expected = render_csv(records, case.flavor, case.query.is_aggregate)
    actual = engine_answer(case, sql)
    agrees = expected == actual or (
        case.query.is_aggregate and _close(expected.strip("\n"), actual.strip("\n"))
    )
    return Outcome(sql, expected, actual, agrees)
