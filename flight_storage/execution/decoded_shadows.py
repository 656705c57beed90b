"""Typed shadows of an entry's text columns: a column's cells kept converted beside its text
where the dialect's own cast converts every cell, so ``CAST(_2 AS INT) > 500`` reads integers
(with statistics to prune by) instead of parsing text on every query; and, for a column of
dates and times, the wall-clock timestamp the translator writes under ``extract``/``date_part``
of ``to_timestamp(_5)``, so ``extract(year FROM to_timestamp(_5))`` reads timestamps.

Exact by construction: a shadow is the value of the very SQL fragment the translator writes for
the cast (``COALESCE(TRY_CAST("_2" AS BIGINT), s3_cast_int("_2"))`` today), computed by
DataFusion over the entry's own text when the entry is filled, and stored with that fragment's
text in the entry's metadata. A query is rewritten only where its SQL holds that exact text, so
a flavour or a future translator that writes the cast differently simply does not match. A
column where some cell does not convert (``TRY_CAST`` gives NULL for a non-NULL cell) gets no
shadow: the query keeps the cast and its error.
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Callable, Iterable, Iterator, Sequence
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
from datafusion import SessionContext

from flight_storage.execution import entry_encodings
from flight_storage.execution.plan_types import TABLE, EngineConfig
from flight_storage.execution.session import READ_ONLY, new_session

log = logging.getLogger(__name__)

METADATA_KEY = b"flight-select.shadows"
"""The entry's Parquet metadata key: JSON ``[[shadow column, fragment text], ...]``."""
_PROBES: dict[str, tuple[str, str, str | None]] = {
    "int": ("SELECT CAST(_1 AS INT) FROM s3object", "SELECT ", ' AS "c0" FROM'),
    "float": ("SELECT CAST(_1 AS FLOAT) FROM s3object", "SELECT ", ' AS "c0" FROM'),
    "ts": ("SELECT count(*) FROM s3object WHERE extract(year FROM to_timestamp(_1)) = 2024",
           "date_part('year', ", None),
}
"""Each shadow kind's probe statement over ``_1`` and the text around its fragment in the
translator's SQL (None: up to the call's closing parenthesis): the casts (``CAST(_1 AS
INT)``), and the wall-clock timestamp that ``extract``/``date_part`` of ``to_timestamp(_1)``
read (the ``year`` peer query's)."""
_STAR_PROBES: dict[str, tuple[str, str, str | None]] = {
    "int": ("SELECT * FROM s3object WHERE CAST(_1 AS INT) IS NULL", "WHERE (", ") IS NULL"),
    "float": ("SELECT * FROM s3object WHERE CAST(_1 AS FLOAT) IS NULL", "WHERE (",
              ") IS NULL"),
    "ts": ("SELECT * FROM s3object WHERE extract(year FROM to_timestamp(_1)) = 2024",
           "date_part('year', ", None),
}
"""The probes of an entry read with empty fields kept (``Translation.keeps_empty_fields``:
Ceph's ``SELECT *`` of a CSV prints an empty field as it is, so the reader keeps ``''`` and
the translator reads every field as ``nullif(_N, '')``): only ``SELECT *`` statements read
such an entry, so its fragments are taken from one."""
_PROBE = '"_1"'
SAMPLE_ROWS = 1 << 16
"""Rows whose cells decide which shadows a one-pass fill tries."""
ROW_GROUP_ROWS = 1 << 17
"""Rows per row group of an entry: statistics fine enough to prune, groups large enough to
decode fast."""


def shadow_name(column: str, kind: str) -> str:
    """The shadow column of ``column`` (a name no CSV position takes)."""
    return f"{column}#{kind}"


def fragments(translate: Callable[[str], str], *, keeps_empty_fields: bool = False
              ) -> dict[str, str]:
    """Each kind's fragment for column ``_1`` as the translator writes it (``translate``:
    statement -> DataFusion SQL) in the statements that read the entry: ``SELECT *`` ones
    where the entry keeps empty fields."""
    out = {}
    probes = _STAR_PROBES if keeps_empty_fields else _PROBES
    for kind, (statement, head, tail) in probes.items():
        sql = translate(statement)
        start = sql.find(head) + len(head)
        end = _closing(sql, start) if tail is None else sql.find(tail, start)
        if start >= len(head) and end > start and _PROBE in sql[start:end]:
            out[kind] = sql[start:end]
    return out


