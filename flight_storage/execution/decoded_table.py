"""The decoded cache's tables: an object's rows kept decoded as Parquet, read by DataFusion's
Parquet reader in place of the object.

One seam (:func:`decoded_plan`): after a plan has chosen DataFusion's own CSV reader for one
object (``drivers/csv_format.py``), the plan is served from the object's entry when the cache
has one (``storage/decoded_cache.py``): its table becomes a :class:`DecodedTable` (a
:class:`~flight_storage.execution.native_parquet.NativeParquetTable` over the entry, under a
view that gives exactly the plan's ``s3object`` columns) and its endpoints the entry's
row-group partitions, in record order. Everything after (partition plans, execution, errors)
is the native Parquet path's.

A typed JSON Lines table of the standard surface (one object: sniffed or configured
columns, ``drivers/json_format.py``) is served the same way: its entry holds the rows and
typed columns the JSON driver's reader gives, in record order, and its name adds the
flavour's reading rules and the record limit (``--max-record-bytes``) to the rules below. A
value that does not convert fails the fill, so such an object has no entry and its queries
fail as before. S3 Select's JSON (per-query path columns of JSON text) is not cached.

An entry holds exactly the rows DataFusion's CSV reader gives for the object under the plan's
reading rules, at the object's full width (every ``_1 .. _N`` of a Utf8 table, every column of
a typed one), in record order; a query that reads fewer columns reads a projection, one that
reads more gets NULLs beyond ``_N`` as the CSV reader does. The entry's name is a digest of:

* the object's content identity (:func:`~flight_storage.storage.sources.content_identity`:
  store, bucket, key and version; a folder's version holds the inode and change time, so a
  rewrite with the same size and modification time is another entry);
* every reading rule: the CSV options under the flavour's reading rules (delimiters, quote,
  escape, comments, header, how an empty field reads), the compression, the
  InputSerialization as given, and the typed table's columns (configured or sniffed).

A fill reads the object once with the native CSV reader (one partition: record order) and
writes zstd Parquet with statistics and page indexes (``decoded_shadows.write_batches``), and typed shadows (``decoded_shadows.py``);
the object's version is asked again after the fill and the entry dropped if it changed. An
object the native reader refuses (a malformed record, a value that does not convert) never
gets an entry: its queries keep failing the same way. A miss fills only after a query's
stream has ended (off its path); ``FLIGHT_SELECT_DECODED_CACHE=fill-first`` fills before the
first answer (tests run the conformance corpus that way).

Parquet, not Arrow IPC (measured on the 1 M-row peer CSV, every column text, 2 loaded
cores): zstd Parquet with page indexes is 0.28x the CSV's bytes, Arrow IPC 1.3x uncompressed
and 0.55x with zstd buffers (the issue's bound is 0.6x); IPC writes faster (0.3 s against 5 s
for Parquet, a cost paid once, off the queries' path), but only Parquet gives DataFusion
row-group statistics and page indexes to prune with and a reader that pushes filters into
decoding.
"""

from __future__ import annotations

import dataclasses
import logging
import os
from collections.abc import Hashable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import pyarrow as pa
import pyarrow.parquet as pq
from datafusion import SessionContext

from flight_storage.errors import StorageError
from flight_storage.execution import entry_encodings
from flight_storage.execution.decoded_shadows import (
    add_shadows,
    cheap_filter,
    fragments,
    rewrite,
    shadows_in_one_pass,
    write_batches,
)
from flight_storage.execution.drivers.json_format import typed_json_rows
from flight_storage.execution.native_csv import DeferredCsvTable, NativeCsvTable, native_csv_table
from flight_storage.execution.native_parquet import NativeParquetTable, row_group_starts
from flight_storage.execution.plan_types import TABLE, PlannedPartition, SelectPlan
from flight_storage.execution.session import READ_ONLY, new_session
from flight_storage.protocol import Partition, RowGroups, WholeObject
from flight_storage.storage.decoded_cache import SUFFIX, DecodedCache, entry_name
from flight_storage.storage.sources import DataFusionLocation, content_identity, unwrapped

if TYPE_CHECKING:
    from flight_storage.execution.engine import SelectEngine

