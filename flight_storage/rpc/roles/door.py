"""The S3 door of a cluster node serves every object of the cluster, not only its own.

| cluster | listings | HEAD, GET | SelectObjectContent |
|---|---|---|---|
| a fleet over one store | this node's (every node sees the store) | this node | planned here; each endpoint read here |
| holdings | this node's ``ListObjects`` action (``rpc/roles/actions.list_page``, in process), which merges every node's | this node when it holds the object, else forwarded to the door (``nodes[].s3``) of a node that holds it, owner first, live nodes first | planned by a node holding the object (``rpc/query_service.py`` forwards as GetFlightInfo does); each endpoint read from its locations, this node's in process |

Forwarding, not a redirect: S3 SDKs follow no redirect to another host (botocore's redirects
are for regions only), so the door fetches from the holding node's door and streams the answer
on: its status, headers and body, errors included. The forwarded request is signed as the
caller: the nodes share the users file, so the caller's access key is known to the holding
node too. Writes (and multipart uploads) are served by the node whose data they change.
Hand-written: the rules are this project's own.
"""

from __future__ import annotations

import email.utils
import json
import threading
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any, Final

from starlette.concurrency import run_in_threadpool
from starlette.responses import Response, StreamingResponse

from flight_storage.rpc.boundary import PEER_ERRORS, peer_error
from flight_storage.rpc.roles.actions import list_page
from flight_storage.rpc.roles.cluster import ClusterRole
from flight_storage.rpc.s3_http.listing import Entry
from flight_storage.rpc.s3_http.s3_errors import S3HttpError

if TYPE_CHECKING:
    from flight_storage.rpc.s3_http.app import Call, S3Door

_PAGE: Final = 1000
_FORWARDED: Final = {"range": "Range", "if-match": "IfMatch", "if-none-match": "IfNoneMatch",
                     "if-modified-since": "IfModifiedSince",
                     "if-unmodified-since": "IfUnmodifiedSince"}
"""Request headers a forwarded GET or HEAD carries (as boto3's parameters)."""
_ANSWERED: Final = ("content-length", "content-range", "etag", "last-modified",
                    "accept-ranges", "content-type")
"""Headers of the holding node's answer that the caller gets."""


