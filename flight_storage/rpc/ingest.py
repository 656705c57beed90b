"""Bulk ingest: ``DoPut(CommandStatementIngest)`` writes one Parquet object into a prefix table.

ADBC's ``cursor.adbc_ingest(table, data, mode=...)`` sends ``CommandStatementIngest`` and
streams Arrow batches. A table here is a prefix table of Parquet objects,
``"bucket"."schema/table/"``; one ingest writes **one** object, ``part-<time>-<random>.parquet``,
to a temporary file (beside a folder bucket's objects) that the bucket's store makes visible
whole (``BucketStore.put_file``: a rename, or one upload), so a reader sees all of an ingest
or none of it.

| mode (ADBC) | table absent | table present |
|---|---|---|
| ``create`` | created | ``TableAlreadyExists`` |
| ``append`` | ``NoSuchTable`` | appended, when the data's schema equals the table's (else ``SchemaMismatch`` naming the columns) |
| ``create_append`` | created | appended, schema checked |
| ``replace`` | created | the new object is stored, then the table's other objects are deleted |

Rules and bounds: the server must run ``--writable``; with ``--auth`` the user needs the
bucket's write right (``"write"`` in the users file, ``rpc/auth.py``); the Arrow bytes of one
ingest are bounded by ``--max-ingest-mb`` (``EntityTooLarge`` naming it); the work holds a
compute slot and the query timeout (``StreamPool.run_planning``). The target bucket and schema
are the command's ``catalog`` and ``schema``, or the session's (``rpc/sessions.py``).
Temporary tables and ingest inside a transaction are refused: each ingest commits on its own.

Staged ingest (the Spark writer, ``compute_client/spark_writer.py``): with the option
``flight-select.stage=true`` the object is kept in a staging file and the answer carries a
signed token (a second ``PutResult``, JSON ``{"staged": token}``); the action ``CommitIngest``
stores every staged object of a job, ``AbortIngest`` removes them. A staged file nobody
commits is removed after ``--ticket-max-age``. Hand-written: pyarrow.flight has no Flight SQL
server layer; pyarrow.parquet writes the objects.
"""

from __future__ import annotations

import base64
import contextlib
import hashlib
import hmac
import json
import os
import secrets
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final, Protocol, TypeVar

import pyarrow as pa
import pyarrow.flight as flight
import pyarrow.parquet as pq

from flight_storage.errors import (
    AccessDeniedError,
    InvalidRequestError,
    ObjectNotFoundError,
    ResourceLimitError,
    StoppedError,
)
from flight_storage.protocol import INGEST_JOB_OPTION, INGEST_STAGE_OPTION, Secret, pb
from flight_storage.rpc import sessions
from flight_storage.rpc.config import ServerConfig
from flight_storage.rpc.middleware import CallContext
from flight_storage.storage.catalog import Catalog, ObjectInfo
from flight_storage.storage.stores import BucketStore

_STAGED_PREFIX: Final = ".ingest-staged-"
_ABORTED_PREFIX: Final = ".ingest-aborted-"
_TEMP_PREFIX: Final = ".ingest-"
_DOMAIN: Final = b"flight-select staged ingest v1\x00"
_OPTIONS: Final = pb.CommandStatementIngest.TableDefinitionOptions
T = TypeVar("T")
_COMMIT_LOCK = threading.Lock()
"""Serialises the existence checks and stores of creates and replaces in this process."""


class IngestHost(Protocol):
    """What bulk ingest uses of the server."""

    config: ServerConfig
    catalog: Catalog
    secret: Secret
    session_cookies: sessions.SessionCookies

    def check_access(self, call: CallContext, bucket: str) -> None: ...

    def bounded(self, call: CallContext, what: str,
                work: Callable[[threading.Event], T]) -> T: ...


@dataclass(frozen=True)
class Target:
    """Where an ingest writes: ``bucket``/``prefix`` (the table, ending in ``/``)."""

    bucket: str
    prefix: str