log = logging.getLogger(__name__)

ENV_MODE = "FLIGHT_SELECT_DECODED_CACHE"
"""``fill-first``: a miss fills the entry before the query is answered (a test mode)."""
_FORMAT_VERSION = "decoded-csv-3"
"""Part of every entry's name: a change to what entries hold gives new names."""
_JSON_FORMAT_VERSION = "decoded-json-lines-1"
"""The same, for typed JSON Lines entries."""


def _register_nothing(ctx: SessionContext) -> None:
    """An entry is a local file."""


@dataclass(frozen=True)
class DecodedTable(NativeParquetTable):
    """An entry read as the table a plan expects.

    Attributes:
        columns_sql: the view's select list (the plan's ``s3object`` columns over the
            entry's).
    """

    columns_sql: tuple[str, ...] = ()
    row_filter: bool = True

    def register(self, ctx: SessionContext, name: str) -> None:
        """Register the view ``name`` over the entry (``name_file``) on ``ctx``."""
        if not self.row_filter:  # an expensive predicate: evaluated above the scan
            ctx.sql("SET datafusion.execution.parquet.pushdown_filters = false")
        file_table = f"{name}_file"
        ctx.register_parquet(file_table, self.location.url, file_extension=SUFFIX)
        ctx.register_view(name, ctx.sql(
            f'SELECT {", ".join(self.columns_sql)} FROM "{file_table}"'))

    @property
    def signature(self) -> tuple[object, ...]:
        """What a physical plan over the table depends on (see NativeParquetTable)."""
        return (type(self).__name__, self.location.url, self.size, self.columns_sql,
                self.row_filter)


def cache_rules(plan: SelectPlan, max_record_bytes: int | None = None) -> Hashable | None:
    """Everything an entry of ``plan``'s object depends on, or None when the plan cannot be
    served from an entry (not one CSV object read by DataFusion's CSV reader nor one typed
    JSON Lines object, or no content identity).

    A typed JSON Lines table's rules are the flavour's reading rules, the record limit (an
    object with a longer record fails, so has no entry) and its columns (sniffed or
    configured); its options and compression as a CSV object's."""
    native = plan.native
    if len(plan.sources) != 1:
        return None
    if plan.input.format == "json" and plan.input.columns is not None and native is None:
        reading: tuple[object, ...] = (_JSON_FORMAT_VERSION, plan.flavor, repr(plan.reading))
    elif plan.input.format == "csv" and isinstance(native, NativeCsvTable | DeferredCsvTable):
        reading = (_FORMAT_VERSION, native.options)
    else:
        return None
    try:
        identity = content_identity(plan.source)
    except OSError:
        return None
    if identity is None:
        return None
    serialization = tuple(sorted((str(k), repr(v)) for k, v in plan.input.options.items()))
    # the record limit for every format: an object with a longer record is refused, so an
    # entry filled under a higher limit must not answer a server with a lower one
    return (*reading, max_record_bytes, identity, plan.input.compression, serialization,
            repr(plan.input.columns))


def fill_first() -> bool:
    """Whether a miss fills before answering (``FLIGHT_SELECT_DECODED_CACHE=fill-first``)."""
    return os.environ.get(ENV_MODE, "") == "fill-first"


def decoded_plan(engine: SelectEngine, plan: SelectPlan) -> SelectPlan:
    """``plan`` served from its object's entry when the cache has one (the seam), else the
    plan with its cache state (``miss`` or ``filling``) and the entry's name."""
    cache = engine.decoded
    if cache is None or plan.uncached is not None:
        return plan
    rules = cache_rules(plan, engine.config.max_record_bytes)
    if rules is None:
        return plan
    name = entry_name(rules)
    path = cache.lookup(name)
    if path is None and fill_first():
        cache.fill(name, lambda target: fill_entry(engine, plan, target), wait=True)
        path = cache.lookup(name)
    if path is None:
        return dataclasses.replace(plan, cache=cache.state(name), cache_entry=name)
    try:
        return _served(engine, plan, path)
    except (OSError, pa.ArrowException) as exc:  # an entry removed under us: read the object
        log.warning("decoded cache: entry %s unreadable (%s); reading the object", name[:12],
                    exc)
        return dataclasses.replace(plan, cache="miss", cache_entry=name)


