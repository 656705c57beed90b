"""The cluster description: the nodes, and which node holds which buckets and key prefixes.

One JSON file, shared by every node of a cluster (``flight-select serve --cluster FILE
--node NAME``). Two kinds (docs/cluster.md says when to choose which):

* a **fleet** lists nodes only: every node reads the same data (an object store's buckets,
  ``--data s3://...``), any node plans and serves any endpoint, and each endpoint is assigned
  to nodes by rendezvous hashing (:meth:`ClusterDescription.rendezvous`);
* a cluster with **holdings** (below) gives each node its own local data: a holding's nodes hold
  full copies of it, owner first.

::

    {
      "nodes": [
        {"name": "a", "location": "grpc://10.0.0.1:8815", "host": "worker-1"},
        {"name": "b", "location": "grpc://10.0.0.2:8815"}
      ],
      "holdings": [
        {"bucket": "sales", "nodes": ["a", "b"]},
        {"bucket": "logs", "prefix": "2024/", "nodes": ["b"]}
      ],
      "peer_timeout_s": 5
    }

A holding's first node is its owner, the others its replicas (each holds a full copy of the
holding's objects in its own data directory). A key belongs to the holding with the longest
prefix it starts with; holdings of one bucket may not nest, so that answer is unique.

Hand-written: the file is ours, and validation must name the offending field (a schema
library would add a dependency for a dozen checks).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final
from urllib.parse import urlsplit

_SCHEMES: Final = ("grpc", "grpc+tcp", "grpc+tls")
_TOP_KEYS: Final = frozenset({"nodes", "holdings", "peer_timeout_s", "peer_check_s"})
_NODE_KEYS: Final = frozenset({"name", "location", "host", "s3"})
_HOLDING_KEYS: Final = frozenset({"bucket", "prefix", "nodes"})


class ClusterFileError(ValueError):
    """A cluster description that cannot be used; the message names the field."""


@dataclass(frozen=True)
class ClusterNode:
    """One storage node.

    Attributes:
        name: unique name used by holdings and ``--node``.
        location: the Flight location clients and peers reach it at.
        host: the machine's name for compute-side affinity (Spark host), if given.
        s3: the URL of the node's S3 door (``http://HOST:PORT``), if it runs one: another
            node's door forwards GET and HEAD of the objects this node holds to it.
    """

    name: str
    location: str
    host: str | None = None
    s3: str | None = None

    @property
    def bind_host(self) -> str:
        """The address in :attr:`location` (what ``serve`` binds by default)."""
        return urlsplit(self.location).hostname or ""

    @property
    def port(self) -> int:
        """The port in :attr:`location`."""
        return urlsplit(self.location).port or 0


@dataclass(frozen=True)
class Holding:
    """A bucket, or the keys of a bucket under a prefix, and the nodes holding it.

    Attributes:
        bucket: the bucket.
        prefix: keys starting with it ("" for the whole bucket).
        nodes: node names, owner first, then replicas in the order they take over.
    """

    bucket: str
    prefix: str
    nodes: tuple[str, ...]

    @property
    def owner(self) -> str:
        return self.nodes[0]

    def covers(self, key: str) -> bool:
        return key.startswith(self.prefix)

    def overlaps(self, prefix: str) -> bool:
        """True when some key under ``prefix`` may belong to this holding."""
        return self.prefix.startswith(prefix) or prefix.startswith(self.prefix)

    def describe(self) -> str:
        return f"{self.bucket}/{self.prefix}" if self.prefix else self.bucket


@dataclass(frozen=True)
class ClusterDescription:
    """The validated cluster file.

    Attributes:
        nodes: by name, in file order.
        holdings: in file order.
        peer_timeout_s: bound on every call one node makes to another.
        peer_check_s: seconds between a node's health checks of its peers.
    """

    nodes: Mapping[str, ClusterNode]
    holdings: tuple[Holding, ...]
    peer_timeout_s: float = 5.0
    peer_check_s: float = 10.0

    @classmethod
    def load(cls, path: Path) -> ClusterDescription:
        """Read and validate ``path``.

        Raises:
            ClusterFileError: unreadable, not JSON, or invalid (the message names the field).
        """
        try:
            text = path.read_text(encoding="utf-8")
        except OSError as exc:
            raise ClusterFileError(f"{path}: cannot read the cluster file ({exc.strerror})") from None
        return cls.parse(text, str(path))

    @classmethod
    def parse(cls, text: str, where: str = "cluster file") -> ClusterDescription:
        """Validate a cluster description given as JSON text."""
        try:
            document = json.loads(text)
        except json.JSONDecodeError as exc:
            raise ClusterFileError(f"{where}: not JSON ({exc})") from None
        top = _known_keys(document, _TOP_KEYS, where)
        nodes = _nodes(_list(top, "nodes", where), where)
        holdings = (_holdings(_list(top, "holdings", where), nodes, where)
                    if "holdings" in top else ())  # no holdings: a fleet
        timeouts = {name: _positive(top, name, default, where)
                    for name, default in (("peer_timeout_s", 5.0), ("peer_check_s", 10.0))}
        return cls(nodes, holdings, **timeouts)

    @property
    def is_fleet(self) -> bool:
        """True when the file lists no holdings: every node reads the same data."""
        return not self.holdings

    def rendezvous(self, key: str) -> list[str]:
        """Every node's name, in rendezvous (highest random weight) order for ``key``: the
        first is the node ``key`` is assigned to, and removing a node moves only its keys."""
        def weight(node: str) -> bytes:
            return hashlib.blake2b(f"{node}\0{key}".encode(), digest_size=8).digest()

        return sorted(self.nodes, key=weight, reverse=True)

    def node(self, name: str) -> ClusterNode:
        """The node called ``name``.

        Raises:
            ClusterFileError: no such node (the message lists the known ones).
        """
        try:
            return self.nodes[name]
        except KeyError:
            raise ClusterFileError(
                f"--node {name!r} is not in the cluster file (nodes: {', '.join(self.nodes)})"
            ) from None

    def holding(self, bucket: str, key: str) -> Holding | None:
        """The holding ``bucket/key`` belongs to (longest prefix), or None."""
        matches = [h for h in self.holdings if h.bucket == bucket and h.covers(key)]
        return max(matches, key=lambda h: len(h.prefix)) if matches else None

    def holdings_under(self, bucket: str, prefix: str) -> list[Holding]:
        """The holdings that may hold keys of ``bucket`` under ``prefix``."""
        return [h for h in self.holdings if h.bucket == bucket and h.overlaps(prefix)]

    def buckets(self) -> list[str]:
        """Every bucket some node holds, sorted."""
        return sorted({h.bucket for h in self.holdings})

    def holdings_of(self, node: str) -> list[Holding]:
        """What ``node`` holds, as owner or replica."""
        return [h for h in self.holdings if node in h.nodes]

    def locations(self, holding: Holding) -> list[str]:
        """The holding's node locations, owner first."""
        return [self.nodes[n].location for n in holding.nodes]


