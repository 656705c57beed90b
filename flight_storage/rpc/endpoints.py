"""What GetFlightInfo says about a planned query's endpoints: partitions, sizes, row counts.

Pure functions of a :class:`~flight_storage.execution.engine.SelectPlan` and its tickets,
kept out of the server so the FlightInfo rules live in one place.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import hashlib
import json
from typing import Any

import pyarrow as pa

from flight_storage.errors import StaleTicketError
from flight_storage.execution.plan_types import SelectPlan
from flight_storage.protocol import (
    ByteRange,
    Partition,
    PartitionTicket,
    PlanDescription,
    WholeObject,
)


def endpoint_partitions(plan: SelectPlan) -> list[Partition]:
    """One endpoint per partition when partitions are independent, else one for all."""
    if plan.parallel_safe or len(plan.partitions) == 1:
        return [p.partition for p in plan.partitions] or [WholeObject()]
    return [WholeObject()]


def known_rows(plan: SelectPlan) -> int:
    """The result's row count when planning knows it (no filter, limit or aggregate), else -1."""
    rows = [p.rows for p in plan.partitions]
    if not rows or any(r is None for r in rows) or _filters_rows(plan):
        return -1
    return sum(r for r in rows if r is not None)


def ticket_key(handle: bytes) -> bytes:
    return hashlib.sha256(bytes(handle)).digest()[:16]


def query_id(ticket: PartitionTicket) -> str:
    """Same for every endpoint of one FlightInfo (they share the issue time), so log lines of
    planning and of each DoGet can be joined."""
    seed = json.dumps([ticket.user, ticket.query, ticket.bucket, ticket.key, ticket.issued_at])
    return hashlib.sha256(seed.encode()).hexdigest()[:12]


def expiry(at: float) -> Any:
    return pa.scalar(
        dt.datetime.fromtimestamp(at, dt.UTC), type=pa.timestamp("ns", tz="UTC")
    )


def partition_bytes(partition: Partition, plan: SelectPlan) -> int:
    if isinstance(partition, ByteRange):
        return partition.end - partition.start
    for planned in plan.partitions:
        if planned.partition == partition and planned.bytes is not None:
            return planned.bytes
    return plan.source.size


def _filters_rows(plan: SelectPlan) -> bool:
    sql = plan.translation.sql.upper()
    return " WHERE " in sql or " LIMIT " in sql or plan.translation.is_aggregate


def stale_ticket(ticket: PartitionTicket, node_name: str | None) -> StaleTicketError:
    """The error of a ticket whose objects are not, on this node, the version it was planned
    on."""
    where = f"{ticket.bucket}/{ticket.key}"
    if ticket.planned_by is not None and ticket.planned_by != node_name:
        return StaleTicketError(
            f"{where} on node {node_name} is not the copy node {ticket.planned_by} "
            f"planned the query on (their contents differ): make the replicas equal, "
            "then plan it again", code="PreconditionFailed")
    return StaleTicketError(f"{where} changed after the query was planned; plan it again "
                            "(GetFlightInfo)", code="PreconditionFailed")


def plan_description(plan: SelectPlan, endpoints: int, cores: int, *, clustered: bool,
                     about_plan: PlanDescription | None = None) -> PlanDescription:
    """What ``app_metadata`` says of a planned statement: what served it, for operators and
    benchmarks (clients may ignore it), and the cores it computes on (the Spark source packs
    endpoints into a task per core). ``about_plan``: what it says of a plan the engine did
    not read itself (an Iceberg table's), which wins where it speaks."""
    t, columns = plan.translation, plan.input.columns
    described = PlanDescription(
        reader=plan.reader, endpoints=endpoints, cores=cores,
        limit_counts_input=plan.limit_counts_input,
        # the rows are the union of the endpoints' rows: a cluster may join such plans
        mergeable=(not (t.is_aggregate or t.whole_input or t.limit is not None)
                   if clustered else None),
        reason=plan.native_reason if plan.native is None and about_plan is None else None,
        # a typed CSV table: where its columns come from
        columns=None if columns is None else "sniffed" if columns.sniffed else "configured",
        warnings=tuple(plan.warnings), cache=plan.cache or None)
    if about_plan is None:
        return described
    said = {f.name: getattr(about_plan, f.name) for f in dataclasses.fields(about_plan)}
    return dataclasses.replace(described, **{k: v for k, v in said.items()
                                             if v is not None and v != ()})
