"""Ingests into a prefix table committed atomically across every process sharing its store.

A fleet's nodes (or any servers over one folder or object store) may ingest into one table at
once; a lock of one process cannot order them. Each table has a log of small **commit
records** in its bucket's hidden ``.flight-select-commits/`` (``stores.py``), numbered by
generation, and an ingest commits by *creating* the next generation's record, a write the
store performs only when no record of that generation exists (a folder's ``link``, S3's
``If-None-Match: *``): of two writers that read the same generation, exactly one creates the
next. A record is never overwritten (SeaweedFS honours ``If-None-Match`` atomically under
concurrency, but not ``If-Match``).

An ingest, in :func:`commit`:

1. reads the newest record (generation ``g``), lists the table and checks its mode against the
   objects (a table with objects exists: ``TableAlreadyExists`` for ``create``);
2. stores its objects under new unique keys (visible from here on, as before);
3. creates record ``g + 1``; when another writer created it first, it reads again and retries
   with the same objects, unless a ``replace`` committed after step 2 (that replace may have
   listed and deleted them): then the ingest fails with ``ConditionalRequestConflict`` naming
   the table and the winner, and removes what it stored;
4. a ``replace`` then deletes the objects it listed at the generation it committed on.

So every object committed at or before ``g`` is visible to a listing made after reading ``g``,
a replace deletes exactly those and the pending objects of writers that will lose, and the
table ends as some serial order of the acknowledged ingests: two concurrent replaces leave one
writer's rows (the other is told it lost), two concurrent creates leave one (the other is
told ``TableAlreadyExists``), an append and a replace either order. Records but the newest
few are pruned; a writer whose read was so old that its generation was pruned and made again
sees a newer record after its create, and treats that as a lost race.

What it does not give: readers do not consult the records, so a reader listing the table while
a replace runs may see the old and the new objects together, or an object a losing writer is
about to remove; objects written by other means (the S3 door's PutObject) take no part.
"""

from __future__ import annotations

import functools
import json
import logging
import os
import random
import socket
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from flight_storage.errors import ConflictError, StoppedError, StorageError
from flight_storage.storage.stores import BucketStore, StoredObject

log = logging.getLogger(__name__)

MAX_ATTEMPTS: Final = 12
"""Creates of the next record one commit tries before it fails (each after a lost race)."""
KEEP_RECORDS: Final = 8
"""Records kept behind the newest (older ones are pruned after a commit)."""
_NODE: Final = f"{socket.gethostname()}:{os.getpid()}"


@dataclass(frozen=True)
class Record:
    """One commit of a table: who, how, and the last generation that replaced the table."""

    generation: int
    mode: str
    """``create``, ``append`` or ``replace`` (what the ingest's objects did to the table)."""
    replaced: int
    """The generation of the newest ``replace`` at or before this one (0: none)."""
    keys: tuple[str, ...]
    node: str
    time: float

    def body(self, table: str) -> bytes:
        return json.dumps({"table": table, "generation": self.generation, "mode": self.mode,
                           "replaced": self.replaced, "keys": list(self.keys),
                           "node": self.node, "time": self.time}).encode()

    @classmethod
    def parse(cls, body: bytes, generation: int) -> Record:
        try:
            data = json.loads(body)
            return cls(generation, str(data["mode"]), int(data["replaced"]),
                       tuple(data["keys"]), str(data["node"]), float(data["time"]))
        except (ValueError, KeyError, TypeError):  # unreadable: assume the worst (a replace)
            return cls(generation, "replace", generation, (), "unknown", 0.0)

    def describe(self) -> str:
        return f"a {self.mode} ingest by {self.node}"


@dataclass(frozen=True)
class Pending:
    """A finished file to store as ``key`` (the store takes it: renamed or uploaded)."""

    key: str
    file: Path
    size: int


def latest(store: BucketStore, table: str,
           generations: Sequence[int] | None = None) -> Record | None:
    """The newest commit record of ``table`` (among ``generations`` when the caller listed
    them), None when it has none."""
    listed = store.commit_generations(table) if generations is None else generations
    for generation in reversed(listed):
        body = store.read_commit(table, generation)
        if body is not None:
            return Record.parse(body, generation)
    return None