def ingest(host: IngestHost, call: CallContext, command: Any,
           reader: flight.MetadataRecordBatchReader,
           writer: flight.FlightMetadataWriter) -> None:
    """Serve one ``DoPut(CommandStatementIngest)``: check, write, store, answer the count."""
    target = _target(host, call, command)
    stage = command.options.get(INGEST_STAGE_OPTION, "").lower() == "true"
    store = host.catalog.store(target.bucket)
    existing = _objects(host.catalog, target)
    schema = _check_mode(command, target, existing, reader.schema)

    def work(stop: threading.Event) -> tuple[Path, int, int]:
        return _write_parquet(store, reader, host.config.max_ingest_bytes, stop, schema)

    written, size, rows = host.bounded(call, "ingest", work)
    path: Path | None = written
    try:
        key = f"{target.prefix}part-{time.time_ns():020d}-{secrets.token_hex(4)}.parquet"
        if stage:
            job = _job(command.options.get(INGEST_JOB_OPTION, ""))
            token = _stage(host, call, target, key, written, size, job)
            path = None
            writer.write(pa.py_buffer(pb.DoPutUpdateResult(record_count=rows)
                                      .SerializeToString()))
            writer.write(pa.py_buffer(json.dumps({"staged": token}).encode()))
            return
        replace = (command.table_definition_options.if_exists
                   == _OPTIONS.TABLE_EXISTS_OPTION_REPLACE)
        with _COMMIT_LOCK:
            _check_mode(command, target, _objects(host.catalog, target), reader.schema)
            store.put_file(key, written, size)
            path = None
            if replace:
                _delete_others(store, _objects(host.catalog, target), {key})
    finally:
        if path is not None:
            path.unlink(missing_ok=True)
    writer.write(pa.py_buffer(pb.DoPutUpdateResult(record_count=rows).SerializeToString()))


def _target(host: IngestHost, call: CallContext, command: Any) -> Target:
    if not host.config.writable:
        raise AccessDeniedError("bulk ingest writes objects, and this server is read-only "
                                "(start it with --writable)", code="ReadOnly")
    if command.temporary:
        raise InvalidRequestError("temporary tables are not supported: every table is "
                                  "objects in a bucket", code="NotImplemented")
    if command.HasField("transaction_id"):
        raise InvalidRequestError("bulk ingest takes no part in transactions: each ingest "
                                  "commits on its own (send it without a transaction)",
                                  code="NotImplemented")
    session = sessions.current(host, call)
    bucket = command.catalog if command.HasField("catalog") else session.catalog
    schema = command.schema if command.HasField("schema") else session.schema or ""
    if not bucket:
        raise InvalidRequestError("name the bucket: the ingest's catalog (ADBC: "
                                  "adbc.ingest.target_catalog) or the session catalog",
                                  code="MissingObject")
    name = command.table.strip("/")
    if not name:
        raise InvalidRequestError("bulk ingest names no table")
    if schema and not schema.endswith("/"):
        schema += "/"
    host.check_access(call, bucket)
    if call.user is not None and not call.user.may_write(bucket):
        raise AccessDeniedError(f"user {call.user.name} may not write bucket {bucket} "
                                '(users file: "write")')
    return Target(bucket, f"{schema}{name}/")


def _objects(catalog: Catalog, target: Target) -> list[ObjectInfo]:
    table = target.prefix[:-1]
    with contextlib.suppress(ObjectNotFoundError):
        catalog.object(target.bucket, table)
        raise InvalidRequestError(
            f"{target.bucket}/{table} is an object; ingest writes the prefix table {table}/ "
            "and a one-part name would then be ambiguous", code="AmbiguousTable")
    return list(catalog.objects(target.bucket, target.prefix))


def _check_mode(command: Any, target: Target, existing: list[ObjectInfo],
                schema: pa.Schema) -> pa.Schema:
    """Refuse what the mode refuses; the schema the data is written with (an append's: the
    table's, when every column of the data casts to it without loss)."""
    options = command.table_definition_options
    where = f"{target.bucket}/{target.prefix}"
    if not existing:
        if options.if_not_exist != _OPTIONS.TABLE_NOT_EXIST_OPTION_CREATE:
            raise ObjectNotFoundError(f"table {where} does not exist (mode append needs it)",
                                      code="NoSuchTable")
        return schema
    if options.if_exists == _OPTIONS.TABLE_EXISTS_OPTION_APPEND:
        return _check_schema(where, existing[0], schema)
    if options.if_exists != _OPTIONS.TABLE_EXISTS_OPTION_REPLACE:
        raise InvalidRequestError(f"table {where} already exists (mode create); append or "
                                  "replace it", code="TableAlreadyExists")
    return schema


def _lossless(data: pa.DataType, table: pa.DataType) -> bool:
    """Whether every value of ``data`` casts to ``table`` exactly (a finer timestamp unit in
    the same zone, a wider integer of the same sign, a wider float); a value outside the
    finer unit's range is refused when the batch is cast."""
    if pa.types.is_timestamp(data) and pa.types.is_timestamp(table):
        units = ("s", "ms", "us", "ns")
        return bool(data.tz == table.tz) and units.index(data.unit) <= units.index(table.unit)
    for same_kind in (pa.types.is_signed_integer, pa.types.is_unsigned_integer,
                      pa.types.is_floating):
        if same_kind(data) and same_kind(table):
            return bool(data.bit_width <= table.bit_width)
    return False


def _describe(field: pa.Field) -> str:
    return f"{field.name}: {field.type}" + ("" if field.nullable else " not null")


