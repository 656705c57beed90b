"""An object that changes while it streams fails the stream: no short answer passes as whole."""

from __future__ import annotations

import os
from pathlib import Path

import pyarrow as pa
import pyarrow.flight as flight
import pytest

from tests.conftest import start_server
from tests.flight_storage.test_server_support import (
    PARTITIONED,
    error_document,
    statement_descriptor,
)

pytestmark = pytest.mark.reliability

ROWS = 400_000


def _read_to_the_end(reader: flight.FlightStreamReader) -> None:
    while True:
        try:
            reader.read_chunk()
        except StopIteration:
            return


@pytest.mark.parametrize("query, endpoints", [
    ('SELECT * FROM "b"."rows.csv" LIMIT 400000', 1),  # LIMIT: one ordered endpoint
    ('SELECT * FROM "b"."rows.csv"', None),
])
@pytest.mark.parametrize("change", ["truncate", "replace", "rewrite_in_place"])
def test_object_changed_mid_stream_fails_the_stream(tmp_path: Path, query: str,
                                                    endpoints: int | None, change: str) -> None:
    path = tmp_path / "b" / "rows.csv"
    path.parent.mkdir()
    path.write_text("".join(f"{i},{i % 7},padding padding padding {i:08d}\n"
                            for i in range(ROWS)))
    server = start_server(tmp_path)
    try:
        client = flight.connect(server.location)
        info = client.get_flight_info(statement_descriptor(query), PARTITIONED)
        if endpoints is not None:
            assert len(info.endpoints) == endpoints
        reader = client.do_get(info.endpoints[0].ticket)
        assert reader.read_chunk().data.num_rows > 0
        if change == "truncate":
            with path.open("r+b") as handle:
                handle.truncate(path.stat().st_size // 3)
        elif change == "rewrite_in_place":
            # 4 MiB of other records of the same length, the size and mtime left as they were
            # (what `cp -p`/`rsync -t` of a divergent file does): only the change time moves
            before = path.stat()
            with path.open("r+b") as handle:
                handle.seek(before.st_size // 2)
                chunk = handle.read(4 << 20)
                handle.seek(before.st_size // 2)
                handle.write(bytes(b if b in b",\n" else ord("9") for b in chunk))
            os.utime(path, ns=(before.st_atime_ns, before.st_mtime_ns))
            assert (path.stat().st_size, path.stat().st_mtime_ns) == (before.st_size,
                                                                       before.st_mtime_ns)
        else:
            replacement = path.with_suffix(".new")
            replacement.write_bytes(path.read_bytes())
            os.replace(replacement, path)
        # The rest of the answer, endpoint by endpoint, must fail: a stream still reading the
        # object fails at once; one whose rows were all read (and queued) before the change is
        # whole for the version planned, and the next endpoint's DoGet fails instead.
        with pytest.raises(pa.ArrowException) as failed:
            _read_to_the_end(reader)
            for endpoint in info.endpoints[1:]:
                _read_to_the_end(client.do_get(endpoint.ticket))
        assert error_document(failed.value)["code"] == "PreconditionFailed"
    finally:
        server.stop()