def _closing(sql: str, start: int) -> int:
    """The index of the parenthesis closing the call whose arguments run from ``start``
    (quoted text skipped), or -1."""
    depth, quote = 0, ""
    for index in range(start, len(sql)):
        char = sql[index]
        if quote:
            quote = "" if char == quote else quote
        elif char in "'\"":
            quote = char
        elif char == "(":
            depth += 1
        elif char == ")":
            if not depth:
                return index
            depth -= 1
    return -1


def shadows_in_one_pass(ctx: SessionContext, templates: dict[str, str], target: Path) -> bool:
    """Write the table ``TABLE`` of ``ctx`` (the object's CSV reader) with the shadows its
    first :data:`SAMPLE_ROWS` rows suggest, in one pass, or return False when a later cell
    refuses a fragment (or the object cannot be read: the caller's second try says which).

    A fragment of :data:`_FAST` is computed as its plain ``TRY_CAST``, and every batch is
    checked to be where the two agree (a value for every non-NULL cell, finite for floats;
    NULL cells read NULL through the fragment: checked once); any other batch makes the fill
    fall back to the fragments themselves. A float shadow of a column that also has an int
    shadow is not stored when every batch shows it is that int shadow cast to a double, bit
    for bit (a ``-0`` cell is not): the fragment is then read as that cast (``arrow_cast``;
    the entry is smaller by one 8-byte column per such column)."""
    sample = ctx.sql(f'SELECT * FROM "{TABLE}" LIMIT {SAMPLE_ROWS}').to_arrow_table()
    texts = [f.name for f in sample.schema if f.type == pa.string() and f.name.startswith("_")]
    fast = {template: _FAST[template] for template in templates.values()
            if template in _FAST and _null_stays_null(ctx, template)}
    chosen: list[list[str]] = []
    computed: list[str] = []
    checks: list[tuple[int, int, bool, bool]] = []
    width = len(sample.schema)
    for kind, template in templates.items():
        for column in texts:
            if not _SIEVES[kind](sample.column(column)):
                continue
            name = shadow_name(column, kind)
            chosen.append([name, template.replace(_PROBE, f'"{column}"')])
            if template in fast:
                form, empties_null = fast[template]
                computed.append(form.replace(_PROBE, f'"{column}"'))
                checks.append((sample.schema.names.index(column), width + len(computed) - 1,
                               kind == "float", empties_null))
            else:
                computed.append(chosen[-1][1])
    fast_names = {chosen[i][0] for i, expression in enumerate(computed)
                  if expression != chosen[i][1]}
    names = [name for name, _ in chosen]
    derived = []
    for index, (name, _) in enumerate(chosen):
        column, _, kind = name.rpartition("#")
        whole = shadow_name(column, "int")
        if kind == "float" and name in fast_names and whole in fast_names:
            derived.append((width + index, width + names.index(whole)))
            # arrow_cast, not CAST: DataFusion names CAST(x AS DOUBLE) as x, so an aggregate
            # of it beside the same aggregate of the int shadow would share one name
            chosen[index].append(f'arrow_cast("{whole}", \'Float64\')')
    try:
        _write(ctx, sample.schema, chosen, target, computed, checks, derived)
    except Exception:  # DataFusion raises plain exceptions; _NotExact: a fast form differs
        return False
    return True


_FAST: dict[str, tuple[str, bool]] = {
    'COALESCE(TRY_CAST("_1" AS BIGINT), s3_cast_int("_1"))': ('TRY_CAST("_1" AS BIGINT)', False),
    'CASE WHEN TRY_CAST("_1" AS DOUBLE) BETWEEN -1.7976931348623157e308 AND '
    '1.7976931348623157e308 THEN TRY_CAST("_1" AS DOUBLE) ELSE s3_cast_float("_1") END':
        ('TRY_CAST("_1" AS DOUBLE)', False),
    'COALESCE(TRY_CAST(nullif("_1", \'\') AS BIGINT), s3_cast_int(nullif("_1", \'\')))':
        ('TRY_CAST(nullif("_1", \'\') AS BIGINT)', True),
    'CASE WHEN TRY_CAST(nullif("_1", \'\') AS DOUBLE) BETWEEN -1.7976931348623157e308 AND '
    '1.7976931348623157e308 THEN TRY_CAST(nullif("_1", \'\') AS DOUBLE) '
    'ELSE s3_cast_float(nullif("_1", \'\')) END':
        ('TRY_CAST(nullif("_1", \'\') AS DOUBLE)', True),
}
"""Fragments (as the translator writes them for ``_1``) equal to a plain ``TRY_CAST`` wherever
that gives a value (COALESCE's first argument) or a finite value (the CASE's first branch):
computed that way, without the dialect's Python UDF on every row, where every batch shows it
(measured: int shadows of four columns 1.7 CPU-s through the fragment per million rows). The
flag: the fragment reads an empty cell as NULL (``nullif``), so an empty cell is one the fast
form is expected to give NULL for."""


