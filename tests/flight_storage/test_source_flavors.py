"""Each source's semantics kept (issue #39 item 9): MinIO's flavour is its own record, and
Ceph's JSON output of an unnamed aggregate is what Ceph's s3select prints.

* ``minio``: AWS's reading, typing and printing with MinIO's CSV defaults, and AWS's reserved
  keywords accepted as names. The conformance runner runs MinIO's corpus in it; ``standard``
  casts text to timestamps as DataFusion does and refuses MinIO's S3 Select timestamps.
* ``ceph`` JSON output: ceph/s3select's ``base_s3object::json_result_format`` (since
  1ae458f1, "json output format", 2024-02) writes every row as an object, an aliased
  projection under its alias, a column under its name, any other projection (an aggregate)
  under ``_k`` for the k-th such projection, and ends it with the row delimiter — an
  aggregate too (its CSV row has none). ``{"_1":1}``, not a bare ``1``: the s3-tests that read
  a bare number predate that commit, when JSON output printed CSV-style values.
"""

from __future__ import annotations

import pytest

from flight_storage.cli import _build_parser
from flight_storage.errors import QueryExecutionError
from flight_storage.execution.engine import InputSpec, SelectEngine
from flight_storage.storage.sources import BytesSource
from select_dialect.errors import QuerySyntaxError
from select_dialect.flavors import FLAVOR_NAMES

MINIO_TIMESTAMPS = b"2010T\n2010-01-01T04:11Z\n2017-01-02T03:04:05+07:30\n"


def _run(query: str, data: bytes, flavor: str, *, output: str = "JSON",
         csv: dict[str, str] | None = None) -> bytes:
    engine = SelectEngine()
    spec = InputSpec("csv", options=csv or {})
    plan = engine.plan(query, BytesSource(data, "b/k"), spec, flavor=flavor)
    writer = plan.record_writer({output: {}})
    return b"".join(writer.write(batch) for batch in engine.execute(plan))


def test_minio_is_a_flavour_the_header_and_the_cli_accept() -> None:
    assert "minio" in FLAVOR_NAMES
    args = _build_parser().parse_args(["query", "obj.csv", "-e", "select 1", "--flavor", "minio"])
    assert args.flavor == "minio"


def test_minio_prints_timestamps_as_written_where_standard_refuses_them() -> None:
    """A year alone with ``T``, minutes without seconds, an offset kept as written."""
    query = "select CAST(_1 AS TIMESTAMP) from s3object"
    assert _run(query, MINIO_TIMESTAMPS, "minio") == (
        b'{"_1":"2010T"}\n{"_1":"2010-01-01T04:11Z"}\n{"_1":"2017-01-02T03:04:05+07:30"}\n')
    with pytest.raises(QueryExecutionError, match="CastFailed"):
        _run(query, MINIO_TIMESTAMPS, "standard")


def test_minio_accepts_aws_reserved_keywords_as_names() -> None:
    data = b"value,time\n1,2\n"
    query = "select value, time from s3object"
    assert _run(query, data, "minio", csv={"FileHeaderInfo": "USE"}) == (
        b'{"value":"1","time":"2"}\n')
    with pytest.raises(QuerySyntaxError, match="ParseUnExpectedKeyword"):
        _run(query, data, "aws", csv={"FileHeaderInfo": "USE"})


def test_minio_reads_csv_with_its_defaults() -> None:
    """``Comments`` ``#`` when the request names none; a line break inside quotes is data
    (AWS: the comment line is a record, the line break ends an open quote lazily)."""
    data = b'# a comment\na,"b\nc"\n'
    assert _run("select * from s3object", data, "minio", output="CSV") == b'a,"b\nc"\n'
    assert _run("select * from s3object", data, "aws", output="CSV") == (
        b'# a comment\na,b\n"c"""\n')


@pytest.mark.parametrize(("query", "printed"), [
    ("select count(*) from s3object", b'{"_1":3}\n'),
    ("select count(*), sum(int(_1)) from s3object", b'{"_1":3,"_2":6}\n'),
    # the counter counts unnamed projections only: an alias takes no number
    ("select count(*) as n, max(_1) from s3object", b'{"n":3,"_1":3}\n'),
])
def test_ceph_prints_an_unnamed_aggregate_as_an_object_in_json(query: str,
                                                               printed: bytes) -> None:
    assert _run(query, b"1\n2\n3\n", "ceph") == printed


def test_ceph_ends_an_aggregates_json_row_but_not_its_csv_row() -> None:
    assert _run("select count(*) from s3object", b"1\n2\n3\n", "ceph") == b'{"_1":3}\n'
    assert _run("select count(*) from s3object", b"1\n2\n3\n", "ceph", output="CSV") == b"3"
