"""DataFusion reads a table served by the storage server (server in a subprocess)."""

from __future__ import annotations

import pyarrow.compute as pc
import pyarrow.csv as pacsv
from datafusion import SessionContext

from compute_client.datafusion_source import register_flight_table
from tests.conftest import SAMPLES, ServerProcess


def test_datafusion_reads_remote_table(sample_server: ServerProcess) -> None:
    ctx = SessionContext()
    # ceph: an empty field is NULL, as in the pyarrow baseline below
    register_flight_table(ctx, "orders", sample_server.location, "sales/orders/2024-01.csv",
                          flavor="ceph")
    got = ctx.sql(
        "SELECT region, count(*) AS n FROM orders WHERE status = 'shipped' "
        "GROUP BY region ORDER BY region"
    ).to_arrow_table()
    local = pacsv.read_csv(
        SAMPLES / "sales/orders/2024-01.csv",
        convert_options=pacsv.ConvertOptions(column_types={c: "string" for c in
                                              ("region", "status")},
                                              strings_can_be_null=True),
    )
    shipped = local.filter(pc.equal(local["status"], "shipped"))
    expected = shipped.group_by("region").aggregate([("region", "count")])
    expected_pairs = sorted(
        zip(expected["region"].to_pylist(), expected["region_count"].to_pylist(), strict=True),
        key=lambda p: (p[0] is None, p[0] or ""),
    )
    got_pairs = sorted(zip(got["region"].to_pylist(), got["n"].to_pylist(), strict=True),
                       key=lambda p: (p[0] is None, p[0] or ""))
    # count(region) skips NULL regions; count(*) does not: compare non-null groups exactly.
    assert [p for p in got_pairs if p[0] is not None] == [
        p for p in expected_pairs if p[0] is not None
    ]
    assert sum(n for _, n in got_pairs) == shipped.num_rows
