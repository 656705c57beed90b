"""How often DataFusion evaluates an aliased UDF call (the translation inlines aliases).

The kernel of ``s3_cast_int`` is replaced by a counting one; the count is the number of row
values it was handed. All s3-select functions are deterministic, so repeated evaluation can
never change an answer; these tests pin the cost.

``int(x)`` runs DataFusion's cast first and the UDF only where it fails, so the numbers here
are written after an ideographic space (U+3000): s3-select trims it, Arrow's cast does not,
and every row reaches the UDF.
"""

from __future__ import annotations

import datafusion
import pyarrow as pa

from flight_storage.execution import udfs
from select_dialect import translate, udf_names

ROWS = 100


def _evaluated_rows(sql: str) -> tuple[int, int]:
    """(rows returned, values passed to s3_cast_int) for the translation of ``sql``."""
    seen = {"values": 0}

    def counting_cast_int(values: pa.Array) -> pa.Array:
        seen["values"] += len(values)
        return udfs.cast_int(values)

    ctx = datafusion.SessionContext()
    udfs.register_udfs(ctx)
    translation = translate(sql, input_format="csv", flavor="aws")
    if translation.filter_over_aliases:  # as flight_storage.execution.engine does
        assert ctx.remove_optimizer_rule("push_down_filter")
    ctx.register_udf(
        datafusion.udf(counting_cast_int, [pa.utf8()], pa.int64(), "immutable", name=udf_names.CAST_INT)
    )
    batch = pa.record_batch({"_1": pa.array([f"\u3000{i}" for i in range(ROWS)]), "_2": pa.array(["x"] * ROWS)})
    ctx.register_record_batches("s3object", [[batch]])
    returned = sum(b.num_rows for b in ctx.sql(translation.sql).collect())
    return returned, seen["values"]


def test_alias_used_by_several_projections_is_computed_once_per_row() -> None:
    returned, evaluated = _evaluated_rows("select int(_1) as a, a + 1 as b, a * 2 as c from s3object")
    assert returned == ROWS
    assert evaluated == ROWS  # DataFusion's common-subexpression elimination shares it


def test_alias_used_in_where_only_is_computed_once_per_row() -> None:
    returned, evaluated = _evaluated_rows("select _2 from s3object where int(_1) > 89")
    assert (returned, evaluated) == (10, ROWS)


def test_alias_used_in_where_and_projection_is_computed_once_per_row() -> None:
    returned, evaluated = _evaluated_rows("select int(_1) as a, a + 1 as b from s3object where a > 89")
    assert returned == 10
    assert evaluated == ROWS


def test_alias_used_in_where_and_other_aliases_is_computed_once_per_row() -> None:
    returned, evaluated = _evaluated_rows(
        "select int(_1) as a, a * 2 as b, _2 from s3object where a > 89 and b < 190")
    assert returned == 5
    assert evaluated == ROWS


def test_engine_keeps_the_filter_above_materialized_aliases() -> None:
    from flight_storage.execution.engine import InputSpec, SelectEngine
    from flight_storage.storage.sources import BytesSource

    data = "".join(f"{i},x\n" for i in range(ROWS)).encode()
    engine = SelectEngine()
    plan = engine.plan("select int(_1) as a, a + 1 as b from s3object where a > 89",
                       BytesSource(data), InputSpec("csv"))
    assert plan.translation.filter_over_aliases
    rows = [r for batch in engine.execute_arrow(plan) for r in batch.to_pylist()]
    assert rows == [{"a": i, "b": i + 1} for i in range(90, 100)]