class _NotExact(Exception):
    """A fast form gave NULL for a cell, or a non-finite float: the fragment must decide."""


def _null_stays_null(ctx: SessionContext, template: str) -> bool:
    """Whether the fragment reads a NULL cell as NULL (what its fast form gives)."""
    probe = template.replace(_PROBE, "CAST(NULL AS VARCHAR)")
    try:
        return ctx.sql(f'SELECT {probe} AS "v"').to_pylist()[0]["v"] is None
    except Exception:  # DataFusion raises plain exceptions
        return False


def _nulls(cells: pa.Array, empties_null: bool) -> int:
    """The cells a fragment reads as NULL before converting: NULL ones, and empty ones where
    it reads an empty cell as NULL."""
    nulls = int(cells.null_count)
    if empties_null:
        nulls += int(pc.sum(pc.equal(cells, "")).as_py() or 0)
    return nulls


def _checked(batches: Iterable[pa.RecordBatch], checks: list[tuple[int, int, bool, bool]],
             derived: list[tuple[int, int]]) -> Iterator[pa.RecordBatch]:
    """``batches`` checked (see :func:`shadows_in_one_pass`), without the ``derived`` float
    columns (each ``(float, int)`` position), which must equal their int column cast."""
    dropped = sorted((position for position, _ in derived), reverse=True)
    for batch in batches:
        for text, shadow, finite, empties_null in checks:
            values = batch.column(shadow)
            if values.null_count != _nulls(batch.column(text), empties_null):
                raise _NotExact("a cell the fast form does not convert")
            if finite and values.null_count < len(values) and not pc.all(
                    pc.is_finite(values)).as_py():
                raise _NotExact("a value the fast form reads as infinite or NaN")
        for floats, whole in derived:
            cast = pc.cast(batch.column(whole), pa.float64(), safe=False)
            same = pc.equal(cast.view(pa.int64()), batch.column(floats).view(pa.int64()))
            if same.null_count != cast.null_count or pc.all(same).as_py() not in (True, None):
                raise _NotExact("a float shadow is not its int shadow cast")
        for position in dropped:
            batch = batch.remove_column(position)
        yield batch


def add_shadows(config: EngineConfig, text: Path, target: Path,
                templates: dict[str, str]) -> list[tuple[str, str]]:
    """Write ``text``'s columns and the shadows every cell converts for to ``target`` (row
    groups kept), returning ``[(shadow, fragment)]``; no shadows when none qualifies (the text
    is copied as it is)."""
    ctx = new_session(config, partitions=1)
    ctx.register_parquet(TABLE, str(text), file_extension=text.name[-8:])
    schema = pq.read_schema(text)
    texts = [f.name for f in schema
             if entry_encodings.is_text(f.type) and f.name.startswith("_")]
    chosen = [(shadow_name(column, kind), template.replace(_PROBE, f'"{column}"'))
              for kind, template in templates.items()
              for column in _passing(text, texts, _SIEVES[kind])]
    try:  # the usual case: every sieved column converts; one pass writes the entry
        _write(ctx, schema, chosen, target)
    except Exception:  # DataFusion raises plain exceptions: a cell some fragment refuses
        chosen = [(name, fragment) for name, fragment in chosen
                  if _evaluates(ctx, [fragment])]
        _write(ctx, schema, chosen, target)
    return chosen


def _write(ctx: SessionContext, schema: pa.Schema, chosen: Sequence[Sequence[str]],
           target: Path, computed: list[str] | None = None,
           checks: list[tuple[int, int, bool, bool]] | None = None,
           derived: list[tuple[int, int]] | None = None) -> None:
    """Write the text columns and the ``chosen`` shadows (``[name, fragment]``, or ``[name,
    fragment, expression]`` for one read as an expression over another shadow and not
    stored; computed by ``computed``, each fragment itself unless told) to ``target``, the
    fragments in its metadata."""
    expressions = computed if computed is not None else [item[1] for item in chosen]
    select = ", ".join([f'"{c}"' for c in schema.names]
                       + [f'{expression} AS "{item[0]}"'
                          for item, expression in zip(chosen, expressions, strict=True)])
    frame = ctx.sql_with_options(f'SELECT {select} FROM "{TABLE}"', READ_ONLY)
    out_schema = pa.schema(frame.schema())
    for position, _ in sorted(derived or [], reverse=True):
        out_schema = out_schema.remove(position)
    out_schema = out_schema.with_metadata({METADATA_KEY: json.dumps(chosen).encode()})
    batches = (b.to_pyarrow() for b in frame.execute_stream())
    write_batches(target, out_schema, _checked(batches, checks or [], derived or []))


