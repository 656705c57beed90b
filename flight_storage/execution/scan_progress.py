"""How far DataFusion's own reader has scanned an object, from DataFusion's metrics.

DataFusion 55 counts no bytes read for CSV, but its scan (``DataSourceExec``) reports
``files_processed`` per partition as each partition's byte range ends, and shows the ranges
in its description (``file_groups={2 groups: [[f:0..3501825], [f:3501825..7003650]]}``). The
bytes of the ranges whose partitions have finished are bytes read: a lower bound that is
exact whenever it moves, never an estimate. Within one range nothing is known until it ends,
so a partition that DataFusion reads whole is reported at its end (``docs/server.md``, the S3
door's Progress events). Only plans whose metrics belong to one execution are watched (a plan
made for one stream); a range without offsets in the description (a compressed object, read
whole) counts nothing until the stream's end counts the object.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from typing import Any, Final

_GROUP: Final = re.compile(r"\[([^\[\]]*)\]")
_RANGE: Final = re.compile(r":(\d+)\.\.(\d+)")


def finished_bytes(physical: Any) -> Callable[[], int]:
    """A probe of ``physical`` (a DataFusion ``ExecutionPlan`` being executed once): the
    bytes of the scan ranges whose partitions have finished."""
    scans = [(node, _range_bytes(node.display())) for node in _nodes(physical)
             if node.display().startswith("DataSourceExec")]

    def probe() -> int:
        total = 0
        for node, sizes in scans:
            metrics = node.metrics()
            if metrics is None:
                continue
            done = {m.partition for m in metrics.metrics()
                    if m.name == "files_processed" and (m.value or 0) > 0}
            total += sum(sizes[p] for p in done if p is not None and p < len(sizes))
        return total

    return probe


def _nodes(plan: Any) -> Iterator[Any]:
    yield plan
    for child in plan.children():
        yield from _nodes(child)


def _range_bytes(description: str) -> list[int]:
    """The bytes of each file group's ranges, in partition order (0 where none is shown)."""
    start = description.find("file_groups={")
    if start < 0:
        return []
    groups = description[start:description.find("}", start)]
    return [sum(int(b) - int(a) for a, b in _RANGE.findall(group))
            for group in _GROUP.findall(groups)]