def _served(engine: SelectEngine, plan: SelectPlan, path: Path) -> SelectPlan:
    footer = engine.parquet_footers.get((str(path),), lambda: pq.read_metadata(path))
    entry_schema = footer.schema.to_arrow_schema()
    sql = rewrite(plan.translation.sql, entry_schema, plan.input_schema.names)
    shadows = tuple(f'"{n}"' for n in entry_schema.names
                    if n not in plan.input_schema.names and f'"{n}"' in sql)
    table = DecodedTable(DataFusionLocation(str(path), _register_nothing, True),
                         path.stat().st_size, tuple(row_group_starts(footer)),
                         columns_sql=_select_list(plan.input_schema, entry_schema) + shadows,
                         row_filter=cheap_filter(sql))
    plan = dataclasses.replace(plan, translation=dataclasses.replace(plan.translation, sql=sql),
                               uncached=plan)
    count = table.partition_count(engine.range_count(plan.source.size, plan.wanted_parallelism))
    if count > 1 and _datafusion_partitions(engine, plan, table, count) != count:
        count = 1  # DataFusion keeps this query's scan whole
    partitions = _partitions(footer, [g for g in table.split(count) if g], plan.source.size)
    return dataclasses.replace(plan, native=table, native_reason="", partitions=partitions,
                               cache="hit")


def _partitions(footer: pq.FileMetaData, splits: list[tuple[int, ...]], object_bytes: int
                ) -> tuple[PlannedPartition, ...]:
    """The entry's row-group partitions; each counts its share of the *object's* bytes (by
    rows), so S3's Stats and FlightInfo totals say what they say without the cache."""
    if not splits:
        return (PlannedPartition(WholeObject(), bytes=object_bytes, rows=0),)
    total = max(footer.num_rows, 1)
    planned, rows_before = [], 0
    for groups in splits:
        rows = sum(footer.row_group(g).num_rows for g in groups)
        start = object_bytes * rows_before // total
        rows_before += rows
        end = object_bytes if rows_before >= total else object_bytes * rows_before // total
        planned.append(PlannedPartition(RowGroups(groups),
                                        bytes=end - start, rows=rows))
    return tuple(planned)


def _datafusion_partitions(engine: SelectEngine, plan: SelectPlan, table: DecodedTable,
                           count: int) -> int:
    """Partitions DataFusion makes of the plan's query over ``table`` when asked for
    ``count`` (fewer where it keeps a small scan whole)."""
    ctx = new_session(engine.config, plan.translation, partitions=count, split_min_bytes=0)
    table.register(ctx, TABLE)
    try:
        return int(ctx.sql_with_options(plan.translation.sql, READ_ONLY)
                   .execution_plan().partition_count)
    except Exception:  # DataFusion raises plain exceptions; execution reports them
        return 1


def _select_list(wanted: pa.Schema, entry: pa.Schema) -> tuple[str, ...]:
    """The plan's columns over the entry's: a column the entry lacks (a Utf8 ``_i`` past the
    object's widest record) is NULL, as the CSV reader gives it; a text column may be stored
    as a dictionary of text (read as one: see ``entry_encodings``).

    Raises:
        OSError: the entry does not hold the plan's columns (an entry of another reading).
    """
    columns = []
    for target in wanted:
        quoted = '"' + target.name.replace('"', '""') + '"'
        if target.name in entry.names:
            stored = entry.field(target.name).type
            if stored != target.type and not (target.type == pa.string()
                                              and entry_encodings.is_text(stored)):
                raise OSError(f"entry column {target.name} is {entry.field(target.name).type}")
            columns.append(quoted)
        elif target.type == pa.string():
            columns.append(f"CAST(NULL AS VARCHAR) AS {quoted}")
        else:
            raise OSError(f"entry has no column {target.name}")
    return tuple(columns)


def for_partitions(plan: SelectPlan, chosen: Sequence[Partition]) -> SelectPlan:
    """The plan that reads ``chosen``: a served plan's object plan when ``chosen`` are
    partitions of the object, not of the entry (a ticket planned before the entry was
    filled)."""
    if plan.uncached is None:
        return plan
    own = {p.partition for p in plan.partitions}
    if all(p in own or isinstance(p, WholeObject) for p in chosen):
        return plan
    return plan.uncached