def _check_schema(where: str, first: ObjectInfo, schema: pa.Schema) -> pa.Schema:
    if first.format != "parquet":
        raise InvalidRequestError(f"table {where} holds {first.key}, not Parquet: ingest "
                                  "appends only to tables of Parquet objects")
    table = pq.ParquetFile(first.store.open_random_access(first.stored)).schema_arrow
    ours = pa.schema([f.remove_metadata() for f in schema]).remove_metadata()
    theirs = pa.schema([f.remove_metadata() for f in table]).remove_metadata()
    if ours.equals(theirs):
        return schema
    problems = []
    missing = [_describe(f) for f in theirs if f.name not in ours.names]
    if missing:
        problems.append(f"the data lacks the table's columns [{', '.join(missing)}]")
    extra = [_describe(f) for f in ours if f.name not in theirs.names]
    if extra:
        problems.append(f"the data has columns the table has not [{', '.join(extra)}]")
    differing = [
        f"{_describe(f)} where the table has {_describe(theirs.field(f.name))}"
        for f in ours if f.name in theirs.names and not _castable(f, theirs.field(f.name))]
    if differing:
        problems.append(f"column types differ: {'; '.join(differing)}")
    if not problems and ours.names == theirs.names:
        return theirs  # every column casts to the table's without loss
    if not problems:
        problems.append(f"the same columns in another order: the data has "
                        f"[{', '.join(ours.names)}], the table [{', '.join(theirs.names)}]")
    raise InvalidRequestError(f"the data's schema differs from table {where}: "
                              + "; ".join(problems), code="SchemaMismatch")


def _castable(data: pa.Field, table: pa.Field) -> bool:
    """A column written into the table's type without loss (NULLs only where allowed)."""
    if data.nullable and not table.nullable:
        return False
    return data.type == table.type or _lossless(data.type, table.type)


def _write_parquet(store: BucketStore, reader: flight.MetadataRecordBatchReader, limit: int,
                   stop: threading.Event, schema: pa.Schema) -> tuple[Path, int, int]:
    """Every batch the client sends into one Parquet file of ``schema`` (the data's, or the
    table's it casts to without loss); its path, size and row count."""
    fd, name = tempfile.mkstemp(dir=store.temporary_folder(), prefix=_TEMP_PREFIX,
                                suffix=".parquet")
    path = Path(name)
    received = rows = 0
    try:
        with os.fdopen(fd, "wb") as sink, pq.ParquetWriter(sink, schema) as out:
            for batch in _batches(reader, stop):
                received += batch.nbytes
                if received > limit:
                    raise ResourceLimitError(
                        f"the ingest sent over {limit >> 20} MiB of Arrow data "
                        "(--max-ingest-mb)", code="EntityTooLarge")
                out.write_batch(_as_table_schema(batch, schema))
                rows += batch.num_rows
        return path, path.stat().st_size, rows
    except BaseException:
        path.unlink(missing_ok=True)
        raise


def _as_table_schema(batch: pa.RecordBatch, schema: pa.Schema) -> pa.RecordBatch:
    if batch.schema.equals(schema):
        return batch
    try:
        return batch.cast(schema)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as exc:
        raise InvalidRequestError(f"the data does not fit the table's columns {schema.types}: "
                                  f"{exc}", code="SchemaMismatch") from None


def _batches(reader: flight.MetadataRecordBatchReader,
             stop: threading.Event) -> Iterator[pa.RecordBatch]:
    while True:
        if stop.is_set():  # timed out or cancelled: the caller answered already
            raise StoppedError("ingest stopped")
        try:
            chunk = reader.read_chunk()
        except StopIteration:
            return
        if chunk.data is not None:
            yield chunk.data


def _delete_others(store: BucketStore, objects: list[ObjectInfo], keep: set[str]) -> None:
    for obj in objects:
        if obj.key not in keep:
            store.delete(obj.key)


# ----------------------------------------------------------------------------- staging


def _signature(host: IngestHost, payload: bytes) -> str:
    secret = host.secret if isinstance(host.secret, bytes) else host.secret[0]
    key = hashlib.sha256(b"ingest\x00" + secret).digest()
    return _b64(hmac.new(key, _DOMAIN + payload, hashlib.sha256).digest())


def _job(text: str) -> str:
    if not (0 < len(text) <= 32 and all(c in "0123456789abcdef" for c in text)):
        raise InvalidRequestError(f"a staged ingest needs {INGEST_JOB_OPTION}: the job's id, "
                                  "1 to 32 lower-case hex digits")
    return text


