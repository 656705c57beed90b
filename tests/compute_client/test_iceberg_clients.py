"""The compute clients over an Iceberg table, unchanged: the table is named ``catalog/namespace.table``
where they take ``bucket/key`` (the server reads ``"lake"."corpus.events"`` as the Iceberg
table); their filters and projection reach the server, which prunes files with them."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pyarrow.flight as flight
import pytest
from datafusion import SessionContext

from compute_client.datafusion_source import register_flight_table
from tests.conftest import SAMPLES, ServerProcess, running_server
from tests.flight_storage.test_server_support import statement_descriptor
from tests.iceberg_corpus import NAMESPACE, Corpus, sql_catalog, write_corpus

TABLE = f"lake/{NAMESPACE}.events"


@pytest.fixture(scope="module")
def corpus(tmp_path_factory: pytest.TempPathFactory) -> Corpus:
    root = tmp_path_factory.mktemp("iceberg-clients")
    return write_corpus(sql_catalog("lake", str(root / "catalog.db"),
                                    (root / "warehouse").as_uri()))


@pytest.fixture(scope="module")
def server(corpus: Corpus) -> Iterator[ServerProcess]:
    properties = corpus.catalog.properties
    flag = f"lake=sql:{properties['uri']}?warehouse={properties['warehouse']}"
    with running_server(SAMPLES, "--iceberg", flag) as process:
        yield process


def _expected(corpus: Corpus) -> list[tuple[Any, ...]]:
    scan = corpus.table("events").scan(row_filter="id >= 150 and user_name = 'user3'",
                                       selected_fields=("id", "user_name", "score"))
    return sorted(tuple(r.values()) for r in scan.to_arrow().to_pylist())


def _files(server: ServerProcess, sql: str) -> int:
    info = flight.connect(server.location).get_flight_info(statement_descriptor(sql))
    return int(json.loads(info.app_metadata)["files"])


def test_datafusion_remote_table_pushes_filters(server: ServerProcess, corpus: Corpus) -> None:
    ctx = SessionContext()
    dataset = register_flight_table(ctx, "events", server.location, TABLE)
    frame = ctx.sql("SELECT id, user_name, score FROM events "
                    "WHERE id >= 150 AND user_name = 'user3'")
    got = sorted(tuple(r.values()) for r in frame.to_pylist())
    assert got == _expected(corpus)
    pushed = dataset.scans[-1]
    assert "150" in pushed.pushed
    assert "user3" in pushed.pushed
    assert not pushed.local
    # what it pushed prunes files on the server
    assert _files(server, pushed.query) < _files(server, f'SELECT * FROM "lake"."{NAMESPACE}"'
                                                         '."events"')


@pytest.mark.spark
def test_spark_reads_an_iceberg_table_with_pushdown(spark: Any, server: ServerProcess,
                                                    corpus: Corpus) -> None:
    from pyspark.sql.datasource import EqualTo, GreaterThanOrEqual

    from compute_client.spark_source import FlightSelectReader

    frame = (spark.read.format("flight-select").option("location", server.location)
             .option("table", TABLE).load()
             .where("id >= 150 AND user_name = 'user3'").select("id", "user_name", "score"))
    assert sorted(tuple(r) for r in frame.collect()) == _expected(corpus)
    options = {"location": server.location, "table": TABLE}
    schema = frame.schema
    reader = FlightSelectReader(options, schema)
    offered = [GreaterThanOrEqual(("id",), 150), EqualTo(("user_name",), "user3")]
    list(reader.pushFilters(offered))  # every filter goes back to Spark, which checks again
    statement = reader.statement()
    assert "150" in statement
    assert "'user3'" in statement
    assert _files(server, statement) < _files(server, f'SELECT * FROM "lake"."{NAMESPACE}"'
                                                      '."events"')
