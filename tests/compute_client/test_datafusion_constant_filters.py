"""DataFusion client: a filter DataFusion folds to a constant is handled, not crashed on.

``WHERE s = 'a' AND s = 'b'`` reaches the dataset as the scalar ``false``, which
``RecordBatch.filter`` rejects ("Filter should be array-like"). Constant TRUE means no filter;
constant FALSE or NULL means no rows, and the client then does not call the server at all.
Expected answers come from DataFusion over the same rows read without any filter.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as ds
import pytest
from datafusion import SessionContext

from compute_client.datafusion_source import (
    FlightDataset,
    collect,
    plan_pushdown,
    register_flight_table,
)
from compute_client.datafusion_table import dataset as dataset_module
from compute_client.flight import FlightSelectClient
from tests.conftest import ServerProcess

# (table, declared types): the CSV holds text on the server, the Parquet file typed values.
TABLES = [("t/typed.parquet", None), ("t/typed.csv", {"id": pa.int64()})]
CONTRADICTIONS = ["s = 'plain' AND s = 'abc'", "id = 1 AND id = 2"]


class _Recorder(ds.Dataset):
    """A dataset that records the filter DataFusion hands over and yields nothing."""

    def __init__(self, schema: pa.Schema) -> None:
        self._schema = schema
        self.filters: list[Any] = []

    @property
    def schema(self) -> pa.Schema:  # type: ignore[override]
        return self._schema

    def scanner(self, schema: pa.Schema | None = None,  # type: ignore[override]  # noqa: ARG002 - Dataset.scanner
                columns: Sequence[str] | None = None, filter: Any = None,
                **_: Any) -> ds.Scanner:
        self.filters.append(filter)
        return ds.dataset(self._schema.empty_table()).scanner(columns=columns)

    def get_fragments(self, filter: Any = None) -> Iterator[Any]:  # type: ignore[override]
        self.filters.append(filter)
        return iter([])


def test_datafusion_hands_a_contradiction_over_as_a_false_scalar() -> None:
    """Pins the DataFusion behaviour the client handles (datafusion-python 55)."""
    recorder = _Recorder(pa.schema([("s", pa.string()), ("n", pa.int64())]))
    ctx = SessionContext()
    ctx.register_dataset("r", recorder)
    ctx.sql("SELECT n FROM r WHERE s = 'a' AND s = 'b'").to_arrow_table()
    assert recorder.filters
    assert all(isinstance(f, pa.BooleanScalar) and f.as_py() is False for f in recorder.filters)


@pytest.fixture
def execute_calls(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Every statement the DataFusion client sends to a server (patched after registration
    is fine: the client looks the class up on each scan)."""
    calls: list[str] = []

    class Counting(FlightSelectClient):
        def execute(self, query: str, *args: Any, **kwargs: Any) -> Any:
            calls.append(query)
            return super().execute(query, *args, **kwargs)

    monkeypatch.setattr(dataset_module, "FlightSelectClient", Counting)
    return calls


def _register(server: ServerProcess, table: str, declared: dict[str, pa.DataType] | None
              ) -> tuple[SessionContext, FlightDataset]:
    ctx = SessionContext()
    return ctx, register_flight_table(ctx, "t", server.location, table, declared)


@pytest.mark.parametrize(("table", "declared"), TABLES)
@pytest.mark.parametrize("contradiction", CONTRADICTIONS)
def test_a_filter_folded_to_false_gives_no_rows_without_a_round_trip(
    typed_server: ServerProcess, execute_calls: list[str], table: str,
    declared: dict[str, pa.DataType] | None, contradiction: str,
) -> None:
    ctx, dataset = _register(typed_server, table, declared)
    execute_calls.clear()
    got = ctx.sql(f"SELECT id, s FROM t WHERE {contradiction}").to_arrow_table()
    assert got.num_rows == 0
    assert got.column_names == ["id", "s"]
    counted = ctx.sql(f"SELECT count(*) AS n FROM t WHERE {contradiction}").to_arrow_table()
    assert counted["n"].to_pylist() == [0]
    limited = collect(ctx, f"SELECT id FROM t WHERE {contradiction} LIMIT 1", {"t": dataset})
    assert limited.num_rows == 0
    assert execute_calls == []
    assert dataset.last_scan is not None
    assert (dataset.last_scan.query, dataset.last_scan.endpoints) == ("", 0)
    assert dataset.last_scan.local == "false"


@pytest.mark.parametrize(("table", "declared"), TABLES)
def test_each_half_of_a_contradiction_still_reads_rows(
    typed_server: ServerProcess, execute_calls: list[str], table: str,
    declared: dict[str, pa.DataType] | None,
) -> None:
    """The contrast to the test above: the same conjuncts alone do reach the server."""
    ctx, _ = _register(typed_server, table, declared)
    execute_calls.clear()
    everything = ctx.sql("SELECT id, s FROM t").to_arrow_table()
    for half in ("s = 'plain'", "id = 1"):
        column, value = half.split(" = ")
        want = everything.filter(pc.equal(everything[column], pa.scalar(
            value.strip("'") if column == "s" else int(value), everything[column].type)))
        got = ctx.sql(f"SELECT id, s FROM t WHERE {half}").to_arrow_table()
        assert got.num_rows == want.num_rows > 0
    assert len(execute_calls) == 3
    assert all(q.startswith("SELECT") for q in execute_calls)


@pytest.mark.parametrize(("constant", "rows_kept"), [
    (pa.scalar(True), True),
    (pa.scalar(False), False),
    (pa.scalar(None, pa.bool_()), False),
    (pc.scalar(True), True),
    (pc.scalar(False), False),
    (pc.scalar(pa.scalar(None, pa.bool_())), False),
])
def test_constant_filters_through_the_dataset(typed_server: ServerProcess,
                                              execute_calls: list[str], constant: Any,
                                              rows_kept: bool) -> None:
    """TRUE and NULL constants do not come out of DataFusion's SQL today (it drops a TRUE
    filter and plans no scan for NULL), but a dataset must take any constant it is given."""
    _, dataset = _register(typed_server, "t/typed.parquet", None)
    all_ids = dataset.scanner(columns=["id"]).to_table()["id"].to_pylist()
    execute_calls.clear()
    got = dataset.scanner(columns=["id"], filter=constant).to_table()
    assert got["id"].to_pylist() == (all_ids if rows_kept else [])
    assert len(execute_calls) == (1 if rows_kept else 0)
    fragments = list(dataset.get_fragments(constant))
    assert (len(fragments) > 0) == rows_kept


def test_plan_of_constant_filters() -> None:
    schema = pa.schema([("a", pa.string())])
    keep = plan_pushdown(pa.scalar(True), schema, schema)
    assert (keep.filters, keep.residual, keep.no_rows) == ((), None, False)
    for constant in (pa.scalar(False), pa.scalar(None, pa.bool_()), pc.scalar(False)):
        plan = plan_pushdown(constant, schema, schema)
        assert (plan.filters, plan.residual, plan.no_rows) == ((), None, True)
    # A constant inside a larger expression is not the whole filter: nothing is dropped.
    mixed = (pc.field("a") == "x") | pc.scalar(False)
    plan = plan_pushdown(mixed, schema, schema)
    assert not plan.no_rows
    assert plan.residual is not None
    assert plan.residual.equals(mixed)
