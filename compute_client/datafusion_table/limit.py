"""LIMIT pushdown for remote tables, read off DataFusion's optimized logical plan.

DataFusion never passes a LIMIT to a dataset, but its optimizer records one on the
``TableScan`` (``fetch``) when nothing between the scan and the LIMIT drops rows.
Hand-written because no DataFusion hook hands the limit to a Python table.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

import pyarrow as pa

from compute_client.datafusion_table.dataset import FlightDataset


def _walk(plan: Any) -> Iterable[Any]:
    yield plan
    for child in plan.inputs():
        yield from _walk(child)


def scan_fetches(logical_plan: Any) -> dict[str, list[int | None]]:
    """``TableScan`` name -> the fetch of each scan of it in an optimized logical plan."""
    found: dict[str, list[int | None]] = {}
    for node in _walk(logical_plan):
        variant = node.to_variant()
        if type(variant).__name__ == "TableScan":
            found.setdefault(variant.table_name(), []).append(variant.fetch())
    return found


def collect(ctx: Any, query: str, tables: Mapping[str, FlightDataset]) -> pa.Table:
    """Run ``query`` and return its result, pushing a LIMIT to the server where it is safe.

    DataFusion never passes the limit to a dataset, but its optimizer records it on the
    ``TableScan`` (``fetch``) when nothing between the scan and the LIMIT drops rows. For each
    of ``tables`` (name as registered -> dataset) scanned exactly once with a fetch, the scan
    sends ``LIMIT fetch`` too, unless a filter stays local (it could drop fetched rows) or the
    flavour is Ceph's and a WHERE is pushed (Ceph's LIMIT counts scanned rows). DataFusion's
    own LIMIT still applies on top.
    """
    frame = ctx.sql(query)
    fetches = scan_fetches(frame.optimized_logical_plan())
    hinted: list[FlightDataset] = []
    for name, dataset in tables.items():
        found = fetches.get(name, [])
        if len(found) == 1 and found[0] is not None:
            dataset.hint_fetch(int(found[0]))
            hinted.append(dataset)
    try:
        return frame.to_arrow_table()
    finally:
        for dataset in hinted:
            dataset.hint_fetch(None)
