"""What a FlightInfo says of its plan: ``app_metadata`` as one typed record both sides share.

The server writes a :class:`PlanDescription` as compact JSON into ``FlightInfo.app_metadata``
(:meth:`PlanDescription.to_json`); the clients read it back with
:meth:`PlanDescription.from_json`, so every key either side uses is named here once. A fact
the server leaves out (None) is unknown: a client must then assume the safe answer (e.g. a
server that does not say ``limit_counts_input`` is taken to count input records). Clients may
ignore the description; nothing in it changes a result.

Hand-written: the keys are this server's own (Flight leaves ``app_metadata`` to the server).
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final


@dataclass(frozen=True)
class PlanDescription:
    """What served a plan, for operators, benchmarks and clients that pack endpoints.

    Attributes:
        reader: ``"datafusion"`` (DataFusion reads the data itself) or ``"reference"`` (the
            reference readers feed it).
        endpoints: how many endpoints the FlightInfo has.
        cores: the cores each node computes on (the Spark sources pack endpoints into a task
            per core).
        limit_counts_input: the flavour's LIMIT counts scanned records (Ceph's) rather than
            result rows; the clients push a LIMIT beside a WHERE only when it is False.
        mergeable: the rows are the union of the endpoints' rows (no aggregate, whole-input
            clause or LIMIT), so a cluster may join plans of several holdings (cluster only).
        reason: why DataFusion does not read the data itself (reader ``reference``).
        columns: where a typed table's columns come from: ``"sniffed"`` or ``"configured"``.
        warnings: what planning noticed and the client may want to know.
        cache: the decoded cache's answer for the plan: ``"hit"``, ``"miss"`` or
            ``"filling"`` (``serve --cache-dir``).
        table: ``"iceberg"`` for a plan over an Iceberg table.
        snapshot: the Iceberg snapshot read.
        files: the Iceberg data files read.
        pruned_files: the Iceberg data files pruning left out.
        row_filter: the Iceberg row filter planning used (its text).
        tables: how many tables a statement DataFusion plans over several tables reads.
        nodes: how many cluster nodes' plans the FlightInfo joins.
    """

    reader: str | None = None
    endpoints: int | None = None
    cores: int | None = None
    limit_counts_input: bool | None = None
    mergeable: bool | None = None
    reason: str | None = None
    columns: str | None = None
    warnings: tuple[str, ...] = ()
    cache: str | None = None
    table: str | None = None
    snapshot: int | None = None
    files: int | None = None
    pruned_files: int | None = None
    row_filter: str | None = None
    tables: int | None = None
    nodes: int | None = None

    def to_dict(self) -> dict[str, Any]:
        """The JSON-able form: the facts said, unknown ones left out."""
        out: dict[str, Any] = {}
        for spec in dataclasses.fields(self):
            value = getattr(self, spec.name)
            if value is not None and value != ():
                out[spec.name] = list(value) if isinstance(value, tuple) else value
        return out

    def to_json(self) -> bytes:
        """The bytes of ``FlightInfo.app_metadata``."""
        return json.dumps(self.to_dict()).encode()

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> PlanDescription:
        """The description a JSON object holds; keys it does not know and values of the
        wrong type are left out (unknown), so an older or newer server is read safely."""
        said: dict[str, Any] = {}
        for spec in dataclasses.fields(cls):
            value = data.get(spec.name)
            if spec.type == "tuple[str, ...]":
                if isinstance(value, list) and all(isinstance(v, str) for v in value):
                    said[spec.name] = tuple(value)
            elif type(value) is _JSON_TYPES[str(spec.type)]:  # bool is no int here
                said[spec.name] = value
        return cls(**said)

    @classmethod
    def from_json(cls, data: bytes | None) -> PlanDescription:
        """The description in ``app_metadata``; empty when there is none or it is not a JSON
        object (a server that says nothing)."""
        try:
            parsed = json.loads(bytes(data or b"") or b"{}")
        except (ValueError, UnicodeDecodeError):
            return cls()
        return cls.from_dict(parsed) if isinstance(parsed, dict) else cls()


_JSON_TYPES: Final[Mapping[str, type]] = {"str | None": str, "int | None": int,
                                          "bool | None": bool}
"""A field's annotation -> the one JSON type its value may have."""
