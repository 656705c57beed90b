"""The batch source ``flight-select`` through a real server, against Spark's own readers."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pyarrow.compute as pc
import pyarrow.csv as pacsv
import pyarrow.parquet as pq
import pytest

from compute_client.flight import ConnectionOptions, FlightSelectClient
from compute_client.spark_source import FlightSelectReader
from tests.compute_client.test_datafusion_column_names import ROWS as COLUMN_NAMES_ROWS
from tests.conftest import SAMPLES, ServerProcess, read_csv_headers, running_server

pytestmark = pytest.mark.spark


def _remote(spark, location: str, table: str, **options: str):
    reader = spark.read.format("flight-select").option("location", location)
    reader = reader.option("table", table)
    for key, value in options.items():
        reader = reader.option(key, value)
    return reader


def _rows(frame) -> list[tuple]:
    """Rows as text (Spark's own rendering): NaN equals NaN, and year-1 timestamps survive
    the trip to Python."""
    from pyspark.sql import functions as F

    text = frame.select([F.col(c).cast("string") for c in frame.columns])
    return sorted((tuple(r) for r in text.collect()), key=repr)


def test_csv_read_with_pushdown_equals_spark_csv(spark, sample_server: ServerProcess) -> None:
    from pyspark.sql import functions as F

    condition = (F.col("status") == "delivered") & F.col("region").isin("east", "Zürich") & (
        F.col("note").isNull() | (F.col("unit_price") > "3")
    )
    # not product/note: quoted fields with doubled quotes read differently under Ceph's rules
    columns = ["order_id", "customer_id", "region", "quantity", "unit_price", "order_ts", "status"]
    # ceph: an empty field is NULL, as Spark's own CSV reader (the baseline) reads it
    remote = _remote(spark, sample_server.location, "sales/orders/2024-02.csv",
                     flavor="ceph").load()
    local = spark.read.option("header", "true").csv(str(SAMPLES / "sales/orders/2024-02.csv"))
    got = _rows(remote.where(condition).select(columns))
    expected = _rows(local.where(condition).select(columns))
    assert got == expected
    assert 0 < len(got) < 500


def test_parquet_read_types_and_filters_equal_spark_parquet(
    spark, typed_server: ServerProcess, typed_data: Path
) -> None:
    remote = _remote(spark, typed_server.location, "t/typed.parquet").load()
    local = spark.read.parquet(str(typed_data / "t" / "typed.parquet"))
    assert remote.schema == local.schema  # strings, longs, doubles, decimals, booleans, dates,
    #                                        timestamps with a zone, all nullable
    condition = (
        "(s IS NULL OR s >= 'a' OR s LIKE '%!%' OR s2 LIKE '\\\\%')"
        " AND NOT (f > 1.0) AND i <> 7 AND (b OR b IS NULL) AND dt <> DATE'2024-03-01'"
    )
    assert _rows(remote) == _rows(local)
    got = _rows(remote.where(condition))
    assert got == _rows(local.where(condition))
    assert 0 < len(got) < 33


def test_endpoints_are_packed_into_a_partition_per_server_core(
    spark, typed_server: ServerProcess
) -> None:
    with FlightSelectClient(ConnectionOptions(typed_server.location)) as client:
        plan = client.execute('SELECT * FROM "t"."typed.parquet"')
    endpoints, cores = len(plan.endpoints), plan.about.cores
    assert endpoints > 1
    assert cores >= 1
    remote = _remote(spark, typed_server.location, "t/typed.parquet").load()
    assert remote.rdd.getNumPartitions() == min(endpoints, cores)
    expected = _ordered_rows(remote)
    for asked, partitions in ((1, 1), (endpoints, endpoints), (endpoints + 5, endpoints)):
        frame = _remote(spark, typed_server.location, "t/typed.parquet",
                        num_partitions=str(asked)).load()
        assert frame.rdd.getNumPartitions() == partitions
        # every endpoint read once and in order, whatever the packing
        assert _ordered_rows(frame) == expected


def _ordered_rows(frame) -> list[tuple]:
    """Rows as text, in the order Spark collects them (partition by partition)."""
    from pyspark.sql import functions as F

    return [tuple(r) for r in frame.select([F.col(c).cast("string") for c in frame.columns])
            .collect()]


@pytest.mark.parametrize("bad", ["0", "-2", "two", "1.5"])
def test_num_partitions_must_be_a_positive_whole_number(
    spark, typed_server: ServerProcess, bad: str
) -> None:
    with pytest.raises(Exception, match=r"num_partitions.*whole number >= 1"):
        _remote(spark, typed_server.location, "t/typed.parquet",
                num_partitions=bad).load().collect()


def test_user_schema_and_columns_option_prune(spark, typed_server: ServerProcess) -> None:
    by_schema = (
        _remote(spark, typed_server.location, "t/typed.parquet").schema("d decimal(10,2), id long")
        .load().where("d > 12.34")
    )
    by_option = _remote(spark, typed_server.location, "t/typed.parquet", columns="d, id").load()
    assert by_option.columns == ["d", "id"]
    got = _rows(by_schema)
    assert got == _rows(by_option.where("d > 12.34"))
    assert {float(d) for d, _ in got} == {12.35, 99999999.99}


def test_pushed_statement(spark, typed_server: ServerProcess) -> None:
    from pyspark.sql.datasource import EqualTo, GreaterThan, StringContains

    options = {"location": typed_server.location, "table": "t/typed.parquet"}
    schema = (
        _remote(spark, typed_server.location, "t/typed.parquet", columns="id,s,f").load().schema
    )
    reader = FlightSelectReader(options, schema)
    offered = [EqualTo(("s",), "it's"), GreaterThan(("f",), 1.0), StringContains(("s",), "%")]
    # every filter goes back to Spark (it checks them again); the statement shows what the
    # server applies (f > 1.0 is not pushed)
    assert list(reader.pushFilters(offered)) == offered
    assert reader.statement() == (
        """SELECT s3object."id", s3object."s", s3object."f" FROM "t"."typed.parquet" """
        """WHERE s3object."s" = 'it''s' AND s3object."s" LIKE '%!%%' ESCAPE '!'"""
    )


# The DataFusion client's table of names that break naive rendering (a space, a mixed-case name,
# a keyword, a dot, "_3" standing elsewhere), less "status": Spark itself refuses two names
# equal but for case (NOTES.md).
ODD_NAMES = COLUMN_NAMES_ROWS.drop_columns(["status"])


@pytest.fixture(scope="module")
def odd_names_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    root = tmp_path_factory.mktemp("odd-names")
    (root / "n").mkdir()
    pacsv.write_csv(ODD_NAMES, root / "n" / "orders.csv")
    pq.write_table(ODD_NAMES, root / "n" / "orders.parquet")
    read_csv_headers(root / "n", "orders.csv")
    with running_server(root) as server:
        yield server


@pytest.mark.parametrize("table", ["n/orders.csv", "n/orders.parquet"])
def test_columns_whose_names_are_not_identifiers_read_and_filter_right(
    spark, odd_names_server: ServerProcess, table: str
) -> None:
    """Every column is projected and filtered on the server under its own name; the answers
    are pyarrow's on the same rows (ids compared as text: the CSV holds text)."""
    from pyspark.sql import functions as F
    from pyspark.sql.datasource import EqualTo

    frame = _remote(spark, odd_names_server.location, table).load()
    assert frame.columns == ODD_NAMES.column_names
    assert sorted(frame.select("_3").toPandas()["_3"]) == ODD_NAMES.column("_3").to_pylist()
    for name in ODD_NAMES.column_names[1:]:
        value = ODD_NAMES.column(name)[1].as_py()
        matched = frame.where(F.col(f"`{name}`") == value).select("id").collect()
        want = sorted(str(i) for i in ODD_NAMES.filter(
            pc.equal(ODD_NAMES.column(name), value)).column("id").to_pylist())
        assert sorted(str(r[0]) for r in matched) == want, name
        reader = FlightSelectReader({"location": odd_names_server.location, "table": table},
                                    frame.schema)
        offered = [EqualTo((name,), value)]
        list(reader.pushFilters(offered))
        assert reader.filters, f"{name}: not pushed"
        rows = FlightSelectClient(ConnectionOptions(odd_names_server.location)).read_all(
            reader.statement())
        assert sorted(str(i) for i in rows.column(0).to_pylist()) == want, name


def test_query_option_pushes_an_aggregate(spark, sample_server: ServerProcess) -> None:
    frame = (
        spark.read.format("flight-select").option("location", sample_server.location)
        .option("query", "SELECT count(*) AS n, max(CAST(quantity AS INT)) AS q "
                         "FROM \"sales\".\"orders/2024-01.csv\" WHERE status = 'delivered'")
        .load()
    )
    local = spark.read.option("header", "true").csv(str(SAMPLES / "sales/orders/2024-01.csv"))
    expected = local.where("status = 'delivered'").selectExpr(
        "count(*) AS n", "max(CAST(quantity AS INT)) AS q").collect()[0]
    assert [tuple(r) for r in frame.collect()] == [(expected["n"], expected["q"])]


GROUPED = ("SELECT region, count(*) AS n, sum(CAST(quantity AS INT)) AS q "
           "FROM \"sales\".\"orders/2024-01.csv\" GROUP BY region")


@pytest.mark.parametrize("options", [
    {"query": GROUPED},
    {"table": "sales/orders/2024-01.csv", "group_by": "region",
     "aggregates": "count(*) AS n, sum(CAST(quantity AS INT)) AS q"},
])
def test_grouped_read_equals_spark_group_by(spark, sample_server: ServerProcess,
                                            options: dict[str, str]) -> None:
    reader = spark.read.format("flight-select").option("location", sample_server.location)
    for name, value in options.items():
        reader = reader.option(name, value)
    frame = reader.load()
    local = spark.read.option("header", "true").csv(str(SAMPLES / "sales/orders/2024-01.csv"))
    # The standard flavour reads an empty CSV field as '' (AWS's rule), Spark's reader as NULL.
    local = local.selectExpr("coalesce(region, '') AS region", "CAST(quantity AS INT) AS quantity")
    expected = local.groupBy("region").agg({"*": "count", "quantity": "sum"})
    expected = expected.selectExpr("region", "`count(1)` AS n", "`sum(quantity)` AS q")
    assert frame.rdd.getNumPartitions() == 1  # the server groups every partition: one endpoint
    assert _rows(frame) == _rows(expected)


@pytest.mark.parametrize(("options", "code"), [
    ({"query": "SELECT FROM WHERE"}, "ParseUnexpectedToken"),
    ({"query": "SELECT FROM WHERE", "flavor": "ceph"}, "UnsupportedSyntax"),
    ({"query": 'SELECT CAST(region AS INT) FROM "sales"."orders/2024-01.csv"'}, "CastFailed"),
    ({"table": "sales/no/such.csv"}, "NoSuchKey"),
])
def test_server_errors_surface_with_their_code(
    spark, sample_server: ServerProcess, options: dict[str, str], code: str
) -> None:
    reader = spark.read.format("flight-select").option("location", sample_server.location)
    for key, value in options.items():
        reader = reader.option(key, value)
    with pytest.raises(Exception, match=code):
        reader.load().collect()


@pytest.fixture(scope="module")
def rows_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    """A server (default endpoint sizing) over ``b/rows.csv``: 400,000 records, about 8 MiB,
    which work alone keeps in one endpoint."""
    from tests.flight_storage.test_server_support import write_rows

    root = tmp_path_factory.mktemp("spark-parallelism")
    write_rows(root / "b" / "rows.csv", 400_000)
    with running_server(root) as server:
        yield server


def test_parallelism_option_gets_an_endpoint_per_task_and_every_row_once(
    spark, rows_server: ServerProcess
) -> None:
    """``option("parallelism", n)`` (here twice Spark's defaultParallelism) sends the
    parallelism header: the server plans n endpoints (its log says so), Spark reads them as n
    tasks, one DoGet each, and every record arrives once, in order; without it, one."""
    from tests.flight_storage.test_server_support import events, partition_do_gets

    def planned() -> int:
        infos = events(rows_server, method="GET_FLIGHT_INFO", object="b/rows.csv")
        return infos[-1]["endpoints"]

    alone = _remote(spark, rows_server.location, "b/rows.csv").load()
    assert alone.rdd.getNumPartitions() == 1
    assert planned() == 1
    wanted = 2 * spark.sparkContext.defaultParallelism
    frame = _remote(spark, rows_server.location, "b/rows.csv",
                    parallelism=str(wanted)).load()
    assert frame.rdd.getNumPartitions() == wanted
    assert planned() == wanted
    before = partition_do_gets(rows_server, "b/rows.csv")
    ids = [int(r[0]) for r in frame.select(frame.columns[0]).collect()]
    assert ids == list(range(400_000))
    assert partition_do_gets(rows_server, "b/rows.csv") - before == wanted


@pytest.mark.parametrize("bad", ["0", "many"])
def test_parallelism_must_be_a_positive_whole_number(
    spark, rows_server: ServerProcess, bad: str
) -> None:
    with pytest.raises(Exception, match=r"parallelism.*whole number >= 1"):
        _remote(spark, rows_server.location, "b/rows.csv", parallelism=bad).load().collect()
