"""Buckets of an S3-compatible object store (AWS S3, Ceph RGW, SeaweedFS, MinIO, RustFS, ...).

``S3Buckets(connection)`` serves every bucket the credentials can list (``--data s3://``);
``S3Buckets(connection, bucket=..., prefix=...)`` serves one bucket, or the keys under a prefix
of it (``--data s3://BUCKET/PREFIX``), under the bucket's name or one given
(``--data NAME=s3://...``). Endpoint, region and credentials follow the conventions of the AWS
SDKs (``AWS_ENDPOINT_URL_S3``/``AWS_ENDPOINT_URL``, ``AWS_ACCESS_KEY_ID``,
``AWS_SECRET_ACCESS_KEY``, ``AWS_SESSION_TOKEN``, ``AWS_REGION``, ``AWS_PROFILE`` and the
shared config files), resolved once by botocore; ``serve`` flags override the endpoint, region
and profile. Secrets are never logged or put in an error.

Three well-kept clients read a store, each where it fits, and no HTTP is written here:

| who | reads with | for |
|---|---|---|
| listings, HEAD, config, writes, the reference readers' streams | boto3 | structured errors, retries with back-off, ``If-Match`` on every GET |
| Parquet footers and row groups (the reference reader) | ``pyarrow.fs.S3FileSystem`` | positioned, concurrent ranged reads in C++ |
| DataFusion's own CSV and Parquet readers | ``datafusion.object_store.AmazonS3`` | DataFusion's ranged reads |

An object's version is ``etag:<ETag>:<size>:<last-modified ns>``. Every stream this module
opens is a ranged GET with ``If-Match: <ETag>``, so a rewrite between planning and reading, or
while reading, answers ``PreconditionFailed`` instead of bytes of another version; DataFusion's
and pyarrow's reads are checked against the version before and after (the engine's streams).

Bounds: botocore's standard retry mode (``max_attempts`` tries, exponential back-off with
jitter, on throttling such as 503 ``SlowDown`` and on connection errors; never on 403), a
response body cut off mid-way asked for again from where it broke (``max_attempts`` tries a
window; pyarrow's S3 client asks for the range again, ``max_attempts`` tries; DataFusion's
object store retries with its own bound, 10 retries, which datafusion-python does not expose),
``connect_timeout_s`` and ``read_timeout_s`` per request; a store still failing after them is
``ServiceUnavailable`` naming the endpoint.
"""

from __future__ import annotations

import hashlib
import io
import logging
import re
import tempfile
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, BinaryIO, TypeVar

import pyarrow as pa

from flight_storage import telemetry
from flight_storage.errors import (
    AccessDeniedError,
    InvalidRequestError,
    ObjectNotFoundError,
    StaleTicketError,
    StorageError,
    StoreUnavailableError,
)
from flight_storage.storage.folder_store import BUCKET_CONFIG, check_name
from flight_storage.storage.object_cache import ObjectCache
from flight_storage.storage.s3_commits import S3CommitRecords
from flight_storage.storage.store_errors import body_errors, store_error
from flight_storage.storage.stores import StoredObject

if TYPE_CHECKING:
    from datafusion import SessionContext

log = logging.getLogger(__name__)
T = TypeVar("T")

_S3_BUCKET_NAME = re.compile(r"[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]")
"""S3's bucket naming rule (3-63 lower-case letters, digits, dots and hyphens)."""

_STORE_TTL_S = 300.0
"""DataFusion's object store of a bucket is made again after this long (fresh credentials)."""

_CONFIG_BYTES = 1 << 20
"""The largest bucket configuration object read."""

STORE_TEMPORARIES = "flight-select-stores"
"""The folder, under the system's temporary folder, of object-store buckets' temporaries."""

_CONFIG_TTL_S = 1.0
"""A bucket's configuration is fetched at most once a second (a query's GetFlightInfo and its
DoGets read it within one)."""