def request_fill(engine: SelectEngine, plan: SelectPlan) -> None:
    """Fill a missed plan's entry in the background (after its query's stream ended; the
    fill reads the stored object, not the query's source, whose reads stop with the
    query)."""
    if engine.decoded is not None and plan.cache == "miss" and plan.cache_entry:
        alone = dataclasses.replace(plan, sources=(unwrapped(plan.source),))
        engine.decoded.fill(plan.cache_entry,
                            lambda target: fill_entry(engine, alone, target))


def fill_entry(engine: SelectEngine, plan: SelectPlan, target: Path) -> int:
    """Write the rows of ``plan``'s object (full width, record order) to ``target``: a CSV
    object's as DataFusion's CSV reader gives them, a typed JSON Lines object's as the JSON
    driver's typed reader does (every column).

    Raises:
        StorageError: the object cannot be cached (the native reader refuses it at full
            width, or it changed while it was read).
        Exception: the readers' errors (a malformed record, a value that does not convert):
            nothing is kept.
    """
    before = content_identity(plan.source)
    if plan.input.format == "json":
        rows = write_batches(target, plan.input_schema, typed_json_rows(engine, plan))
    else:
        rows = _csv_entry(engine, plan, target)
    if content_identity(plan.source, ask_store=True) != before:
        raise StorageError(f"{plan.source.name} changed while it was cached")
    return rows


def _csv_entry(engine: SelectEngine, plan: SelectPlan, target: Path) -> int:
    """Write a CSV object's entry (typed shadows of its text columns where they convert)."""
    table = _full_width(engine, plan)
    ctx = new_session(engine.config, partitions=1)
    table.register(ctx, TABLE)
    if plan.input.columns is not None:  # a typed table: its columns are typed already
        rows = _write_all(ctx, target)
    else:
        templates = fragments(lambda statement: engine.translate(
            statement, input_format="csv", flavor=plan.flavor).sql,
            keeps_empty_fields=plan.translation.keeps_empty_fields)
        if shadows_in_one_pass(ctx, templates, target):
            rows = pq.read_metadata(target).num_rows
        else:  # a cell past the sample refused a cast: text first, then the shadows it allows
            text = target.with_name(target.name + ".text")
            try:
                rows = _write_all(ctx, text)
                add_shadows(engine.config, text, target, templates)
            finally:
                text.unlink(missing_ok=True)
    return rows


def _write_all(ctx: SessionContext, target: Path) -> int:
    frame = ctx.sql_with_options(f'SELECT * FROM "{TABLE}"', READ_ONLY)
    return write_batches(target, pa.schema(frame.schema()),
                         (b.to_pyarrow() for b in frame.execute_stream()))


def _full_width(engine: SelectEngine, plan: SelectPlan) -> NativeCsvTable:
    """The native CSV table of the plan's object at its full width (every field of every
    record; a typed table's columns), surveyed whole when planning did not."""
    native = plan.native
    if isinstance(native, DeferredCsvTable):
        survey = engine.surveys.survey(plan.source, native.options, native.compression)
        widest = max(survey.max_fields, survey.header_fields)
        if widest > engine.config.max_columns:
            raise StorageError(f"records of {widest} fields (over --max-columns)")
        resolved, reason = native.resolve(survey)
        if resolved is None:
            raise StorageError(f"not read by DataFusion's CSV reader ({reason})")
        native = resolved
    assert isinstance(native, NativeCsvTable)
    if native.columns is not None:
        return native
    full, reason = native_csv_table(native.location, native.options, native.survey,
                                    width=native.file_width, compression=native.compression,
                                    source=native.source)
    if full is None:
        raise StorageError(f"not read at full width by DataFusion's CSV reader ({reason})")
    return full


def open_cache(folder: str | None, max_bytes: int) -> DecodedCache | None:
    """The engine's decoded cache (``--cache-dir``), or None."""
    return DecodedCache(Path(folder), max_bytes) if folder else None
