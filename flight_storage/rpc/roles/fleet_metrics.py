"""``/metrics`` of ``serve --workers N``: every process's figures in one exposition, by process.

Each worker process keeps its own metrics (its own calls, streams, slots and caches) and serves
them on a loopback port of its own; the first process's ``/metrics`` asks each of them (bounded
by a timeout) and answers every family once, each sample labelled ``worker`` (``w0`` is the
first process, ``w1`` .. the others, as in the fleet file), so a dashboard sums them or shows
them per process. A worker that does not answer is ``flight_select_worker_up{worker=..} 0``
and its figures are absent from that scrape, never a failed scrape.

Hand-written: ``prometheus_client``'s multiprocess mode would aggregate the workers' files,
but not the collectors our gauges are (callbacks read when scraped) nor per-process labels;
this merges expositions with the library's own parser and collector types.
"""

from __future__ import annotations

import urllib.request
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass

from prometheus_client import REGISTRY, CollectorRegistry
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.parser import text_string_to_metric_families

WORKER_LABEL = "worker"
UP = "flight_select_worker_up"
FETCH_TIMEOUT_S = 2.0
"""How long a scrape waits for one worker's figures."""


@dataclass(frozen=True)
class WorkerMetrics:
    """Where one worker process serves its own ``/metrics``."""

    name: str
    url: str


def _fetch(url: str) -> list[Metric]:
    with urllib.request.urlopen(url, timeout=FETCH_TIMEOUT_S) as answer:  # noqa: S310 - our own loopback URL
        return list(text_string_to_metric_families(answer.read().decode("utf-8")))


def _labelled(families: Iterable[Metric], worker: str, into: dict[str, Metric]) -> None:
    """Add ``families``' samples to ``into`` (by family name), each labelled ``worker``."""
    for family in families:
        merged = into.get(family.name)
        if merged is None:
            merged = into[family.name] = Metric(family.name, family.documentation, family.type,
                                                family.unit)
        for sample in family.samples:
            merged.add_sample(sample.name, {**sample.labels, WORKER_LABEL: worker}, sample.value,
                              sample.timestamp, sample.exemplar)


class FleetCollector:
    """The first process's figures (``own``) and each worker's, merged by family."""

    def __init__(self, front: str, workers: Sequence[WorkerMetrics],
                 own: CollectorRegistry = REGISTRY) -> None:
        self._front = front
        self._workers = tuple(workers)
        self._own = own

    def collect(self) -> Iterator[Metric]:
        merged: dict[str, Metric] = {}
        _labelled(self._own.collect(), self._front, merged)
        up = GaugeMetricFamily(UP, "Whether a worker process answered this scrape (1) or not (0)",
                               labels=[WORKER_LABEL])
        up.add_metric([self._front], 1)
        for worker in self._workers:
            try:
                families = _fetch(worker.url)
            except (OSError, ValueError):  # down, slow or garbled: absent from this scrape
                up.add_metric([worker.name], 0)
                continue
            up.add_metric([worker.name], 1)
            _labelled(families, worker.name, merged)
        yield from merged.values()
        yield up


def fleet_registry(front: str, workers: Sequence[WorkerMetrics]) -> CollectorRegistry:
    """A registry whose exposition is the whole host's (see the module docstring)."""
    registry = CollectorRegistry(auto_describe=False)
    registry.register(FleetCollector(front, workers))
    return registry