@dataclass(frozen=True)
class S3Settings:
    """How to reach an object store; what is None comes from the AWS conventions.

    Attributes:
        endpoint_url: the store's URL (``http://127.0.0.1:8333``); None: botocore's
            (``AWS_ENDPOINT_URL_S3``, ``AWS_ENDPOINT_URL``, the profile, or AWS itself).
        region: the signing region; None: ``AWS_REGION``, the profile, or ``us-east-1``.
        profile: a profile of the shared AWS config files; None: ``AWS_PROFILE`` or default.
        connect_timeout_s: seconds to connect, per try.
        read_timeout_s: seconds to wait for bytes, per try.
        max_attempts: tries of one request (throttling and connection errors are retried), and
            of one ranged read whose body is cut off mid-way (each from the byte it broke at,
            :class:`RangedReader`; pyarrow's and DataFusion's clients retry a cut range too).
        cache_bytes: keep copies of the objects read on local disk, up to this many bytes
            (0: none; ``object_cache.py``).
        cache_dir: where (None: the system's temporary folder).
    """

    endpoint_url: str | None = None
    region: str | None = None
    profile: str | None = None
    connect_timeout_s: float = 5.0
    read_timeout_s: float = 30.0
    max_attempts: int = 4
    cache_bytes: int = 0
    cache_dir: Path | None = None


@dataclass(frozen=True)
class S3Registration:
    """DataFusion's object store for one bucket, as values: calling it registers the store in
    a session; picklable, so an engine worker process registers it itself. Holds credentials:
    never logged (``repr`` leaves them out)."""

    bucket: str
    region: str
    endpoint: str
    access_key_id: str | None = field(default=None, repr=False)
    secret_access_key: str | None = field(default=None, repr=False)
    session_token: str | None = field(default=None, repr=False)

    def __call__(self, ctx: SessionContext) -> None:
        from datafusion.object_store import AmazonS3

        store = AmazonS3(
            bucket_name=self.bucket, region=self.region,
            access_key_id=self.access_key_id, secret_access_key=self.secret_access_key,
            session_token=self.session_token, endpoint=self.endpoint,
            allow_http=self.endpoint.startswith("http://"))
        ctx.register_object_store("s3://", store, self.bucket)


