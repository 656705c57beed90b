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
| ``replace`` | created | the new object is stored and committed, then the table's other objects are deleted |

Commits are atomic across every process sharing the store (a fleet's nodes, servers over one
folder): each is the creation of the table's next commit record, which exactly one of two
racing writers wins (``storage/table_commits.py``); the loser retries, or is told
``TableAlreadyExists`` (create) or ``ConditionalRequestConflict`` (a replace won while its
object was stored), and keeps nothing. An ingest whose client went away before it ended its
stream (killed, cancelled: the call is cancelled although the stream ended) stores nothing.

Rules and bounds: the server must run ``--writable``; with ``--auth`` the user needs the
bucket's write right (``"write"`` in the users file, ``rpc/auth.py``); the Arrow bytes of one
ingest are bounded by ``--max-ingest-mb`` (``EntityTooLarge`` naming it); the work holds a
compute slot and the query timeout (``StreamPool.run_planning``). The target bucket and schema
are the command's ``catalog`` and ``schema``, or the session's (``rpc/sessions.py``).
Temporary tables and ingest inside a transaction are refused: each ingest commits on its own.

Staged ingest (the Spark writer, ``compute_client/spark_writer.py``): with the option
``flight-select.stage=true`` the object is kept in a staging file and the answer carries a
signed token (a second ``PutResult``, JSON ``{"staged": token}``); the action ``CommitIngest``
stores every staged object of a job, ``AbortIngest`` removes them. Both write: they need
``--writable`` and the write right on every bucket they touch. Staged files live in the
bucket's own temporary folder (``BucketStore.temporary_folder``), so an abort reaches no
other bucket; a staged file nobody commits, and an abort mark, are removed after
``--ticket-max-age``, and a folder holds at most ``ServerConfig.max_abort_marks`` marks
(``TooManyAbortedJobs``). Temporaries a crash left (``.ingest-*``) are swept at start and
every few minutes once older than ``ServerConfig.temporary_max_age_s``
(:func:`start_sweeper`). Hand-written: pyarrow.flight has no Flight SQL server layer;
pyarrow.parquet writes the objects.
"""

from __future__ import annotations

import base64
import contextlib
import json
import os
import secrets
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

import pyarrow as pa
import pyarrow.flight as flight
import pyarrow.parquet as pq

from flight_storage import telemetry
from flight_storage.errors import (
    AccessDeniedError,
    InvalidRequestError,
    ObjectNotFoundError,
    ResourceLimitError,
    StoppedError,
)
from flight_storage.protocol import INGEST_JOB_OPTION, INGEST_STAGE_OPTION, pb
from flight_storage.protocol.signing import SignatureError, Signer
from flight_storage.rpc import access, sessions
from flight_storage.rpc.config import ServerConfig
from flight_storage.rpc.middleware import CallContext, log_event
from flight_storage.rpc.server_parts import ServerParts
from flight_storage.storage import table_commits
from flight_storage.storage.catalog import Catalog, describe_key
from flight_storage.storage.folder_store import FolderBuckets
from flight_storage.storage.s3_store import STORE_TEMPORARIES
from flight_storage.storage.stores import BucketStore, StoredObject
from flight_storage.storage.table_commits import Pending, Record

_STAGED_PREFIX: Final = ".ingest-staged-"
_ABORTED_PREFIX: Final = ".ingest-aborted-"
_TEMP_PREFIX: Final = ".ingest-"
_DOMAIN: Final = b"flight-select staged ingest v1\x00"
_OPTIONS: Final = pb.CommandStatementIngest.TableDefinitionOptions
_SWEEP_EVERY_S: Final = 300.0
_GONE: Final = ("the client went away before it ended its stream; nothing of this ingest was "
                "stored")


@dataclass(frozen=True)
class Target:
    """Where an ingest writes: ``bucket``/``prefix`` (the table, ending in ``/``)."""

    bucket: str
    prefix: str


def ingest(host: ServerParts, call: CallContext, command: Any,
           reader: flight.MetadataRecordBatchReader,
           writer: flight.FlightMetadataWriter) -> None:
    """Serve one ``DoPut(CommandStatementIngest)``: check, write, commit, answer the count."""
    target = _target(host, call, command)
    stage = command.options.get(INGEST_STAGE_OPTION, "").lower() == "true"
    store = host.catalog.store(target.bucket)
    _check_not_object(host.catalog, target)
    existing = list(store.list(target.prefix))
    check, written_as = _check_mode(command, target, store, reader.schema)
    check(existing, lambda: None)  # before the data is read: the commit checks again

    def work(stop: threading.Event) -> tuple[Path, int, int]:
        return _write_parquet(store, reader, host.config.max_ingest_bytes, stop,
                              call.is_cancelled, written_as[0])

    written, size, rows = host.bounded(call, "ingest", work)
    telemetry.INGEST_ROWS.inc(rows)  # received whole; a commit that fails stores none of it
    telemetry.INGEST_BYTES.inc(size)
    try:
        key = f"{target.prefix}part-{time.time_ns():020d}-{secrets.token_hex(4)}.parquet"
        if stage:
            job = _job(command.options.get(INGEST_JOB_OPTION, ""))
            token = _stage(host, call, target, key, written, size, job)
            writer.write(pa.py_buffer(pb.DoPutUpdateResult(record_count=rows)
                                      .SerializeToString()))
            writer.write(pa.py_buffer(json.dumps({"staged": token}).encode()))
            return
        replace = (command.table_definition_options.if_exists
                   == _OPTIONS.TABLE_EXISTS_OPTION_REPLACE)
        mode = "replace" if replace else "append" if existing else "create"
        try:
            table_commits.commit(store, target.prefix, [Pending(key, written, size)],
                                 mode=mode, check=check, cancelled=call.is_cancelled)
        except StoppedError:
            raise flight.FlightCancelledError(_GONE) from None
    finally:
        written.unlink(missing_ok=True)  # gone already when stored or staged
    writer.write(pa.py_buffer(pb.DoPutUpdateResult(record_count=rows).SerializeToString()))


def _check_write(host: ServerParts, call: CallContext, bucket: str) -> None:
    """Refuse a write into ``bucket`` on a read-only server or by a user without its write
    right (ingests and every staged-ingest action alike)."""
    _check_writable(host)
    host.check_access(call, bucket)
    access.check_write(call.user, bucket, hint=' (users file: "write")')


def _check_writable(host: ServerParts) -> None:
    if not host.config.writable:
        raise AccessDeniedError("bulk ingest writes objects, and this server is read-only "
                                "(start it with --writable)", code="ReadOnly")


def _target(host: ServerParts, call: CallContext, command: Any) -> Target:
    _check_writable(host)  # before the command's other faults
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
    _check_write(host, call, bucket)
    return Target(bucket, f"{schema}{name}/")


def _check_not_object(catalog: Catalog, target: Target) -> None:
    table = target.prefix[:-1]
    with contextlib.suppress(ObjectNotFoundError):
        catalog.object(target.bucket, table)
        raise InvalidRequestError(
            f"{target.bucket}/{table} is an object; ingest writes the prefix table {table}/ "
            "and a one-part name would then be ambiguous", code="AmbiguousTable")


def _check_mode(command: Any, target: Target, store: BucketStore, schema: pa.Schema
                ) -> tuple[table_commits.Check, list[pa.Schema]]:
    """The check of the command's mode against a table's objects (and its newest commit,
    which names who wrote it), run before the data is read and at each commit attempt; and
    the schema the data is written with, set by the check (an append's: the table's, when
    every column of the data casts to it without loss). An object's schema is read once per
    version."""
    options = command.table_definition_options
    where = f"{target.bucket}/{target.prefix}"
    checked: dict[str, pa.Schema] = {}
    written = [schema]

    def check(existing: list[StoredObject], head: Callable[[], Record | None]) -> None:
        if not existing:
            if options.if_not_exist != _OPTIONS.TABLE_NOT_EXIST_OPTION_CREATE:
                raise ObjectNotFoundError(f"table {where} does not exist (mode append needs "
                                          "it)", code="NoSuchTable")
            return
        if options.if_exists == _OPTIONS.TABLE_EXISTS_OPTION_APPEND:
            version = existing[0].version
            if version not in checked:
                checked[version] = _check_schema(where, store, existing[0], schema)
            written[0] = checked[version]
        elif options.if_exists != _OPTIONS.TABLE_EXISTS_OPTION_REPLACE:
            writer = head()
            by = f" (written by {writer.describe()})" if writer is not None else ""
            raise InvalidRequestError(f"table {where} already exists{by}; mode create "
                                      "refuses it: append or replace it",
                                      code="TableAlreadyExists")

    return check, written


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


def _check_schema(where: str, store: BucketStore, first: StoredObject,
                  schema: pa.Schema) -> pa.Schema:
    """The schema an append writes: the data's when it is the table's, the table's when every
    column casts to it without loss; else ``SchemaMismatch`` saying what differs."""
    if describe_key(first.key)[0] != "parquet":
        raise InvalidRequestError(f"table {where} holds {first.key}, not Parquet: ingest "
                                  "appends only to tables of Parquet objects")
    table = pq.ParquetFile(store.open_random_access(first)).schema_arrow
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
                   stop: threading.Event, cancelled: Callable[[], bool], schema: pa.Schema
                   ) -> tuple[Path, int, int]:
    """Every batch the client sends into one Parquet file of ``schema`` (the data's, or the
    table's it casts to without loss); its path, size and row count.

    A client killed mid-stream ends the stream as if it had finished (pyarrow's reader just
    stops); only the call's cancellation tells them apart, so it is asked once the stream
    ends: a cancelled call keeps nothing.
    """
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
        if cancelled():
            raise flight.FlightCancelledError(_GONE)
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


# ----------------------------------------------------------------------------- staging


def _signer(host: ServerParts) -> Signer:
    """Staged-ingest tokens' keys (``protocol/signing.py``: the first signs, all verify)."""
    return Signer.of(host.secret).derived(b"ingest")


def _job(text: str) -> str:
    if not (0 < len(text) <= 32 and all(c in "0123456789abcdef" for c in text)):
        raise InvalidRequestError(f"a staged ingest needs {INGEST_JOB_OPTION}: the job's id, "
                                  "1 to 32 lower-case hex digits")
    return text


def _stage(host: ServerParts, call: CallContext, target: Target, key: str, path: Path,
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
    return _signer(host).seal_text(_DOMAIN, payload)


def _staged(host: ServerParts, call: CallContext, token: str) -> dict[str, Any]:
    try:
        payload = _signer(host).open_text(_DOMAIN, str(token))
    except SignatureError as exc:
        if "malformed" in str(exc):
            raise InvalidRequestError("malformed staged-ingest token") from None
        raise AccessDeniedError("staged-ingest token is not valid (forged, or another "
                                "server's)") from None
    staged: dict[str, Any] = json.loads(payload)
    if staged["u"] != call.user_name:
        raise AccessDeniedError("the staged ingest belongs to another user")
    if time.time() - staged["t"] > host.config.ticket_max_age_s:
        raise InvalidRequestError("the staged ingest is older than --ticket-max-age and was "
                                  "removed; write it again", code="ExpiredToken")
    return staged


def commit_staged(host: ServerParts, call: CallContext, body: bytes) -> list[flight.Result]:
    """``CommitIngest``: JSON ``{"staged": [token, ...], "replace": bool}`` stores every staged
    object, one commit per table (``storage/table_commits.py``); with ``replace``, the tables'
    other objects are deleted once it is committed."""
    request = _request(body)
    entries = [_staged(host, call, t) for t in request["staged"]]
    tables: dict[tuple[str, str], list[Pending]] = {}
    for entry in entries:
        _check_write(host, call, entry["b"])
        staged = Path(entry["f"])
        if not staged.exists():
            raise ObjectNotFoundError(f"staged object for {entry['b']}/{entry['k']} is "
                                      "gone (committed already, or removed)")
        prefix = entry["k"].rsplit("/", 1)[0] + "/"
        tables.setdefault((entry["b"], prefix), []).append(
            Pending(entry["k"], staged, int(entry["n"])))
    mode = "replace" if request.get("replace") else "append"
    for (bucket, prefix), pending in tables.items():
        table_commits.commit(host.catalog.store(bucket), prefix, pending, mode=mode,
                             check=lambda _objects, _head: None)
    return [flight.Result(json.dumps({"committed": len(entries)}).encode())]


def abort_staged(host: ServerParts, call: CallContext, body: bytes) -> list[flight.Result]:
    """``AbortIngest``: JSON ``{"staged": [token, ...], "job": id, "bucket": name}`` removes
    the staged objects, and marks the job so that what its tasks stage later is removed too.
    Aborting writes: it needs ``--writable`` and the write right on each bucket; the marks
    of a bucket are bounded (``max_abort_marks``, ``TooManyAbortedJobs``)."""
    request = _request(body)
    entries = [_staged(host, call, t) for t in request["staged"]]
    for entry in entries:
        _check_write(host, call, entry["b"])
    if "job" in request:
        job, bucket = _job(str(request["job"])), str(request.get("bucket", ""))
        _check_write(host, call, bucket)
        folder = host.catalog.store(bucket).temporary_folder()
        if folder is None:
            raise InvalidRequestError(f"bucket {bucket} stages nothing to abort")
        _mark_aborted(folder, job, host.config)
        for staged in folder.glob(f"{_STAGED_PREFIX}{job}-*"):
            staged.unlink(missing_ok=True)
    for entry in entries:
        Path(entry["f"]).unlink(missing_ok=True)
    return [flight.Result(json.dumps({"aborted": len(entries)}).encode())]


def _mark_aborted(folder: Path, job: str, config: ServerConfig) -> None:
    """Mark ``job`` aborted in ``folder``, within the bound on marks (stale ones removed
    first: a mark outlives no staged file, so it lasts ``--ticket-max-age``)."""
    _remove_stale(folder, config.ticket_max_age_s)
    mark = folder / (_ABORTED_PREFIX + job)
    if not mark.exists() and sum(1 for _ in folder.glob(_ABORTED_PREFIX + "*")) \
            >= config.max_abort_marks:
        raise ResourceLimitError(
            f"{config.max_abort_marks} write jobs of this bucket are marked aborted within "
            "--ticket-max-age (ServerConfig.max_abort_marks); try again later",
            code="TooManyAbortedJobs")
    mark.touch()


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


# ----------------------------------------------------------------------------- temporaries


def sweep_temporaries(catalog: Catalog, config: ServerConfig) -> list[Path]:
    """Remove the ``.ingest-*`` files a crash left, once older than
    ``config.temporary_max_age_s`` (staged files and abort marks: ``--ticket-max-age``), in
    every folder bucket and in the object-store buckets' temporary folders; what was removed
    (also logged, event ``ingest_sweep``)."""
    folders: list[Path] = []
    for bucket_set in catalog.sets:
        if isinstance(bucket_set, FolderBuckets):
            for name in bucket_set.names():
                store = bucket_set.bucket(name)
                if store is not None:
                    folders.append(store.folder)
    stores = Path(tempfile.gettempdir()) / STORE_TEMPORARIES
    if stores.is_dir():
        folders.extend(p for p in stores.iterdir() if p.is_dir())
    removed: list[Path] = []
    now = time.time()
    for folder in folders:
        for path in folder.glob(_TEMP_PREFIX + "*"):
            kept = (config.ticket_max_age_s
                    if path.name.startswith((_STAGED_PREFIX, _ABORTED_PREFIX))
                    else config.temporary_max_age_s)
            with contextlib.suppress(OSError):
                if now - path.stat().st_mtime > kept:
                    path.unlink()
                    removed.append(path)
    if removed:
        log_event("ingest_sweep", removed=[str(p) for p in removed])
    return removed


def start_sweeper(catalog: Catalog, config: ServerConfig) -> threading.Thread:
    """Sweep now, then every few minutes, in a daemon thread (a writable server's)."""

    def run() -> None:
        while True:
            try:
                sweep_temporaries(catalog, config)
            except Exception as exc:  # noqa: BLE001 - the next round tries again
                log_event("ingest_sweep", error=f"{type(exc).__name__}: {exc}")
            time.sleep(min(_SWEEP_EVERY_S, config.temporary_max_age_s / 2))

    thread = threading.Thread(target=run, name="ingest-sweep", daemon=True)
    thread.start()
    return thread
