"""The query stream pump: keep-alives, cancellation, timeout, shutdown (fakes, no server)."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pyarrow as pa
import pyarrow.flight as flight
import pytest

from flight_storage.rpc.server import _QueryStream, _Stopped, _StoppableSource

SCHEMA = pa.schema([pa.field("a", pa.int64())])


class _Context:
    def __init__(self) -> None:
        self.cancelled = False

    def is_cancelled(self) -> bool:
        return self.cancelled


class _Server:
    def __init__(self, timeout: float = 60.0) -> None:
        self.config = SimpleNamespace(query_timeout_s=timeout, keepalive_s=0.0)
        self.aborting = threading.Event()
        self.finished = 0

    def is_cancelled(self, key: bytes) -> bool:
        return False

    def query_finished(self) -> None:
        self.finished += 1


def _stream(tmp_path: Path, produce: Any, **kwargs: Any) -> tuple[_QueryStream, _Server,
                                                                 _Context, _StoppableSource]:
    path = tmp_path / "object"
    path.write_bytes(b"x" * 100)
    source = _StoppableSource(path, "b/k", 100)
    server, context = kwargs.pop("server", _Server()), _Context()
    stream = _QueryStream(produce=produce, schema=SCHEMA, source=source, context=context,
                          server=server, fields={}, **kwargs)
    return stream, server, context, source


def _batch(value: int) -> pa.RecordBatch:
    return pa.record_batch([pa.array([value])], schema=SCHEMA)


def test_keepalive_empty_batches_while_the_scan_finds_nothing(tmp_path: Path) -> None:
    idle = threading.Event()

    def produce() -> Iterator[pa.RecordBatch]:
        assert idle.wait(30)  # nothing found until the consumer has sent a keep-alive
        yield _batch(7)

    def on_idle() -> pa.RecordBatch:
        idle.set()
        return _batch(0).slice(0, 0)

    stream, server, _, _ = _stream(tmp_path, produce, on_idle=on_idle)
    items = list(stream)
    assert items[0].num_rows == 0 and items[0].schema.equals(SCHEMA)
    assert [b.num_rows for b in items if b.num_rows] == [1]
    assert items[-1].column(0).to_pylist() == [7]
    assert server.finished == 1


def test_client_cancel_stops_the_reader(tmp_path: Path) -> None:
    opened = threading.Event()
    failures: list[BaseException] = []

    def produce() -> Iterator[pa.RecordBatch]:
        yield _batch(1)
        with source.open() as handle:
            opened.set()
            try:
                while True:  # a scan that finds nothing, reading on
                    handle.seek(0)
                    handle.read()
            except _Stopped as exc:
                failures.append(exc)
                raise

    stream, server, context, source = _stream(tmp_path, produce)
    assert next(stream).num_rows == 1
    assert opened.wait(30)
    context.cancelled = True
    with pytest.raises(flight.FlightCancelledError):
        next(stream)
    assert source.stop.is_set() and server.finished == 1
    stream._thread.join(30)  # the reader noticed and ended
    assert not stream._thread.is_alive() and isinstance(failures[0], _Stopped)


def test_timeout_and_shutdown_end_the_stream(tmp_path: Path) -> None:
    stream, server, _, _ = _stream(tmp_path, lambda: iter(()), server=_Server(timeout=-1.0))
    with pytest.raises(flight.FlightTimedOutError):
        next(stream)
    assert server.finished == 1

    aborting = _Server()
    aborting.aborting.set()
    stream, _, _, _ = _stream(tmp_path, lambda: iter(()), server=aborting)
    with pytest.raises(flight.FlightUnavailableError) as info:
        next(stream)
    assert "ServiceUnavailable" in str(info.value)


def test_abandoned_stream_releases_its_slot(tmp_path: Path) -> None:
    stream, server, _, source = _stream(tmp_path, lambda: iter([_batch(1), _batch(2)]))
    assert next(stream).num_rows == 1
    stream.close()
    stream.close()
    assert server.finished == 1 and source.stop.is_set()