class S3Connection:
    """One object store: the boto3 client, and the credentials for DataFusion and pyarrow.

    Raises:
        InvalidRequestError: the profile does not exist, or boto3 is not installed.
    """

    def __init__(self, settings: S3Settings) -> None:
        try:
            import boto3
            import botocore.config
            import botocore.exceptions
        except ImportError:  # pragma: no cover - the s3 extra is part of every install we ship
            raise InvalidRequestError(
                "object-store buckets need boto3: pip install 'flight-select[s3]'") from None
        try:
            session = boto3.Session(profile_name=settings.profile)
        except botocore.exceptions.ProfileNotFound as exc:
            raise InvalidRequestError(f"--store-profile: {exc}") from None
        config = botocore.config.Config(
            s3={"addressing_style": "path"},
            retries={"mode": "standard", "max_attempts": settings.max_attempts},
            connect_timeout=settings.connect_timeout_s,
            read_timeout=settings.read_timeout_s,
            max_pool_connections=64,
            # a PutObject body is a file we finished; no aws-chunked framing needed
            request_checksum_calculation="when_required",
            response_checksum_validation="when_required",
        )
        self.settings = settings
        self._session = session
        self.client: Any = session.client("s3", endpoint_url=settings.endpoint_url,
                                          region_name=settings.region or None, config=config)
        self.client.meta.events.register("response-received.s3", _count_response)
        self.endpoint: str = self.client.meta.endpoint_url
        self.region: str = self.client.meta.region_name or "us-east-1"
        self._lock = threading.Lock()
        self._pyarrow: Any = None
        self._created: dict[str, int] = {}
        self.cache = (ObjectCache(settings.cache_dir or Path(tempfile.gettempdir()),
                                  settings.cache_bytes) if settings.cache_bytes > 0 else None)

    @property
    def description(self) -> str:
        """The endpoint (what errors and logs name; never a credential)."""
        return self.endpoint

    def frozen_credentials(self) -> Any:
        """The credentials as they are now (botocore's ``ReadOnlyCredentials``: ``access_key``,
        ``secret_key``, ``token``), or None when there are none; for clients built per use
        (DataFusion's, pyarrow's, pyiceberg's). Never logged."""
        credentials = self._session.get_credentials()
        return credentials.get_frozen_credentials() if credentials is not None else None

    def bucket_created_ns(self, bucket: str) -> int:
        """The store's CreationDate of ``bucket`` (one ListBuckets answer, kept), 0 when the
        store does not list it."""
        with self._lock:
            known = self._created.get(bucket)
        if known is not None:
            return known
        answer = self.call("ListBuckets", lambda: self.client.list_buckets())
        listed = {b["Name"]: _ns(b.get("CreationDate")) for b in answer.get("Buckets", [])}
        with self._lock:
            self._created.update(listed)
            self._created.setdefault(bucket, 0)
        return listed.get(bucket, 0)

    def registration(self, bucket: str) -> S3Registration:
        """DataFusion's object store for ``bucket`` as values (fresh credentials each time:
        temporary ones are refreshed by botocore)."""
        frozen = self.frozen_credentials()
        return S3Registration(
            bucket=bucket, region=self.region, endpoint=self.endpoint,
            access_key_id=frozen.access_key if frozen else None,
            secret_access_key=frozen.secret_key if frozen else None,
            session_token=frozen.token if frozen else None)

    def pyarrow_fs(self) -> Any:
        """pyarrow's S3 file system on this store (built once)."""
        from pyarrow import fs

        with self._lock:
            if self._pyarrow is None:
                frozen = self.frozen_credentials()
                scheme, _, host = self.endpoint.partition("://")
                self._pyarrow = fs.S3FileSystem(
                    access_key=frozen.access_key if frozen else None,
                    secret_key=frozen.secret_key if frozen else None,
                    session_token=frozen.token if frozen else None,
                    anonymous=frozen is None, region=self.region, scheme=scheme,
                    endpoint_override=host.rstrip("/"),
                    connect_timeout=self.settings.connect_timeout_s,
                    request_timeout=self.settings.read_timeout_s,
                    retry_strategy=fs.AwsStandardS3RetryStrategy(
                        max_attempts=self.settings.max_attempts))
            return self._pyarrow

    def call(self, what: str, request: Callable[[], T]) -> T:
        """``request()`` with the store's failures as our errors (see :func:`store_error`)."""
        try:
            return request()
        except StorageError:
            raise
        except Exception as exc:
            raise store_error(exc, what, self.endpoint) from None


def _version(etag: str, size: int, mtime_ns: int) -> str:
    return f"etag:{etag}:{size}:{mtime_ns}"


def _ns(moment: Any) -> int:
    return int(moment.timestamp() * 1_000_000_000) if moment is not None else 0


_FIRST_WINDOW = 64 << 10
_LARGEST_WINDOW = 16 << 20