class DoorCluster:
    """The door's part in a holdings cluster.

    Args:
        door: the door of this node.
        role: this node's cluster role (holdings, not a fleet).
    """

    def __init__(self, door: S3Door, role: ClusterRole) -> None:
        self.door = door
        self.role = role
        self._clients: dict[tuple[str, str], Any] = {}
        self._lock = threading.Lock()

    @staticmethod
    def of(door: S3Door) -> DoorCluster | NoHoldings:
        """The door's part as its server's role says: a node of a holdings cluster's, else
        :class:`NoHoldings`."""
        role = door.server.role.holdings_role()
        return NoHoldings(door) if role is None else DoorCluster(door, role)

    def buckets(self) -> list[str]:
        """The buckets some node holds."""
        return sorted({h.bucket for h in self.role.cluster.holdings})

    def knows_bucket(self, bucket: str) -> bool:
        """Whether some node holds keys of ``bucket``."""
        return bool(self.role.cluster.holdings_under(bucket, ""))

    # ------------------------------------------------------------------ listings
    def entries(self, call: Call, bucket: str, prefix: str) -> Iterator[Entry]:
        """Every node's objects of ``bucket`` under ``prefix``, in key order, a page at a
        time, as this node's ``ListObjects`` action merges the nodes' (called in process)."""
        context = self.door.call_context(call)
        after: str | None = ""
        while after is not None:
            request = {"bucket": bucket, "prefix": prefix, "start_after": after,
                       "max_keys": _PAGE}
            try:
                document = list_page(self.door.server, self.role, {}, context, request)
            except PEER_ERRORS as exc:  # another node's answer
                raise peer_error(exc) from None
            page = json.loads(document)
            for obj in page["objects"]:
                yield Entry(obj["key"], int(obj["size"]), int(obj["mtime_ns"]))
            after = page.get("next_start_after")

    # ------------------------------------------------------------------ GET and HEAD
    async def forward(self, call: Call) -> Response | None:
        """The holding node's answer to a GET or HEAD of an object this node does not hold
        (None: this node holds it, or nobody does and the catalog answers)."""
        holdings = self.role.holdings(call.bucket, call.key)
        if not holdings or self.role.me in holdings[0].nodes:
            return None
        nodes = [n for n in self.role.peers.live_first(holdings[0].nodes)
                 if self.role.cluster.node(n).s3 is not None]
        if not nodes:
            raise S3HttpError("ServiceUnavailable", f"{call.bucket}/{call.key} is held by "
                              f"node(s) {', '.join(holdings[0].nodes)}, whose S3 door the "
                              "cluster file does not name (nodes[].s3)")
        failures: list[str] = []
        for node in nodes:
            try:
                return await run_in_threadpool(self._fetch, call, node)
            except _Unreachable as exc:
                failures.append(f"{node}: {exc}")
        raise S3HttpError("ServiceUnavailable", f"no node holding {call.bucket}/{call.key} "
                          f"answered ({'; '.join(failures)})")

    def _fetch(self, call: Call, node: str) -> Response:
        import botocore.exceptions

        client = self._client(call, node)
        arguments: dict[str, Any] = {"Bucket": call.bucket, "Key": call.key}
        for header, name in _FORWARDED.items():
            value = call.headers.get(header)
            if value is not None and name.endswith("Since"):
                try:
                    arguments[name] = email.utils.parsedate_to_datetime(value)
                except (TypeError, ValueError):
                    continue  # S3 ignores a date it cannot read
            elif value is not None:
                arguments[name] = value
        method = client.head_object if call.request.method == "HEAD" else client.get_object
        try:
            answer = method(**arguments)
        except botocore.exceptions.ClientError as exc:
            status = int(exc.response["ResponseMetadata"]["HTTPStatusCode"])
            if status == 304:
                return Response(status_code=304, headers=_headers(exc.response))
            error = exc.response.get("Error", {})
            raise S3HttpError(str(error.get("Code") or status),
                              str(error.get("Message") or f"node {node} answered {status}"),
                              status=status) from None
        except (botocore.exceptions.BotoCoreError, OSError) as exc:
            raise _Unreachable(type(exc).__name__) from None
        status = int(answer["ResponseMetadata"]["HTTPStatusCode"])
        headers = _headers(answer)
        if call.request.method == "HEAD":
            return Response(b"", status_code=status, headers=headers)
        return StreamingResponse(answer["Body"].iter_chunks(1 << 20), status_code=status,
                                 headers=headers)

    def _client(self, call: Call, node: str) -> Any:
        """A boto3 client of ``node``'s door signing as the caller (any key when the
        cluster runs without users)."""
        import boto3
        from botocore.config import Config

        key, secret = "flight-select", "flight-select"
        if call.user is not None:
            key, secret = next(iter(call.user.access_keys.items()))
        with self._lock:
            client = self._clients.get((node, key))
            if client is None:
                timeout = self.role.cluster.peer_timeout_s
                client = boto3.client(
                    "s3", endpoint_url=self.role.cluster.node(node).s3, region_name="us-east-1",
                    aws_access_key_id=key, aws_secret_access_key=secret,
                    config=Config(s3={"addressing_style": "path"}, connect_timeout=timeout,
                                  read_timeout=max(timeout, 60.0),
                                  retries={"max_attempts": 1},
                                  response_checksum_validation="when_required"))
                self._clients[(node, key)] = client
        return client


class NoHoldings:
    """The door's part on a single server or a fleet node: no object lives on another node,
    so every bucket is this node's catalog's and every call is answered here."""

    def __init__(self, door: S3Door) -> None:
        self.door = door

    @staticmethod
    def buckets() -> list[str]:
        return []

    @staticmethod
    def knows_bucket(bucket: str) -> bool:  # noqa: ARG004 - DoorCluster.knows_bucket
        return False

    def entries(self, call: Call, bucket: str, prefix: str) -> Iterator[Entry]:  # noqa: ARG002 - DoorCluster.entries
        """This node's catalog's objects of ``bucket`` under ``prefix``, in key order."""
        for obj in self.door.server.catalog.objects(bucket, prefix):
            yield Entry(obj.key, obj.size, obj.mtime_ns, obj.etag)

    @staticmethod
    async def forward(call: Call) -> Response | None:  # noqa: ARG004 - DoorCluster.forward
        return None  # this node answers


class _Unreachable(Exception):
    """A node's door did not answer (the next node is tried)."""


def _headers(answer: Any) -> dict[str, str]:
    sent = answer.get("ResponseMetadata", {}).get("HTTPHeaders", {})
    return {name: sent[name] for name in _ANSWERED if name in sent}
