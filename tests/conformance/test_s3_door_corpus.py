"""The conformance corpus through boto3 and the S3 door, against the local engine.

Each sampled case's input becomes an object of a temporary data directory; the case's query
is sent with ``select_object_content`` and its records (or its error code) must equal what
``run_select`` gives in the case's flavour (sent in the flavour header). This proves the door
adds nothing and loses nothing on the way: same engine, same bytes.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from botocore.exceptions import ClientError, EventStreamError

from flight_storage.execution.select_local import run_select
from flight_storage.protocol import FLAVOR_HEADER
from tests.conformance import corpus
from tests.flight_storage.test_s3_door import s3_client, start_door

SAMPLE_EVERY = 1
"""Every n-th usable case runs (1: every case the door can be given as an object)."""

_AWS_INPUT_KEYS = {"CSV", "JSON", "Parquet", "CompressionType"}
_SUFFIX = {"csv": ".csv", "json": ".json", "parquet": ".parquet"}


def _usable(case: corpus.Case) -> bool:
    raw = case.raw
    compression = (raw.get("input_serialization") or {}).get("CompressionType", "NONE")
    return (isinstance(raw.get("input"), str) and raw.get("generator") is None
            and raw.get("format") in ("csv", "json") and bool(raw.get("query"))
            and raw.get("output_serialization") is not None
            and str(compression).upper() in ("NONE", "")
            # boto3 validates InputSerialization against AWS's shape (Ceph's extensions
            # cannot be sent through it)
            and set(raw.get("input_serialization") or {}) <= _AWS_INPUT_KEYS)


def _sample() -> list[corpus.Case]:
    directory = corpus.default_corpus_dir()
    if not directory.is_dir():
        return []
    usable = [c for c in corpus.load_cases(corpus.corpus_files(directory)) if _usable(c)]
    return usable[::SAMPLE_EVERY]


CASES = _sample()


@pytest.fixture(scope="module")
def door(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, str]]:
    data = tmp_path_factory.mktemp("corpus")
    (data / "corpus").mkdir()
    server, url = start_door(data)
    yield data, url
    server.stop()


def _local(case: corpus.Case, data: bytes) -> tuple[bytes | None, str | None]:
    try:
        result = run_select(data, case.raw["query"],
                            input_serialization=case.raw.get("input_serialization") or {},
                            output_serialization=case.raw["output_serialization"],
                            flavor=case.default_flavor)
    except Exception as exc:  # noqa: BLE001 - any engine error: its S3 code is compared
        return None, getattr(exc, "code", type(exc).__name__)
    return result.records, None


def _remote(s3: Any, case: corpus.Case, key: str) -> tuple[bytes | None, str | None]:
    try:
        answer = s3.select_object_content(
            Bucket="corpus", Key=key, Expression=case.raw["query"], ExpressionType="SQL",
            InputSerialization=case.raw.get("input_serialization") or {},
            OutputSerialization=case.raw["output_serialization"])
        events = list(answer["Payload"])
    except (ClientError, EventStreamError) as exc:
        return None, exc.response["Error"]["Code"]
    return b"".join(e["Records"]["Payload"] for e in events if "Records" in e), None


@pytest.mark.skipif(not CASES, reason="the shared conformance corpus is not beside the project")
@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_corpus_case_through_boto3(door: tuple[Path, str], case: corpus.Case) -> None:
    data_dir, url = door
    data = case.raw["input"].encode("utf-8")
    key = f"case-{abs(hash(case.id))}{_SUFFIX[case.raw['format']]}"
    (data_dir / "corpus" / key).write_bytes(data)
    s3 = s3_client(url)
    flavor = case.default_flavor
    s3.meta.events.register(
        "before-sign.s3.SelectObjectContent",
        lambda request, **_: request.headers.__setitem__(FLAVOR_HEADER, flavor))
    assert _remote(s3, case, key) == _local(case, data)