class RangedReader(io.RawIOBase):
    """A seekable stream of one object version, read with ranged GETs (``If-Match: <ETag>``)
    of growing windows: 64 KiB first (a header peek costs one small request, whatever the
    object's size; an open-ended GET would have the store send megabytes into socket buffers),
    doubling up to 16 MiB while the reader keeps reading; a seek starts again small.

    A window's body cut off mid-way (a connection dropped by the store, a proxy or a load
    balancer: botocore retries requests, not bodies) is asked for again from the byte it
    broke at, as the SDKs' downloaders do: a window is tried at most ``max_attempts`` times
    (:class:`S3Settings`), then the read fails ``ServiceUnavailable`` naming the object, the
    byte and the tries."""

    def __init__(self, bucket: S3Bucket, obj: StoredObject, start: int = 0) -> None:
        self._bucket = bucket
        self._obj = obj
        self._pos = start
        self._body: Any = None
        self._window = _FIRST_WINDOW
        self._body_end = start
        self._tries = 0

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def tell(self) -> int:
        return self._pos

    def seek(self, offset: int, whence: int = io.SEEK_SET) -> int:
        target = {io.SEEK_SET: offset, io.SEEK_CUR: self._pos + offset,
                  io.SEEK_END: self._obj.size + offset}[whence]
        if target != self._pos:
            self._drop()
            self._pos = max(0, target)
            self._window = _FIRST_WINDOW
        return self._pos

    def readinto(self, buffer: Any) -> int:
        if self._pos >= self._obj.size or not len(buffer):
            return 0
        if self._body is not None and self._pos >= self._body_end:
            self._drop()
            self._window = min(self._window * 2, _LARGEST_WINDOW)
        if self._body is None:
            self._body_end = min(self._obj.size, self._pos + max(self._window, len(buffer)))
            self._body = self._bucket.get_body(self._obj, self._pos, self._body_end)
            self._tries = 1
        data = self._read(min(len(buffer), self._body_end - self._pos))
        n = len(data)
        buffer[:n] = data
        self._pos += n
        return n

    def _read(self, wanted: int) -> bytes:
        """Up to ``wanted`` bytes of the open window (at least one), resuming a cut body."""
        what = f"GetObject {self._bucket.name}/{self._obj.key}"
        while True:
            try:
                data: bytes = self._body.read(wanted)
            except body_errors() as exc:
                cause = type(exc).__name__
            except Exception as exc:
                raise store_error(exc, what, self._bucket.connection.endpoint) from None
            else:
                if data:
                    return data
                cause = "the body ended early"
            self._resume(what, cause)

    def _resume(self, what: str, cause: str) -> None:
        """A new GET of the window's rest, or ``ServiceUnavailable`` after the last try."""
        self._drop()
        attempts = self._bucket.connection.settings.max_attempts
        where = f"byte {self._pos} of {self._obj.size}"
        if self._tries >= attempts:
            raise StoreUnavailableError(
                f"{what}: the object store at {self._bucket.connection.endpoint} cut the "
                f"object off at {where} ({cause}) on each of {self._tries} tries (a body is "
                "asked for again from where it broke, --store-max-attempts times)")
        log.info("%s: body cut off at %s (%s): asking again from there (try %d of %d)",
                 what, where, cause, self._tries + 1, attempts)
        self._body = self._bucket.get_body(self._obj, self._pos, self._body_end)
        self._tries += 1

    def _drop(self) -> None:
        if self._body is not None:
            self._body.close()
            self._body = None

    def close(self) -> None:
        self._drop()
        super().close()


