"""Bad objects give a clear error naming the object and where, never a hang or a crash."""

from __future__ import annotations

import bz2
import gzip
import io

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from flight_storage.errors import StorageError
from flight_storage.execution.engine import EngineConfig, InputSpec, SelectEngine
from flight_storage.storage.sources import BytesSource


def _run(data: bytes, spec: InputSpec, sql: str = "select * from s3object",
         config: EngineConfig | None = None) -> list[pa.RecordBatch]:
    engine = SelectEngine(config)
    plan = engine.plan(sql, BytesSource(data, "bkt/bad-object"), spec)
    return list(engine.execute(plan))


def _parquet() -> bytes:
    buffer = io.BytesIO()
    pq.write_table(pa.table({"a": list(range(100))}), buffer, row_group_size=10)
    return buffer.getvalue()


def _numbers() -> bytes:
    return "".join(f"{i},{i * i}\n" for i in range(20000)).encode()


CASES = {
    "invalid utf-8 in csv": (b"a,b\n\xff\xfe,c\n", InputSpec("csv"), "InvalidTextEncoding"),
    "invalid utf-8 in json": (b'{"a": "\xff"}\n', InputSpec("json", options={"Type": "LINES"}),
                              "InvalidTextEncoding"),
    "record over the limit": (b"x" * 5000 + b"\n", InputSpec("csv"), "OverMaxRecordSize"),
    "json record over the limit": (b'{"a": "' + b"x" * 5000 + b'"}\n',
                                   InputSpec("json", options={"Type": "LINES"}),
                                   "OverMaxRecordSize"),
    "truncated gzip": (gzip.compress(_numbers())[:-200], InputSpec("csv", "GZIP"),
                       "TruncatedInput"),
    "corrupt bzip2": (b"BZh91AY&SY" + b"\x00" * 64, InputSpec("csv", "BZIP2"),
                      "InvalidCompressionFormat"),
    "broken json": (b'{"a": 1}\n{"a": \n', InputSpec("json", options={"Type": "LINES"}),
                    "JSONParsingError"),
    "corrupt parquet footer": (_parquet()[:-12] + b"\x00" * 12, InputSpec("parquet"),
                               "InvalidParquet"),
}


@pytest.mark.parametrize("name", list(CASES))
def test_bad_object_error_names_object_and_cause(name: str) -> None:
    data, spec, code = CASES[name]
    config = EngineConfig(max_record_bytes=1024)
    with pytest.raises(StorageError) as info:
        _run(data, spec, config=config)
    error = info.value
    assert error.code == code, (error.code, error.message)
    assert "bkt/bad-object" in error.message
    assert "Traceback" not in error.message


def test_gzip_that_is_not_gzip_at_all() -> None:
    with pytest.raises(StorageError) as info:
        _run(b"plain text, not gzip\n", InputSpec("csv", "GZIP"))
    assert info.value.code in ("InvalidCompressionFormat", "TruncatedInput")


def test_bzip2_reads_back() -> None:
    batches = _run(bz2.compress(b"1,2\n3,4\n"), InputSpec("csv", "BZIP2"))
    assert sum(b.num_rows for b in batches) == 2


def test_datafusion_memory_errors_name_the_limit() -> None:
    from flight_storage.execution.engine_errors import engine_error

    error = engine_error(RuntimeError(
        "Resources exhausted: Failed to allocate additional 8.0 MB for GroupedHashAggregate"))
    assert error.code == "ResourceLimitExceeded"
    assert "--memory-limit-mb" in error.message
