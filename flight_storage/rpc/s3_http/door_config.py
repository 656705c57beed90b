"""How the S3 door runs: its address, bounds and default flavour, one owner per default.

A leaf module (the standard library and the flavour list only), so ``flight-select serve``
reads its ``--s3-*`` defaults from here without loading the HTTP stack.
"""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass
from pathlib import Path

from select_dialect.flavors import FLAVOR_NAMES, S3_API_DEFAULT


@dataclass(frozen=True)
class S3DoorConfig:
    """How the S3 door runs; every resource a client can make it spend has a bound.

    Attributes:
        host, port: where it listens (loopback by default; 0 picks a free port).
        writable: serve the writing calls (CreateBucket, PutObject, CopyObject, multipart
            uploads, DeleteObject(s), DeleteBucket).
        max_request_bytes: largest request document: SelectObjectContent, DeleteObjects,
            CompleteMultipartUpload (``MaxMessageLengthExceeded``).
        max_object_bytes: largest PutObject or UploadPart body, streamed to disk
            (``EntityTooLarge``).
        max_upload_bytes: largest object a multipart upload or a copy makes
            (``EntityTooLarge``; a copy source past it is ``InvalidRequest``, as S3 answers
            past its 5 GB).
        staging_bytes: parts of every multipart upload in progress together, on disk
            (``SlowDown`` while full).
        max_uploads: multipart uploads in progress at once (``SlowDown``).
        upload_expiry_s: an upload not completed this long after it started is removed
            with its parts (``NoSuchUpload``).
        staging_dir: where parts wait for CompleteMultipartUpload; None: a temporary folder
            of this process, removed when it stops (a folder given keeps uploads across
            restarts).
        body_timeout_s: time a client has to send its whole body (``RequestTimeout``).
        header_timeout_s: time a connection has, from opening or from the end of its previous
            answer, to send a complete request head; then it is closed.
        max_connections: connections and calls at once; more are answered 503 by uvicorn.
        keepalive_timeout_s: idle keep-alive connections are closed after this.
        max_event_bytes: largest payload of one ``Records`` event.
        flavor: the flavour of a SelectObjectContent request that names none in the
            ``x-flight-select-flavor`` header: ``aws``, since the door speaks AWS's API.
    """

    host: str = "127.0.0.1"
    port: int = 0
    writable: bool = False
    max_request_bytes: int = 256 * 1024
    max_object_bytes: int = 64 << 20
    max_upload_bytes: int = 5 << 30
    staging_bytes: int = 8 << 30
    max_uploads: int = 1000
    upload_expiry_s: float = 24 * 3600.0
    staging_dir: Path | None = None
    body_timeout_s: float = 60.0
    header_timeout_s: float = 10.0
    max_connections: int = 64
    keepalive_timeout_s: float = 5.0
    max_event_bytes: int = 256 * 1024
    flavor: str = S3_API_DEFAULT

    def refusal(self, *, authenticated: bool, allow_anonymous: bool,
                mutual_tls: bool = False) -> str | None:
        """Why the door must not start with these settings, or None."""
        if mutual_tls:
            # the door calls the Flight server as a client and holds no client certificate
            return "the S3 door cannot run beside mutual TLS (--tls-client-ca)"
        positive = {"max_request_bytes": self.max_request_bytes,
                    "max_object_bytes": self.max_object_bytes,
                    "max_upload_bytes": self.max_upload_bytes,
                    "staging_bytes": self.staging_bytes,
                    "max_uploads": self.max_uploads,
                    "upload_expiry_s": self.upload_expiry_s,
                    "body_timeout_s": self.body_timeout_s,
                    "header_timeout_s": self.header_timeout_s,
                    "max_connections": self.max_connections}
        bad = [name for name, value in positive.items() if value <= 0]
        if bad:
            return f"must be positive: {', '.join(bad)}"
        if self.flavor not in FLAVOR_NAMES:
            return f"unknown flavour {self.flavor!r}; one of {', '.join(FLAVOR_NAMES)}"
        if not (authenticated or allow_anonymous or _is_loopback(self.host)):
            return (f"refusing to serve {self.host} without authentication: pass --auth "
                    "USERS_FILE (or --allow-anonymous)")
        return None


def _is_loopback(host: str) -> bool:
    try:
        return host == "localhost" or ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False