class S3Bucket:
    """One bucket (or the keys under a prefix of it) of an object store.

    Args:
        connection: the store.
        name: the bucket's name as clients see it.
        bucket: the store's bucket.
        prefix: keys of the store under this prefix are the objects (the prefix removed).
    """

    writable = True

    def __init__(self, connection: S3Connection, name: str, bucket: str, prefix: str = ""
                 ) -> None:
        self.connection = connection
        self.name = name
        self.bucket = bucket
        self.prefix = prefix
        self._config: tuple[float, str | None] | None = None
        self._config_lock = threading.Lock()

    @property
    def description(self) -> str:
        return f"s3://{self.bucket}/{self.prefix} at {self.connection.endpoint}"

    def _key(self, key: str) -> str:
        check_name("key", key)
        if any(part.startswith(".") for part in key.split("/")):
            raise ObjectNotFoundError(f"no such key: {self.name}/{key}")
        return self.prefix + key

    def _call(self, what: str, request: Callable[[], T]) -> T:
        return self.connection.call(what, request)

    # ------------------------------------------------------------------ reading
    def head(self, key: str) -> StoredObject:
        store_key = self._key(key)
        answer = self._call(f"HeadObject {self.name}/{key}", lambda: self.connection.client
                            .head_object(Bucket=self.bucket, Key=store_key))
        etag = answer["ETag"]
        size = int(answer["ContentLength"])
        mtime = _ns(answer.get("LastModified"))
        return StoredObject(key, size, mtime, _version(etag, size, mtime), etag)

    def list(self, prefix: str = "") -> Iterator[StoredObject]:
        if prefix and ("\x00" in prefix or prefix.startswith("/") or ".." in prefix.split("/")):
            raise AccessDeniedError(f"invalid prefix {prefix!r}")
        pages = self.connection.client.get_paginator("list_objects_v2").paginate(
            Bucket=self.bucket, Prefix=self.prefix + prefix)
        iterator = iter(pages)
        while True:
            page = self._call(f"ListObjectsV2 {self.name}/{prefix}",
                              lambda: next(iterator, None))
            if page is None:
                return
            for entry in page.get("Contents", []):
                key = entry["Key"][len(self.prefix):]
                if not key or key.endswith("/") or any(
                        part.startswith(".") or part in ("", "..") for part in key.split("/")):
                    continue  # folder markers, dotfiles (the bucket configuration), odd names
                size, mtime = int(entry["Size"]), _ns(entry.get("LastModified"))
                etag = entry["ETag"]
                yield StoredObject(key, size, mtime, _version(etag, size, mtime), etag)

    def get_body(self, obj: StoredObject, start: int, stop: int) -> Any:
        """The streaming body of bytes ``[start, stop)`` of ``obj``, only if it is still
        ``obj``'s version (``PreconditionFailed`` otherwise)."""
        arguments: dict[str, Any] = {"Bucket": self.bucket, "Key": self._key(obj.key),
                                     "Range": f"bytes={start}-{stop - 1}"}
        if obj.etag is not None:
            arguments["IfMatch"] = obj.etag
        answer = self._call(f"GetObject {self.name}/{obj.key}",
                            lambda: self.connection.client.get_object(**arguments))
        return answer["Body"]

    def _local_copy(self, obj: StoredObject) -> Path | None:
        """The cached copy of ``obj``'s version, or None (and a copy asked for)."""
        cache = self.connection.cache
        if cache is None:
            return None
        name = ObjectCache.name(self.bucket, self._key(obj.key), obj.version)
        path = cache.path(name)
        if path is None:
            cache.request(name, obj.size, lambda: self._ranged(obj, 0, 8 << 20),
                          f"{self.name}/{obj.key}")
        return path

    def _ranged(self, obj: StoredObject, start: int, buffer: int) -> BinaryIO:
        return io.BufferedReader(RangedReader(self, obj, start), buffer)

    def open(self, obj: StoredObject, start: int = 0) -> BinaryIO:
        copy = self._local_copy(obj)
        if copy is not None:
            stream = open(copy, "rb")  # noqa: SIM115 - the caller closes it
            stream.seek(start)
            return stream
        # small reads stay small (a header peek); a scan's large reads pass straight through
        return self._ranged(obj, start, 64 << 10)

    def open_random_access(self, obj: StoredObject) -> pa.NativeFile:
        copy = self._local_copy(obj)
        if copy is not None:
            return pa.OSFile(str(copy))
        current = self.head(obj.key)
        if current.version != obj.version:
            raise StaleTicketError(
                f"{self.name}/{obj.key} changed after the query was planned; plan it again",
                code="PreconditionFailed")
        path = f"{self.bucket}/{self._key(obj.key)}"
        return self._call(f"GetObject {self.name}/{obj.key}",
                          lambda: self.connection.pyarrow_fs().open_input_file(path))

    def datafusion_url(self, obj: StoredObject) -> str:
        copy = self._local_copy(obj)
        return str(copy) if copy is not None else f"s3://{self.bucket}/{self._key(obj.key)}"

    def register(self, ctx: SessionContext) -> None:
        self.portable_register()(ctx)

    def portable_register(self) -> S3Registration:
        return self.connection.registration(self.bucket)

    def config_text(self) -> str | None:
        with self._config_lock:
            if self._config is not None and time.monotonic() - self._config[0] < _CONFIG_TTL_S:
                return self._config[1]
        text = self._fetch_config()
        with self._config_lock:
            self._config = (time.monotonic(), text)
        return text

    def _fetch_config(self) -> str | None:
        """The configuration object's text, read whole (a body cut off mid-way is asked for
        again, ``max_attempts`` tries: a part of it would read as another configuration)."""
        what = f"GetObject {self.name}/{BUCKET_CONFIG}"
        attempts = self.connection.settings.max_attempts
        for attempt in range(1, attempts + 1):
            try:
                answer = self._call(what, lambda: self.connection.client.get_object(
                    Bucket=self.bucket, Key=self.prefix + BUCKET_CONFIG))
            except ObjectNotFoundError as exc:
                if exc.code == "NoSuchBucket":
                    raise
                return None
            if int(answer.get("ContentLength") or 0) > _CONFIG_BYTES:
                answer["Body"].close()
                raise InvalidRequestError(f"{self.name}/{BUCKET_CONFIG}: a bucket configuration "
                                          f"is at most {_CONFIG_BYTES} bytes")
            body = answer["Body"]
            try:  # read() whole checks the Content-Length: a cut body raises
                return str(body.read().decode("utf-8", errors="replace"))
            except body_errors() as exc:
                if attempt == attempts:
                    raise StoreUnavailableError(
                        f"{what}: the object store at {self.connection.endpoint} cut the "
                        f"body off on each of {attempts} tries ({type(exc).__name__})") from None
            finally:
                body.close()
        raise AssertionError("unreachable: the last try returns or raises")

    def created_ns(self) -> int:
        try:
            return self.connection.bucket_created_ns(self.bucket)
        except StorageError:  # a store that refuses ListBuckets to these credentials
            return 0

    # ------------------------------------------------------------------ writing
    def temporary_folder(self) -> Path | None:
        """A folder of this bucket's own under the system's temporary folder (``
        flight-select-stores/<digest of endpoint, bucket and prefix>``): what is staged for
        one bucket is never within reach of another's."""
        where = f"{self.connection.endpoint}\x00{self.bucket}\x00{self.prefix}"
        folder = (Path(tempfile.gettempdir()) / STORE_TEMPORARIES
                  / hashlib.sha256(where.encode()).hexdigest()[:24])
        folder.mkdir(parents=True, exist_ok=True)
        return folder

    def put_file(self, key: str, file: Path, size: int) -> StoredObject:  # noqa: ARG002 - BucketStore.put_file
        """Upload the finished ``file`` (multipart when large: boto3's transfer manager);
        the store makes it visible whole, and it is removed here either way."""
        store_key = self._key(key)
        try:
            self._call(f"PutObject {self.name}/{key}", lambda: self.connection.client
                       .upload_file(str(file), self.bucket, store_key))
        finally:
            file.unlink(missing_ok=True)
        return self.head(key)

    def copy_in(self, key: str, source: object, obj: StoredObject) -> StoredObject | None:
        """A copy inside the object store (CopyObject, ``CopySourceIfMatch`` the source's
        ETag; past 5 GiB boto3's multipart copy) when ``source`` is a bucket of the same
        connection; None otherwise."""
        if not isinstance(source, S3Bucket) or source.connection is not self.connection:
            return None
        from boto3.s3.transfer import TransferConfig

        copy_source = {"Bucket": source.bucket, "Key": source._key(obj.key)}
        extra = {"CopySourceIfMatch": obj.etag} if obj.etag is not None else {}
        store_key = self._key(key)
        self._call(f"CopyObject {source.name}/{obj.key} to {self.name}/{key}",
                   lambda: self.connection.client.copy(
                       copy_source, self.bucket, store_key, ExtraArgs=extra,
                       Config=TransferConfig(multipart_threshold=5 << 30)))
        return self.head(key)

    # ------------------------------------------------------------------ commit records
    def commit_generations(self, table: str) -> Sequence[int]:
        return S3CommitRecords(self).generations(table)

    def read_commit(self, table: str, generation: int) -> bytes | None:
        return S3CommitRecords(self).read(table, generation)

    def create_commit(self, table: str, generation: int, body: bytes) -> bool:
        return S3CommitRecords(self).create(table, generation, body)

    def delete_commit(self, table: str, generation: int) -> None:
        S3CommitRecords(self).delete(table, generation)

    def delete(self, key: str) -> None:
        store_key = self._key(key)
        self._call(f"DeleteObject {self.name}/{key}",
                   lambda: self.connection.client.delete_object(Bucket=self.bucket,
                                                                Key=store_key))