def _passing(text: Path, columns: list[str], sieve: Callable[[pa.ChunkedArray], bool]
             ) -> list[str]:
    """The columns whose every cell passes ``sieve`` (a cheap first sieve; the fragment's own
    evaluation decides)."""
    file = pq.ParquetFile(text)
    return [column for column in columns
            if all(sieve(batch.column(0))
                   for batch in file.iter_batches(columns=[column], batch_size=1 << 16))]


def _converts(cells: pa.Array | pa.ChunkedArray, data_type: pa.DataType) -> bool:
    try:
        pc.cast(pc.utf8_trim_whitespace(cells), data_type, safe=True)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
        return False
    return True


def _dated(cells: pa.Array | pa.ChunkedArray) -> bool:
    """Whether every cell starts as a timestamp's text does (a timestamp shadow is tried)."""
    if cells.null_count == len(cells):
        return False
    return bool(pc.all(pc.match_substring_regex(cells, _DATE_START)).as_py() is not False)


_DATE_START = r"^\s*[0-9]{4}(-[0-9]{2}){0,2}T"
"""The start of every form of S3 Select's timestamp text (``2024T`` .. ``2024-08-16T10:11Z``)."""
_SIEVES: dict[str, Callable[[pa.Array | pa.ChunkedArray], bool]] = {
    "int": lambda cells: _converts(_empty_as_null(cells), pa.int64()),
    "float": lambda cells: _converts(_empty_as_null(cells), pa.float64()),
    "ts": lambda cells: _dated(_empty_as_null(cells)),
}
"""What a column's cells must pass (a sample's, or every cell) for a fill to try each kind; an
empty cell passes (where empty fields are kept, the fragment reads it as NULL; elsewhere the
fragment's own evaluation decides)."""


def _empty_as_null(cells: pa.Array | pa.ChunkedArray) -> pa.Array | pa.ChunkedArray:
    """``cells`` as plain text (a text file's dictionary column decoded), empty ones NULL."""
    if pa.types.is_dictionary(cells.type):
        cells = pc.cast(cells, cells.type.value_type)
    return pc.if_else(pc.equal(cells, ""), pa.scalar(None, cells.type), cells)


def _evaluates(ctx: SessionContext, expressions: list[str]) -> bool:
    """Whether DataFusion evaluates every expression on every row without an error."""
    listed = ", ".join(f'{e} AS "s{i}"' for i, e in enumerate(expressions))
    try:
        for _ in ctx.sql_with_options(f'SELECT {listed} FROM "{TABLE}"',
                                      READ_ONLY).execute_stream():
            pass
    except Exception:  # DataFusion raises plain exceptions: a cell the cast refuses
        return False
    return True


def write_batches(target: Path, schema: pa.Schema, batches: Iterable[pa.RecordBatch]) -> int:
    """Write ``batches`` as an entry (zstd, statistics, page index, row groups of
    :data:`ROW_GROUP_ROWS`, each column's encoding chosen on the first group by
    :func:`entry_encodings.choose`, text of few distinct values typed as a dictionary);
    returns the rows written."""
    rows, pending, held = 0, [], 0
    writer: pq.ParquetWriter | None = None
    stored = schema

    def write(table: pa.Table) -> None:
        nonlocal writer, stored
        if writer is None:
            chosen = entry_encodings.choose(table)
            stored = entry_encodings.entry_schema(schema, chosen)
            writer = pq.ParquetWriter(target, stored, compression="zstd",
                                      write_statistics=True, write_page_index=True,
                                      **chosen.writer_options())
        if stored != schema:  # one dictionary per column of the group: a dictionary that
            # changes between chunks makes the writer fall back to plain pages, which a reader
            # must hash back into a dictionary (measured 7x slower to read)
            table = table.combine_chunks().cast(stored)
        writer.write_table(table, row_group_size=ROW_GROUP_ROWS)

    try:
        for batch in batches:
            pending.append(batch)
            held += batch.num_rows
            if held >= ROW_GROUP_ROWS:
                write(pa.Table.from_batches(pending, schema))
                rows, pending, held = rows + held, [], 0
        if pending or writer is None:
            write(pa.Table.from_batches(pending, schema))
            rows += held
    finally:
        if writer is not None:
            writer.close()
    return rows


_LITERAL = re.compile(r"'(?:[^']|'')*'")


_ITEM_STAR = re.compile(r'^(DISTINCT\s+)?((?:"?\w+"?\.)?)\*$', re.IGNORECASE)