def _stage(host: IngestHost, call: CallContext, target: Target, key: str, path: Path,
           size: int, job: str) -> str:
    """Keep ``path`` as a staged file of ``job``; the signed token that commits or aborts it.

    The file is in place before the job's abort mark is looked for, and an abort marks the job
    before it looks for files: whichever comes second sees the other, so nothing a task stages
    outlives its job's abort.
    """
    _remove_stale(path.parent, host.config.ticket_max_age_s)
    staged = path.with_name(f"{_STAGED_PREFIX}{job}-{secrets.token_hex(12)}.parquet")
    os.replace(path, staged)
    if (path.parent / (_ABORTED_PREFIX + job)).exists():
        staged.unlink(missing_ok=True)
        raise InvalidRequestError(f"write job {job} was aborted", code="JobAborted")
    payload = json.dumps({"b": target.bucket, "k": key, "f": str(staged), "n": size,
                          "u": call.user_name, "t": time.time()},
                         separators=(",", ":")).encode()
    return f"{_b64(payload)}.{_signature(host, payload)}"


def _staged(host: IngestHost, call: CallContext, token: str) -> dict[str, Any]:
    body, _, mac = str(token).partition(".")
    try:
        payload = base64.urlsafe_b64decode(body + "=" * (-len(body) % 4))
    except ValueError:
        raise InvalidRequestError("malformed staged-ingest token") from None
    if not hmac.compare_digest(mac, _signature(host, payload)):
        raise AccessDeniedError("staged-ingest token is not valid (forged, or another "
                                "server's)")
    staged: dict[str, Any] = json.loads(payload)
    if staged["u"] != call.user_name:
        raise AccessDeniedError("the staged ingest belongs to another user")
    if time.time() - staged["t"] > host.config.ticket_max_age_s:
        raise InvalidRequestError("the staged ingest is older than --ticket-max-age and was "
                                  "removed; write it again", code="ExpiredToken")
    return staged


def commit_staged(host: IngestHost, call: CallContext, body: bytes) -> list[flight.Result]:
    """``CommitIngest``: JSON ``{"staged": [token, ...], "replace": bool}`` stores every staged
    object; with ``replace``, the tables' other objects are deleted afterwards."""
    request = _request(body)
    entries = [_staged(host, call, t) for t in request["staged"]]
    kept: dict[tuple[str, str], set[str]] = {}
    with _COMMIT_LOCK:
        for entry in entries:
            store = host.catalog.store(entry["b"])
            staged = Path(entry["f"])
            if not staged.exists():
                raise ObjectNotFoundError(f"staged object for {entry['b']}/{entry['k']} is "
                                          "gone (committed already, or removed)")
            store.put_file(entry["k"], staged, int(entry["n"]))
            prefix = entry["k"].rsplit("/", 1)[0] + "/"
            kept.setdefault((entry["b"], prefix), set()).add(entry["k"])
        if request.get("replace"):
            for (bucket, prefix), keys in kept.items():
                objects = list(host.catalog.objects(bucket, prefix))
                _delete_others(host.catalog.store(bucket), objects, keys)
    return [flight.Result(json.dumps({"committed": len(entries)}).encode())]


def abort_staged(host: IngestHost, call: CallContext, body: bytes) -> list[flight.Result]:
    """``AbortIngest``: JSON ``{"staged": [token, ...], "job": id, "bucket": name}`` removes
    the staged objects, and marks the job so that what its tasks stage later is removed too."""
    request = _request(body)
    entries = [_staged(host, call, t) for t in request["staged"]]
    if "job" in request:
        job, bucket = _job(str(request["job"])), str(request.get("bucket", ""))
        host.check_access(call, bucket)
        folder = host.catalog.store(bucket).temporary_folder() or Path(tempfile.gettempdir())
        (folder / (_ABORTED_PREFIX + job)).touch()
        for staged in folder.glob(f"{_STAGED_PREFIX}{job}-*"):
            staged.unlink(missing_ok=True)
    for entry in entries:
        Path(entry["f"]).unlink(missing_ok=True)
    return [flight.Result(json.dumps({"aborted": len(entries)}).encode())]


def _request(body: bytes) -> dict[str, Any]:
    try:
        request = json.loads(body or b"{}")
        if not isinstance(request.get("staged"), list):
            raise TypeError("staged")
    except (ValueError, TypeError, AttributeError) as exc:
        raise InvalidRequestError(f'expected JSON {{"staged": [token, ...]}} ({exc})') from None
    return dict(request)


def _remove_stale(folder: Path, max_age_s: float) -> None:
    """Remove staged files no job committed, and abort marks, older than ``max_age_s``."""
    cutoff = time.time() - max_age_s
    for stale in [*folder.glob(_STAGED_PREFIX + "*"), *folder.glob(_ABORTED_PREFIX + "*")]:
        with contextlib.suppress(OSError):
            if stale.stat().st_mtime < cutoff:
                stale.unlink()


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")