Check = Callable[[list[StoredObject], Callable[[], "Record | None"]], None]
"""Raises when an ingest's mode refuses the table as it is: its objects (the ingest's own
left out) and, read only when a message needs it, its newest record (who wrote it)."""


def commit(store: BucketStore, table: str, pending: Sequence[Pending], *, mode: str,
           check: Check, cancelled: Callable[[], bool] = lambda: False) -> Record:
    """Store ``pending`` as new objects of the prefix table ``table`` and commit them.

    Args:
        mode: ``replace`` deletes the table's other objects once committed; any other mode
            keeps them (``create``, ``append``: ``check`` says whether the table may be
            written).
        check: called before the objects are stored and after every lost race.
        cancelled: whether the caller went away; checked before the commit, so that an
            ingest whose client vanished stores nothing.

    Raises:
        ConflictError: ``ConditionalRequestConflict``: a replace committed while ours were
            stored, or the races were lost ``MAX_ATTEMPTS`` times; nothing of ours is kept.
        StorageError: what ``check`` or the store raised; nothing of ours is kept.
    """
    keys = tuple(p.key for p in pending)
    stored = False
    base = 0
    try:
        for attempt in range(MAX_ATTEMPTS):
            generations = store.commit_generations(table)
            generation = generations[-1] if generations else 0
            # the newest record: whether a replace came since ours were stored (a retry), and
            # what a record not replacing the table carries on (replace needs neither)
            head = (latest(store, table, generations)
                    if generations and (stored or mode != "replace") else None)
            if stored and head is not None and head.replaced > base:
                raise ConflictError(
                    f"table {table} was replaced by {head.describe()} while this ingest was "
                    "stored; nothing of it was kept: send it again")
            existing = [o for o in store.list(table) if o.key not in keys]
            check(existing, functools.partial(_newest, store, table, head))
            if not stored:
                for item in pending:
                    store.put_file(item.key, item.file, item.size)
                stored, base = True, generation
            if cancelled():
                raise StoppedError("the client went away before the commit")
            replaced = (generation + 1 if mode == "replace" else
                        head.replaced if head is not None else 0)
            record = Record(generation + 1, mode, replaced, keys, _NODE, time.time())
            newest = _create(store, table, record)
            if newest is not None:
                stored = False  # committed: ours to keep, whatever follows
                if mode == "replace":
                    _delete(store, table, [o.key for o in existing])
                _prune(store, table, newest, record.generation)
                return record
            time.sleep(random.uniform(0.005, 0.02) * (attempt + 1))
        raise ConflictError(f"table {table}: {MAX_ATTEMPTS} commits of other ingests won "
                            "the race to commit this one; send it again")
    except BaseException:
        if stored:
            _delete(store, table, list(keys))
        raise


def _newest(store: BucketStore, table: str, known: Record | None) -> Record | None:
    return known if known is not None else latest(store, table)


def _create(store: BucketStore, table: str, record: Record) -> Sequence[int] | None:
    """Create ``record``: the generations there then, or None when another writer's record
    of its generation is there, or ours was made again on a generation already pruned (the
    newest is ``KEEP_RECORDS`` or more past it: our read was that old)."""
    if not store.create_commit(table, record.generation, record.body(table)):
        return None
    newest = store.commit_generations(table)
    if newest and newest[-1] >= record.generation + KEEP_RECORDS:
        store.delete_commit(table, record.generation)
        return None
    return newest


def _delete(store: BucketStore, table: str, keys: list[str]) -> None:
    for key in keys:
        try:
            store.delete(key)
        except StorageError as exc:  # committed all the same; say what is left over
            log.warning("ingest into %s: could not delete %s (%s)", table, key, exc)


def _prune(store: BucketStore, table: str, generations: Sequence[int],
           generation: int) -> None:
    for old in generations:
        if old <= generation - KEEP_RECORDS:
            try:
                store.delete_commit(table, old)
            except StorageError as exc:
                log.warning("ingest into %s: could not prune commit record %d (%s)", table,
                            old, exc)
