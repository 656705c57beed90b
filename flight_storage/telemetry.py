"""The server's Prometheus metrics: one owner of every metric's name, type, help and labels.

Every module that counts something imports its metric from here, so a name is defined once and
the label sets stay bounded: labels take values from fixed vocabularies (RPC method names, S3
operation names, error codes from ``flight_storage.errors``, store operation names), never
statement text, user names or object keys. A value outside its vocabulary is counted as
``other`` (:func:`bounded_code`). The metrics live in ``prometheus_client``'s default registry,
which ``flight_storage.rpc.operations_http`` serves on ``/metrics``.

| metric | type | labels |
|---|---|---|
| ``flight_select_calls_total`` | counter | ``method`` (Flight RPC), ``code`` (``ok`` or the error code) |
| ``flight_select_call_duration_seconds`` | histogram | ``method`` |
| ``flight_select_statement_plan_seconds`` | histogram | |
| ``flight_select_stream_first_batch_seconds`` | histogram | |
| ``flight_select_stream_seconds`` | histogram | ``status`` (``ok``, ``cancelled``, ``error``, …) |
| ``flight_select_scanned_bytes_total`` | counter | |
| ``flight_select_sent_bytes_total``, ``flight_select_sent_rows_total`` | counter | |
| ``flight_select_compute_slots_in_use``, ``flight_select_compute_slots_waiting`` | gauge | |
| ``flight_select_open_streams`` | gauge | |
| ``flight_select_s3_requests_total`` | counter | ``operation``, ``status`` (HTTP status) |
| ``flight_select_ingest_bytes_total``, ``flight_select_ingest_rows_total`` | counter | |
| ``flight_select_store_requests_total`` | counter | ``operation`` (S3 API call), ``result`` (``ok``, ``client_error``, ``server_error``: each HTTP attempt, retries included) |
| ``flight_select_decoded_cache_{entries,bytes,filling}`` | gauge | (read from the cache at each scrape) |
| ``flight_select_decoded_cache_{hits,misses,fills,evictions,failures}_total`` | counter | |
| ``flight_select_ready`` | gauge | 1 while ``/readyz`` answers 200 |
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator, Mapping
from typing import Final

from prometheus_client import REGISTRY, Counter, Gauge, Histogram
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric

_LATENCY_BUCKETS: Final = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5,
                           5.0, 10.0, 30.0, 60.0, 300.0)
"""Seconds: from a cached plan's lookup (a millisecond) to a long scan (minutes)."""

CALLS: Final = Counter("flight_select_calls", "Flight RPCs completed, by method and result code",
                       ["method", "code"])
CALL_SECONDS: Final = Histogram("flight_select_call_duration_seconds",
                                "Flight RPC duration (a DoGet: the whole stream)", ["method"],
                                buckets=_LATENCY_BUCKETS)
PLAN_SECONDS: Final = Histogram("flight_select_statement_plan_seconds",
                                "Time to plan a Flight SQL statement (GetFlightInfo)",
                                buckets=_LATENCY_BUCKETS)
FIRST_BATCH_SECONDS: Final = Histogram("flight_select_stream_first_batch_seconds",
                                       "Time from a DoGet stream's start to its first batch",
                                       buckets=_LATENCY_BUCKETS)
STREAM_SECONDS: Final = Histogram("flight_select_stream_seconds",
                                  "A DoGet stream's whole duration, by how it ended", ["status"],
                                  buckets=_LATENCY_BUCKETS)
SCANNED_BYTES: Final = Counter("flight_select_scanned_bytes",
                               "Object bytes read to answer DoGet streams")
SENT_BYTES: Final = Counter("flight_select_sent_bytes",
                            "Arrow bytes of the batches DoGet streams sent")
SENT_ROWS: Final = Counter("flight_select_sent_rows", "Rows DoGet streams sent")
SLOTS_IN_USE: Final = Gauge("flight_select_compute_slots_in_use",
                            "Compute slots held by streams and planning now")
SLOTS_WAITING: Final = Gauge("flight_select_compute_slots_waiting",
                             "Streams and planning calls waiting for a compute slot")
OPEN_STREAMS: Final = Gauge("flight_select_open_streams", "DoGet streams open now")
S3_REQUESTS: Final = Counter("flight_select_s3_requests",
                             "S3 door requests, by operation and HTTP status",
                             ["operation", "status"])
INGEST_BYTES: Final = Counter("flight_select_ingest_bytes",
                              "Bytes of the Parquet files bulk ingests (DoPut) received")
INGEST_ROWS: Final = Counter("flight_select_ingest_rows", "Rows received by bulk ingests")
STORE_REQUESTS: Final = Counter("flight_select_store_requests",
                                "Requests to object stores, by S3 operation and result",
                                ["operation", "result"])
READY: Final = Gauge("flight_select_ready", "1 while the server is ready for new calls")

_CODE: Final = re.compile(r"[A-Za-z][A-Za-z0-9_.]{0,63}")
OTHER: Final = "other"


def bounded_code(code: str | None, ok: str = "ok") -> str:
    """A label value for a result code: ``ok`` for None, the code when it is a short word (our
    S3 error codes, gRPC status names), else ``other``, so free text never becomes a label.

    Example:
        >>> bounded_code(None), bounded_code("NoSuchKey"), bounded_code("a message: x")
        ('ok', 'NoSuchKey', 'other')
    """
    if code is None:
        return ok
    return code if _CODE.fullmatch(code) else OTHER


def track(gauge: Gauge, read: Callable[[], float]) -> None:
    """Let ``gauge`` read its value from ``read`` at each scrape (the latest owner wins)."""
    gauge.set_function(read)


_CACHE_GAUGES: Final = {"entries": "entries kept", "bytes": "bytes on disk",
                        "filling": "fills running now"}
_CACHE_COUNTERS: Final = {"hits": "lookups answered from an entry",
                          "misses": "lookups that found no entry",
                          "fills": "entries written", "evictions": "entries evicted (LRU)",
                          "failures": "fills that failed (the query read the object)"}


class _DecodedCacheCollector:
    """The decoded cache's figures, read from its ``stats()`` at each scrape."""

    def __init__(self, stats: Callable[[], Mapping[str, object]]) -> None:
        self._stats = stats

    def collect(self) -> Iterator[Metric]:
        stats = self._stats()
        for name, what in _CACHE_GAUGES.items():
            yield GaugeMetricFamily(f"flight_select_decoded_cache_{name}",
                                    f"Decoded cache: {what}", value=_number(stats.get(name)))
        for name, what in _CACHE_COUNTERS.items():
            yield CounterMetricFamily(f"flight_select_decoded_cache_{name}",
                                      f"Decoded cache: {what}", value=_number(stats.get(name)))


def _number(value: object) -> float:
    return float(value) if isinstance(value, int | float) else 0.0


def watch_decoded_cache(stats: Callable[[], Mapping[str, object]]) -> None:
    """Expose the decoded cache whose figures ``stats`` returns (once per process)."""
    REGISTRY.register(_DecodedCacheCollector(stats))
