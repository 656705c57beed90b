"""The Flight SQL column metadata GetTables puts on table schemas (pure: no server)."""

from __future__ import annotations

import datafusion
import pyarrow as pa
import pytest

from flight_storage.rpc import column_metadata as cm

_NAMED = [
    (pa.string(), "VARCHAR"), (pa.large_string(), "VARCHAR"), (pa.string_view(), "VARCHAR"),
    (pa.int8(), "TINYINT"), (pa.int16(), "SMALLINT"), (pa.int32(), "INTEGER"),
    (pa.int64(), "BIGINT"), (pa.uint8(), "TINYINT UNSIGNED"), (pa.uint64(), "BIGINT UNSIGNED"),
    (pa.float32(), "REAL"), (pa.float64(), "DOUBLE"), (pa.decimal128(12, 2), "DECIMAL(12,2)"),
    (pa.bool_(), "BOOLEAN"), (pa.date32(), "DATE"), (pa.time64("ns"), "TIME"),
    (pa.timestamp("us"), "TIMESTAMP"),
    (pa.timestamp("us", tz="UTC"), "TIMESTAMP WITH TIME ZONE"), (pa.binary(), "BYTEA"),
]


@pytest.mark.parametrize(("arrow_type", "name"), _NAMED)
def test_sql_type_names(arrow_type: pa.DataType, name: str) -> None:
    assert cm.sql_type_name(arrow_type) == name


@pytest.mark.parametrize(("arrow_type", "name"), _NAMED)
def test_every_sql_type_name_is_one_datafusion_accepts(arrow_type: pa.DataType,
                                                      name: str) -> None:
    # a client may write the reflected name back in a CAST; DataFusion must parse it
    ctx = datafusion.SessionContext()
    result = ctx.sql(f"SELECT CAST(NULL AS {name}) AS x").schema().field("x").type
    if not pa.types.is_timestamp(arrow_type):  # the time zone is the session's, the unit ns
        assert result == arrow_type or (pa.types.is_string_view(result)
                                        and cm.sql_type_name(arrow_type) == "VARCHAR")


def test_nested_types_have_no_sql_name() -> None:
    assert cm.sql_type_name(pa.list_(pa.int64())) is None
    schema = cm.describe_columns(pa.schema([pa.field("xs", pa.list_(pa.int64()))]))
    assert cm.TYPE_NAME.encode() not in schema.field("xs").metadata


def test_describe_columns_keeps_names_types_and_existing_metadata() -> None:
    schema = pa.schema([pa.field("a", pa.decimal128(9, 3), nullable=False,
                                 metadata={"k": "v"}), pa.field("b", pa.string())],
                       metadata={"s": "1"})
    described = cm.describe_columns(schema)
    assert described.names == schema.names and described.types == schema.types
    assert not described.field("a").nullable and described.metadata == {b"s": b"1"}
    a = described.field("a").metadata
    assert a[b"k"] == b"v"
    assert a[cm.TYPE_NAME.encode()] == b"DECIMAL(9,3)"
    assert (a[cm.PRECISION.encode()], a[cm.SCALE.encode()]) == (b"9", b"3")
    assert a[cm.IS_READ_ONLY.encode()] == b"1" and a[cm.IS_CASE_SENSITIVE.encode()] == b"0"
    assert described.field("b").metadata[cm.IS_CASE_SENSITIVE.encode()] == b"1"


@pytest.mark.parametrize(("arrow_type", "name"), _NAMED)
def test_every_sql_type_name_is_listed_by_xdbc_type_info(arrow_type: pa.DataType,
                                                         name: str) -> None:
    # a client that looks a reflected column's type up in GetXdbcTypeInfo finds it
    from flight_storage.rpc.metadata import XDBC_TYPE_NAMES

    assert name.split("(")[0] in XDBC_TYPE_NAMES