class S3Buckets:
    """The buckets of one object store: all the credentials can list, or one.

    Args:
        connection: the store.
        bucket: serve only this bucket (None: every bucket ListBuckets shows).
        prefix: with ``bucket``, only the keys under this prefix.
        name: with ``bucket``, the name clients see (default: the bucket's).
    """

    def __init__(self, connection: S3Connection, *, bucket: str | None = None,
                 prefix: str = "", name: str | None = None) -> None:
        if prefix and not prefix.endswith("/"):
            prefix += "/"
        self.connection = connection
        self._bucket = bucket
        self._prefix = prefix
        self._name = name or bucket

    @property
    def description(self) -> str:
        where = f"s3://{self._bucket or ''}" + (f"/{self._prefix}" if self._prefix else "")
        return f"{where} at {self.connection.endpoint}"

    def names(self) -> list[str]:
        if self._name is not None:
            return [self._name]
        answer = self.connection.call(
            "ListBuckets", lambda: self.connection.client.list_buckets())
        return sorted(b["Name"] for b in answer.get("Buckets", []))

    def bucket(self, name: str) -> S3Bucket | None:
        if self._name is not None:
            if name != self._name:
                return None
            assert self._bucket is not None
            return S3Bucket(self.connection, name, self._bucket, self._prefix)
        if not _S3_BUCKET_NAME.fullmatch(name):
            return None
        # not listed first (a ListBuckets per query): a bucket that does not exist answers
        # NoSuchBucket from the store at its first use
        return S3Bucket(self.connection, name, name)

    @property
    def open_ended(self) -> bool:
        """Serves whatever bucket the store has (looked up after the named locations)."""
        return self._name is None

    def create_bucket(self, name: str) -> None:
        if self._name is not None:
            raise InvalidRequestError(f"{self.description} serves one bucket; it holds no others")
        self.connection.call(f"CreateBucket {name}",
                             lambda: self.connection.client.create_bucket(Bucket=name))

    def delete_bucket(self, name: str) -> None:
        if self._name is not None:
            raise InvalidRequestError(f"{self.description} is served as a bucket; it cannot be "
                                      "deleted through the server")
        bucket = S3Bucket(self.connection, name, name)
        if next(bucket.list(), None) is None:  # no object: its tables' records go with it
            S3CommitRecords(bucket).drop_all()
        self.connection.call(f"DeleteBucket {name}",
                             lambda: self.connection.client.delete_bucket(Bucket=name))


def _count_response(event_name: str, response_dict: Any = None, exception: Any = None,
                    **_details: Any) -> None:
    """Count one HTTP attempt of a boto3 call (botocore's ``response-received`` event fires
    per attempt, retries included) by operation and result."""
    operation = event_name.rsplit(".", 1)[-1]
    status = int((response_dict or {}).get("status_code") or 0)
    result = ("ok" if exception is None and 0 < status < 400
              else "client_error" if exception is None and 400 <= status < 500
              else "server_error")
    telemetry.STORE_REQUESTS.labels(telemetry.bounded_code(operation), result).inc()