# ----------------------------------------------------------------------------- validation


def _known_keys(value: object, allowed: frozenset[str], where: str) -> Mapping[str, Any]:
    if not isinstance(value, dict):
        raise ClusterFileError(f"{where}: expected a JSON object")
    unknown = sorted(set(value) - allowed)
    if unknown:
        raise ClusterFileError(
            f"{where}: unknown field {unknown[0]!r} (fields: {', '.join(sorted(allowed))})")
    return value


def _list(document: Mapping[str, Any], name: str, where: str) -> Sequence[Any]:
    value = document.get(name)
    if not isinstance(value, list) or not value:
        raise ClusterFileError(f"{where}: {name}: expected a non-empty list")
    return value


def _text(entry: Mapping[str, Any], name: str, where: str, *, required: bool = True) -> str:
    value = entry.get(name)
    if value is None and not required:
        return ""
    if not isinstance(value, str) or (required and not value):
        raise ClusterFileError(f"{where}.{name}: expected a non-empty string")
    return value


def _positive(document: Mapping[str, Any], name: str, default: float, where: str) -> float:
    value = document.get(name, default)
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value <= 0:
        raise ClusterFileError(f"{where}: {name}: expected a positive number of seconds")
    return float(value)


def _location(text: str, where: str) -> str:
    parts = urlsplit(text)
    try:
        port = parts.port
    except ValueError:
        port = None
    if parts.scheme not in _SCHEMES or not parts.hostname or not port:
        raise ClusterFileError(
            f"{where}.location: {text!r} is not {'|'.join(_SCHEMES)}://HOST:PORT with a "
            "fixed port (peers and clients must know it before the node starts)")
    return text


def _s3_url(text: str | None, where: str) -> str | None:
    if text is None:
        return None
    parts = urlsplit(text)
    try:
        port = parts.port
    except ValueError:
        port = None
    if parts.scheme not in ("http", "https") or not parts.hostname or not port:
        raise ClusterFileError(f"{where}.s3: {text!r} is not http(s)://HOST:PORT (the node's "
                               "S3 door, --s3-port)")
    return text.rstrip("/")


def _nodes(entries: Sequence[Any], where: str) -> dict[str, ClusterNode]:
    nodes: dict[str, ClusterNode] = {}
    seen_locations: dict[str, str] = {}
    for i, entry in enumerate(entries):
        at = f"{where}: nodes[{i}]"
        fields = _known_keys(entry, _NODE_KEYS, at)
        name = _text(fields, "name", at)
        location = _location(_text(fields, "location", at), at)
        host = _text(fields, "host", at, required=False) or None
        s3 = _s3_url(_text(fields, "s3", at, required=False) or None, at)
        if name in nodes:
            raise ClusterFileError(f"{at}.name: duplicate node name {name!r}")
        if location in seen_locations:
            raise ClusterFileError(
                f"{at}.location: {location} is also node {seen_locations[location]!r}'s")
        nodes[name] = ClusterNode(name, location, host, s3)
        seen_locations[location] = name
    return nodes


def _holdings(entries: Sequence[Any], nodes: Mapping[str, ClusterNode],
              where: str) -> tuple[Holding, ...]:
    holdings: list[Holding] = []
    for i, entry in enumerate(entries):
        at = f"{where}: holdings[{i}]"
        fields = _known_keys(entry, _HOLDING_KEYS, at)
        bucket = _text(fields, "bucket", at)
        if "/" in bucket or bucket in (".", ".."):
            raise ClusterFileError(f"{at}.bucket: {bucket!r} is not a bucket name")
        prefix = _text(fields, "prefix", at, required=False)
        names = fields.get("nodes")
        if not isinstance(names, list) or not names:
            raise ClusterFileError(
                f"{at}.nodes: bucket {bucket!r} is held by nobody (list its owner first, "
                "then its replicas)")
        for j, name in enumerate(names):
            if name not in nodes:
                raise ClusterFileError(
                    f"{at}.nodes[{j}]: unknown node {name!r} (nodes: {', '.join(nodes)})")
        if len(set(names)) != len(names):
            raise ClusterFileError(f"{at}.nodes: a node is listed twice")
        holding = Holding(bucket, prefix, tuple(names))
        for other in holdings:
            if other.bucket == bucket and other.overlaps(prefix):
                raise ClusterFileError(
                    f"{at}: {holding.describe()!r} overlaps {other.describe()!r} (a key must "
                    "belong to exactly one holding)")
        holdings.append(holding)
    return tuple(holdings)