def _blanked(sql: str) -> str:
    """``sql`` with every string literal's text blanked (same length: positions hold)."""
    return _LITERAL.sub(lambda m: "'" + " " * (len(m.group()) - 2) + "'", sql)


def _select_items(sql: str) -> list[tuple[int, int]]:
    """The spans of the statement's own select list items (its first select list, at
    parenthesis depth 0); none when it is not a SELECT."""
    text = _blanked(sql)
    head = len(text) - len(text.lstrip())
    if text[head:head + 6].upper() != "SELECT":
        return []
    depth, start, items = 0, head + 6, []
    i = start
    while i < len(text):
        char = text[i]
        if char == "(":
            depth += 1
        elif char == ")":
            depth -= 1
        elif depth == 0 and char == ",":
            items.append((start, i))
            start = i + 1
        elif depth == 0 and text[i:i + 6].upper() == " FROM ":
            break
        i += 1
    items.append((start, i))
    return items


def selects_star(sql: str) -> bool:
    """Whether the statement's own projection has ``*`` or ``t.*`` (a ``*`` inside a
    subquery the outer list names columns of is harmless)."""
    return any(_ITEM_STAR.match(sql[a:b].strip()) for a, b in _select_items(sql))


_FROM_THE_TABLE = re.compile(
    r'\s*FROM\s+"s3object"(?:\s+(?:AS\s+)?(?!WHERE\b|GROUP\b|ORDER\b|LIMIT\b|HAVING\b)'
    r'"?\w+"?)?\s*(?:WHERE\b|GROUP\b|ORDER\b|LIMIT\b|HAVING\b|$)', re.IGNORECASE)
"""What follows a select list whose star is the table's columns: the table alone."""


def _star_expanded(sql: str, columns: Sequence[str]) -> str | None:
    """``sql`` with each ``*`` (or ``t.*``) of its own select list written as the table's
    ``columns``, so that the shadow columns the view adds never become columns of the
    answer (the names and their order are the star's); None when the statement reads more
    than the table ``s3object`` (a subquery or a join: its star is not the table's)."""
    items = _select_items(sql)
    if not _FROM_THE_TABLE.match(_blanked(sql)[items[-1][1]:]):
        return None
    quoted = ['"' + c.replace('"', '""') + '"' for c in columns]
    for a, b in reversed(_select_items(sql)):
        match = _ITEM_STAR.match(sql[a:b].strip())
        if match is None:
            continue
        distinct, qualifier = match.group(1) or "", match.group(2)
        listed = ", ".join(qualifier + name for name in quoted)
        sql = f"{sql[:a]} {distinct}{listed}{sql[b:]}"
    return sql


def rewrite(sql: str, entry_schema: pa.Schema, columns: Sequence[str]) -> str:
    """``sql`` with each fragment the entry has a shadow of replaced by the shadow column
    (never inside a string literal: a statement whose literal holds the text is left as it
    is). A statement projecting ``*`` has its star written as the table's ``columns`` first
    (the view shows the shadows it reads: ``*`` would show them too)."""
    raw = (entry_schema.metadata or {}).get(METADATA_KEY)
    if not raw:
        return sql
    expanded = _star_expanded(sql, columns) if selects_star(sql) else sql
    if expanded is None:
        return sql
    out = expanded
    for name, fragment, *expression in json.loads(raw):
        out = _replaced(out, fragment, expression[0] if expression else f'"{name}"')
    return sql if out == expanded else out


def _replaced(sql: str, fragment: str, column: str) -> str:
    """``sql`` with each occurrence of ``fragment`` replaced by ``column``, or unchanged when
    one starts inside a string literal (a fragment holds balanced literals of its own: one
    that starts outside a literal ends outside)."""
    literals = [m.span() for m in _LITERAL.finditer(sql)]
    starts, at = [], sql.find(fragment)
    while at >= 0:
        if any(start < at < end for start, end in literals):
            return sql
        starts.append(at)
        at = sql.find(fragment, at + len(fragment))
    for at in reversed(starts):
        sql = sql[:at] + column + sql[at + len(fragment):]
    return sql


def cheap_filter(sql: str) -> bool:
    """Whether the statement's filter is plain comparisons of columns and literals (no call,
    cast or parenthesis), which DataFusion's Parquet reader evaluates faster while decoding
    (``pushdown_filters``); an expensive predicate (a UDF, a regex) measured 3x slower there
    than above the scan."""
    where = _LITERAL.sub("''", sql).upper().split(" WHERE ", 1)
    return len(where) == 2 and "(" not in where[1]
