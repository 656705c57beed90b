"""Streams computed at once, yielded one after another: one endpoint's byte ranges read on
every core while its answer keeps the object's record order.

An endpoint carries enough work to use many cores (issue 37), but its rows must stay in record
order: S3 Select answers in that order, a LIMIT sees records in order, and a client that
resumes a broken stream on a replica skips the rows it already has, which is exact only when
every replica sends them in the same order. So each range is read by a thread of its own into a
small bounded queue, and the consumer takes the first range's batches to its end, then the
second's: the later ranges compute while the earlier are sent, and wait (holding at most
``depth`` batches each) when they are ahead. An error is raised where its range's batches
would have come. Closing the merged stream stops every producer after its current batch.
Hand-written: a few lines over ``queue`` and ``threading``; no library merges iterators in
order with a bound per source.
"""

from __future__ import annotations

import contextvars
import queue
import threading
from collections.abc import Callable, Iterator
from typing import Any, TypeVar

T = TypeVar("T")

_END = object()
_POLL_S = 0.1


class _Failed:
    def __init__(self, error: BaseException) -> None:
        self.error = error


def in_order(sources: list[Callable[[], Iterator[T]]], depth: int = 4) -> Iterator[T]:
    """The items of every source, source after source, each source computed in a thread of
    its own ahead of its turn (at most ``depth`` items held per source).

    Example:
        >>> list(in_order([lambda: iter([1, 2]), lambda: iter([3]), lambda: iter([])]))
        [1, 2, 3]
    """
    merge = _Merge(len(sources), depth)
    for i, source in enumerate(sources):
        # each thread in the caller's context: a query's stop switch reaches its engine
        # waits (execution/session.stopped_by)
        threading.Thread(target=contextvars.copy_context().run, args=(merge.produce, source, i),
                         name=f"range-{i}", daemon=True).start()
    try:
        for i in range(len(sources)):
            yield from merge.consume(i)
    finally:
        merge.close()


class _Merge:
    """The queues of :func:`in_order` and its stop switch."""

    def __init__(self, count: int, depth: int) -> None:
        self.stop = threading.Event()
        self.queues: list[queue.Queue[object]] = [queue.Queue(maxsize=depth)
                                                  for _ in range(count)]

    def _put(self, index: int, item: object) -> bool:
        while not self.stop.is_set():
            try:
                self.queues[index].put(item, timeout=_POLL_S)
                return True
            except queue.Full:
                continue
        return False

    def produce(self, source: Callable[[], Iterator[Any]], index: int) -> None:
        items: Iterator[Any] | None = None
        try:
            items = source()
            for item in items:
                if not self._put(index, item):
                    return
            self._put(index, _END)
        except BaseException as exc:  # handed to the consumer, raised in its turn
            self._put(index, _Failed(exc))
        finally:
            close = getattr(items, "close", None)
            if close is not None:
                close()

    def consume(self, index: int) -> Iterator[Any]:
        while True:
            item = self.queues[index].get()
            if item is _END:
                return
            if isinstance(item, _Failed):
                raise item.error
            yield item

    def close(self) -> None:
        self.stop.set()
        for waiting in self.queues:  # let a producer waiting for room see the stop
            while not waiting.empty():
                waiting.get_nowait()
