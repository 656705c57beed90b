"""Run one S3 Select request over one object in this process (CLI, tests, conformance).

This is the whole SelectObjectContent pipeline without the network: plan, execute, serialize
the records as the request's OutputSerialization asks, and count the Stats S3 reports.
"""

from __future__ import annotations

import tempfile
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from flight_storage.execution.engine import EngineConfig, InputSpec, SelectEngine, SelectPlan
from flight_storage.protocol import Partition
from flight_storage.storage.sources import FileSource, ObjectSource
from select_dialect.flavors import S3_REQUEST_DEFAULT


@dataclass
class SelectResult:
    """Serialized records and the Stats event of one request."""

    records: bytes
    stats: dict[str, int] = field(default_factory=dict)
    reader: str = "reference"
    """Which reader served the request: ``datafusion`` (its own reader, proven exact for
    this object) or ``reference`` (the s3-select readers)."""


def serialized_records(
    engine: SelectEngine, plan: SelectPlan, output_serialization: Mapping[str, Any] | None,
    partitions: Sequence[Partition] | None = None,
) -> Iterator[bytes]:
    """Yield the request's records as S3 would send them, chunk by chunk (of ``partitions``,
    default all the plan's)."""
    writer = plan.record_writer(output_serialization)
    for batch in engine.execute(plan, partitions):
        chunk = writer.write(batch)
        if chunk:
            yield chunk
    tail = writer.finish()
    if tail:
        yield tail


def select_stats(plan: SelectPlan, returned: int) -> dict[str, int]:
    """Stats as S3 reports them: bytes scanned and processed, bytes returned."""
    scanned = min(sum(p.bytes or 0 for p in plan.partitions), plan.source.size)
    return {"BytesScanned": scanned, "BytesProcessed": scanned, "BytesReturned": returned}


def run_select(
    data: bytes,
    expression: str,
    *,
    input_serialization: Mapping[str, Any] | None,
    output_serialization: Mapping[str, Any] | None,
    flavor: str = S3_REQUEST_DEFAULT,
    scan_range: tuple[int, int] | None = None,
    source: ObjectSource | None = None,
    config: EngineConfig | None = None,
) -> SelectResult:
    """Run ``expression`` over ``data`` and return the serialized records and Stats.

    Raises:
        StorageError, SelectDialectError: with ``code`` and ``message``.

    Example:
        >>> run_select(b"1,2\\n", "select _2 from s3object", input_serialization={"CSV": {}},
        ...            output_serialization=None).records
        b'2\\n'
    """
    engine = SelectEngine(config)
    spec = InputSpec.from_request(input_serialization, default_format="csv")
    if source is not None:
        return _run(engine, spec, source, expression, output_serialization, flavor, scan_range)
    # DataFusion's readers read files: bytes in memory become one for the request
    with tempfile.TemporaryDirectory(prefix="flight-select-") as directory:
        path = Path(directory) / "object"
        path.write_bytes(data)
        return _run(engine, spec, FileSource(path, "<memory>", len(data)), expression,
                    output_serialization, flavor, scan_range)


def _run(
    engine: SelectEngine,
    spec: InputSpec,
    source: ObjectSource,
    expression: str,
    output_serialization: Mapping[str, Any] | None,
    flavor: str,
    scan_range: tuple[int, int] | None,
) -> SelectResult:
    plan = engine.plan(expression, source, spec, flavor=flavor, scan_range=scan_range)
    records = b"".join(serialized_records(engine, plan, output_serialization))
    return SelectResult(records, select_stats(plan, len(records)), plan.reader)
