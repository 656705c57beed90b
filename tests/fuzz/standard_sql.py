"""Hypothesis strategies for the standard flavour: a CSV with a header and a standard-SQL query,
written twice, once for our engine and once for DuckDB (the oracle of the standard surface).

The CSV is untyped, as a user's own file is: every field is text. Queries use what standard SQL
and our standard flavour share with DuckDB: text columns as text (compared, ordered, grouped,
``MIN``/``MAX``), explicit casts to ``BIGINT``, ``DOUBLE`` and ``TIMESTAMP``, arithmetic on
numbers, ``CASE``/``COALESCE``/``NULLIF``, comparisons, ``BETWEEN``, ``IN``, ``LIKE … ESCAPE``,
``IS [NOT] NULL``, ``UPPER``/``LOWER``/``TRIM``/``SUBSTRING``/``CHAR_LENGTH``/``||``,
``EXTRACT``, ``COUNT``/``SUM``/``AVG``/``MIN``/``MAX``, ``GROUP BY``, ``HAVING``, ``ORDER BY``,
``DISTINCT`` and ``LIMIT``. Both sides read the same bytes: DuckDB with ``read_csv`` (header,
every column VARCHAR, RFC 4180 quoting, no NULL string, as AWS's rules read a field).

Left out, because the two differ by definition, not by a bug (each is documented):

* Integer ``/``: ours is DataFusion's and PostgreSQL's (``7 / 2`` is 3, truncated toward zero);
  DuckDB's ``/`` is a double, so DuckDB's side is written ``//`` (which truncates too).
* A number literal is a DOUBLE in ours and a DECIMAL in DuckDB: DuckDB's side casts it.
* Text compared with a number: a text column is read as a number (DataFusion's rule, NULL
  where it is none); DuckDB refuses ``<`` and casts for ``=``, raising on text that is no
  number. (A string literal beside a number is cast to it in both, or refused.) Comparisons
  are generated between values of one type.
* ``SUBSTRING`` from a start below 1: AWS's function (which standard keeps) counts from 1,
  SQL's uses up the length. Starts are >= 1.
* Timestamps with a zone (``+02:00``): DataFusion converts to UTC, DuckDB's ``TIMESTAMP``
  drops the offset. More than 6 fraction digits: DuckDB keeps microseconds. Neither is made.
* ``CAST`` of a timestamp or a double to text (each engine prints its own way), ``[``
  in LIKE patterns (S3 Select's character classes), ``NULL`` ordering without ``NULLS
  FIRST/LAST`` (DataFusion puts NULLs first in ``DESC``, DuckDB last): always written out.
* s3-select's own functions (``TO_TIMESTAMP``, ``DATE_ADD``, ``DATE_DIFF``, ``TO_STRING``,
  ``UTCNOW``): DuckDB has no such functions; the s3-select oracle (:mod:`tests.fuzz.oracle`)
  covers them.
"""

from __future__ import annotations

import csv
import io
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from hypothesis import assume
from hypothesis import strategies as st

INT, FLOAT, STR, BOOL, TS = "int", "float", "str", "bool", "ts"
_WORD_ALPHABET = 'abAB é%_,"19'
_PARTS = ["YEAR", "MONTH", "DAY", "HOUR", "MINUTE", "SECOND"]
_COLUMN_PREFIX = {INT: "n", FLOAT: "f", STR: "w", TS: "t"}


@dataclass(frozen=True)
class Sql:
    """One expression as each engine reads it."""

    ours: str
    duck: str
    kind: str

    @staticmethod
    def same(text: str, kind: str) -> Sql:
        return Sql(text, text, kind)


@dataclass
class StandardCase:
    """An object and one query over it, in both spellings: a CSV with a header (``source``
    ``csv``) or JSON Lines (``json``, :mod:`tests.fuzz.standard_json`)."""

    data: bytes
    columns: list[tuple[str, str]]  # (name, CSV: the kind of text its fields hold; JSON: its type)
    ours: str
    duck: str
    ordered: bool  # the rows' order is part of the answer (ORDER BY over every column)
    source: str = "csv"


# --------------------------------------------------------------------------- data


@st.composite
def _timestamp_text(draw: Any) -> str:
    year, month, day = draw(st.integers(1995, 2030)), draw(st.integers(1, 12)), draw(
        st.integers(1, 28))
    date = f"{year:04d}-{month:02d}-{day:02d}"
    if draw(st.integers(0, 5)) == 0:
        return date
    hour, minute, second = (draw(st.integers(0, 23)), draw(st.integers(0, 59)),
                            draw(st.integers(0, 59)))
    text = f"{date}{draw(st.sampled_from([' ', 'T']))}{hour:02d}:{minute:02d}:{second:02d}"
    if draw(st.booleans()):
        text += "." + draw(st.text("0123456789", min_size=1, max_size=6))
    return text


_VALUES = {
    INT: st.integers(-50, 50).map(str),
    FLOAT: st.integers(-5000, 5000).map(lambda n: str(n / 100)),
    STR: st.text(_WORD_ALPHABET, max_size=5),
    TS: _timestamp_text(),
}


@st.composite
def _csv(draw: Any) -> tuple[bytes, list[tuple[str, str]]]:
    kinds = draw(st.lists(st.sampled_from([INT, FLOAT, STR, STR, TS]), min_size=1, max_size=4))
    columns = [(f"{_COLUMN_PREFIX[k]}{i}", k) for i, k in enumerate(kinds, start=1)]
    rows = [[draw(_VALUES[k]) for k in kinds] for _ in range(draw(st.integers(0, 8)))]
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow([name for name, _ in columns])
    writer.writerows(rows)
    return out.getvalue().encode(), columns


# --------------------------------------------------------------------------- expressions


def _quote(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


def _text_reads(name: str, holds: str, kind: str) -> Sql | None:
    """A text column read as ``kind``: as itself, numbers and timestamps by a cast (None: it
    cannot be)."""
    if kind == STR:
        return Sql.same(name, STR)  # every field is text, digits included
    if kind == INT and holds == INT:
        return Sql.same(f"CAST({name} AS BIGINT)", INT)
    if kind == FLOAT and holds in (INT, FLOAT):
        return Sql.same(f"CAST({name} AS DOUBLE)", FLOAT)
    if kind == TS and holds == TS:
        return Sql.same(f"CAST({name} AS TIMESTAMP)", TS)
    return None


@dataclass
class _Gen:
    draw: Any
    columns: list[tuple[str, str]]
    reads: Callable[[str, str, str], Sql | None] = field(default=_text_reads)
    """How a column (name, what it holds) reads as an expression kind."""
    prefer_columns: bool = False
    """Pick, three times in four, an expression kind some column reads as (typed columns,
    where most kinds have none)."""

    def choose(self, options: list[Any]) -> Any:
        return self.draw(st.sampled_from(options))

    def kind(self, options: list[str]) -> str:
        """An expression kind of ``options`` (see :attr:`prefer_columns`)."""
        if self.prefer_columns and self.draw(st.integers(0, 3)):
            read = [k for k in options if self._read_as(k)]
            if read:
                return self.choose(read)
        return self.choose(options)

    def column(self, kind: str) -> Sql | None:
        """A column read as ``kind`` (:attr:`reads`), None when none can be."""
        options = [s for s in (self.reads(n, h, kind) for n, h in self.columns) if s is not None]
        return self.choose(options) if options else None

    def any_column(self) -> Sql:
        """Some column as it is (a GROUP BY key of whatever type)."""
        name = self.choose([name for name, _ in self.columns])
        return Sql.same(name, STR)

    def literal(self, kind: str, nullable: bool = True) -> Sql:
        if nullable and self.draw(st.integers(0, 12)) == 0:
            sql_type = {INT: "BIGINT", FLOAT: "DOUBLE", STR: "VARCHAR", BOOL: "BOOLEAN",
                        TS: "TIMESTAMP"}[kind]
            return Sql.same(f"CAST(NULL AS {sql_type})", kind)
        if kind == INT:
            value = self.draw(st.integers(-20, 20))
            return Sql.same(f"({value})" if value < 0 else str(value), INT)
        if kind == FLOAT:
            text = str(self.draw(st.integers(-2000, 2000)) / 100)
            return Sql(f"({text})", f"CAST({text} AS DOUBLE)", FLOAT)
        if kind == STR:
            return Sql.same(_quote(self.draw(st.text(_WORD_ALPHABET, max_size=4))), STR)
        if kind == TS:
            return Sql.same(f"CAST({_quote(self.draw(_timestamp_text()))} AS TIMESTAMP)", TS)
        return Sql.same(self.choose(["TRUE", "FALSE"]), BOOL)

    def _read_as(self, kind: str) -> bool:
        """Whether some column reads as ``kind``."""
        return any(self.reads(n, h, kind) is not None for n, h in self.columns)

    def _bool_columns(self) -> list[str]:
        """``[BOOL]`` where a column is a boolean (compared and aggregated as the others)."""
        return [BOOL] if self._read_as(BOOL) else []

    def leaf(self, kind: str) -> Sql:
        found = self.column(kind) if self.draw(st.integers(0, 3)) else None
        return found if found is not None else self.literal(kind)

    def expr(self, kind: str, depth: int) -> Sql:
        if kind == BOOL:
            return self.predicate(depth)
        if depth <= 0 or self.draw(st.integers(0, 2)) == 0:
            return self.leaf(kind)
        shared = self._shared(kind, depth - 1)
        if shared is not None:
            return shared
        builder: Any = getattr(self, "_" + kind)
        result: Sql = builder(depth - 1)
        return result

    def _shared(self, kind: str, depth: int) -> Sql | None:
        """CASE, COALESCE, NULLIF: every type has them."""
        pick = self.draw(st.integers(0, 7))
        if pick == 0:
            condition, then, other = (self.predicate(depth), self.expr(kind, depth),
                                      self.expr(kind, depth))
            return Sql(f"(CASE WHEN {condition.ours} THEN {then.ours} ELSE {other.ours} END)",
                       f"(CASE WHEN {condition.duck} THEN {then.duck} ELSE {other.duck} END)",
                       kind)
        if pick == 1:
            return self._call("COALESCE", [self.expr(kind, depth), self.expr(kind, depth)], kind)
        if pick == 2:
            return self._call("NULLIF", [self.expr(kind, depth), self.expr(kind, depth)], kind)
        return None

    @staticmethod
    def _call(name: str, args: list[Sql], kind: str, duck_name: str | None = None) -> Sql:
        return Sql(f"{name}({', '.join(a.ours for a in args)})",
                   f"{duck_name or name}({', '.join(a.duck for a in args)})", kind)

    @staticmethod
    def _binary(left: Sql, op: str, right: Sql, kind: str, duck_op: str | None = None) -> Sql:
        return Sql(f"({left.ours} {op} {right.ours})",
                   f"({left.duck} {duck_op or op} {right.duck})", kind)

    def _int(self, depth: int) -> Sql:
        pick = self.draw(st.integers(0, 4))
        if pick == 0:
            return self._call("CHAR_LENGTH", [self.expr(STR, depth)], INT)
        if pick == 1:
            ts = self.expr(TS, depth)
            part = self.choose(_PARTS)
            return Sql(f"EXTRACT({part} FROM {ts.ours})", f"EXTRACT({part} FROM {ts.duck})", INT)
        op = self.choose(["+", "-", "*", "/", "%"])
        if op in "/%":
            divisor = self.draw(st.integers(1, 7)) * self.choose([1, -1])
            right = Sql.same(f"({divisor})", INT)
            return self._binary(self.expr(INT, depth), op, right, INT, "//" if op == "/" else op)
        return self._binary(self.expr(INT, depth), op, self.expr(INT, depth), INT)

    def _float(self, depth: int) -> Sql:
        op = self.choose(["+", "-", "*", "/", "%"])
        left = self.expr(FLOAT, depth)
        if op in "/%":
            divisor = self.choose(["0.5", "2.0", "-4.0", "0.25", "3.0"])
            return self._binary(left, op, Sql(divisor, f"CAST({divisor} AS DOUBLE)", FLOAT),
                                FLOAT)
        right = self.expr(self.kind([INT, FLOAT]), depth)
        if self.draw(st.booleans()):
            left, right = right, left
        return self._binary(left, op, right, FLOAT)

    def _str(self, depth: int) -> Sql:
        pick = self.draw(st.integers(0, 6))
        s = self.expr(STR, depth)
        if pick == 0:
            return self._call(self.choose(["UPPER", "LOWER"]), [s], STR)
        if pick == 1:
            return self._call("TRIM", [s], STR)
        if pick == 2:
            side = self.choose(["BOTH", "LEADING", "TRAILING"])
            chars = _quote(self.draw(st.text("ab %", min_size=1, max_size=2)))
            return Sql(f"TRIM({side} {chars} FROM {s.ours})", f"TRIM({side} {chars} FROM {s.duck})",
                       STR)
        if pick == 3:
            start = self.draw(st.integers(1, 5))
            if self.draw(st.booleans()):
                length = self.draw(st.integers(0, 4))
                return Sql(f"SUBSTRING({s.ours} FROM {start} FOR {length})",
                           f"SUBSTRING({s.duck} FROM {start} FOR {length})", STR)
            return Sql(f"SUBSTRING({s.ours} FROM {start})", f"SUBSTRING({s.duck} FROM {start})",
                       STR)
        if pick == 4:
            return self._binary(s, "||", self.expr(STR, depth), STR)
        if pick == 5:
            number = self.expr(INT, depth)
            return Sql(f"CAST({number.ours} AS VARCHAR)", f"CAST({number.duck} AS VARCHAR)", STR)
        return s

    def _ts(self, depth: int) -> Sql:  # noqa: ARG002 - every kind's builder takes the depth
        return self.leaf(TS)

    def predicate(self, depth: int) -> Sql:
        pick = self.draw(st.integers(0, 9 if depth > 0 else 6))
        # a boolean operand is a predicate: only where the depth bounds it
        kind = self.kind([INT, FLOAT, STR, STR, TS, *(self._bool_columns() if depth else [])])
        d = max(depth - 1, 0)
        if pick == 0:
            return self.leaf(BOOL)
        if pick in (1, 2):
            op = self.choose(["=", "<>", "<", "<=", ">", ">="])
            left = self.expr(kind, d)
            if kind == TS and self.draw(st.booleans()):  # SQL casts the text to a timestamp
                text = _quote(self.draw(_timestamp_text()))
                return self._binary(left, op, Sql.same(text, STR), BOOL)
            return self._binary(left, op, self.expr(kind, d), BOOL)
        if pick == 3:
            operand = self.expr(kind, d)
            word = self.choose(["IS NULL", "IS NOT NULL"])
            return Sql(f"({operand.ours} {word})", f"({operand.duck} {word})", BOOL)
        if pick == 4:
            a, b, c = self.expr(kind, d), self.expr(kind, d), self.expr(kind, d)
            word = self.choose(["BETWEEN", "NOT BETWEEN"])
            return Sql(f"({a.ours} {word} {b.ours} AND {c.ours})",
                       f"({a.duck} {word} {b.duck} AND {c.duck})", BOOL)
        if pick == 5:
            subject = self.expr(kind, d)
            items = [self.literal(kind, nullable=False) for _ in range(self.draw(
                st.integers(1, 3)))]
            word = self.choose(["IN", "NOT IN"])
            return Sql(f"({subject.ours} {word} ({', '.join(i.ours for i in items)}))",
                       f"({subject.duck} {word} ({', '.join(i.duck for i in items)}))", BOOL)
        if pick == 6:
            return self._like(d)
        if pick == 7:
            inner = self.predicate(depth - 1)
            return Sql(f"(NOT {inner.ours})", f"(NOT {inner.duck})", BOOL)
        return self._binary(self.predicate(depth - 1), self.choose(["AND", "OR"]),
                            self.predicate(depth - 1), BOOL)

    def _like(self, depth: int) -> Sql:
        escape = self.choose([None, "!", "#"])
        pattern = ""
        for piece in self.draw(st.lists(st.sampled_from(
                ["a", "b", " ", "é", "%", "_", "A", "1", "lit%", "lit_"]), max_size=4)):
            if piece.startswith("lit"):
                pattern += (escape + piece[3:]) if escape else ""
            else:
                pattern += piece
        subject = self.expr(STR, depth)
        word = self.choose(["LIKE", "NOT LIKE"])
        tail = f" ESCAPE {_quote(escape)}" if escape else ""
        return Sql(f"({subject.ours} {word} {_quote(pattern)}{tail})",
                   f"({subject.duck} {word} {_quote(pattern)}{tail})", BOOL)

    def aggregate(self) -> Sql:
        name = self.choose(["COUNT*", "COUNT", "SUM", "AVG", "MIN", "MAX", "MIN", "MAX"])
        if name == "COUNT*":
            return Sql.same("COUNT(*)", INT)
        if name in ("SUM", "AVG"):
            kind = self.kind([INT, FLOAT])
        else:
            kind = self.kind([INT, FLOAT, STR, STR, TS, *self._bool_columns()])
        arg = self.expr(kind, 1)
        result = INT if name == "COUNT" else FLOAT if name == "AVG" else kind
        return self._call(name, [arg], result)


def _order_by(count: int) -> str:
    return " ORDER BY " + ", ".join(f"{i} NULLS FIRST" for i in range(1, count + 1))


@st.composite
def standard_cases(draw: Any) -> StandardCase:
    """A CSV with a header and a standard-SQL query over it, for our engine and for DuckDB."""
    data, columns = draw(_csv())
    ours, duck, ordered = query_texts(draw, _Gen(draw, columns))
    return StandardCase(data, columns, ours, duck, ordered)


def _select_items(draw: Any, gen: _Gen, shape: str
                  ) -> tuple[list[Sql], Sql | None, Sql | None]:
    """The items a query of ``shape`` selects (none: ``SELECT *``), its GROUP BY key and its
    HAVING condition."""
    if shape == "aggregate":
        return [gen.aggregate() for _ in range(draw(st.integers(1, 3)))], None, None
    if shape == "grouped":
        # a column (a literal in GROUP BY would be an ordinal), as text or cast
        key = gen.column(gen.kind([STR, STR, INT, TS])) or gen.any_column()
        items = [key] + [gen.aggregate() for _ in range(draw(st.integers(1, 2)))]
        having = None
        if draw(st.booleans()):
            measure = gen.aggregate()
            having = gen._binary(measure, draw(st.sampled_from(["=", "<>", "<", ">="])),
                                 gen.literal(measure.kind, nullable=False), BOOL)
        return items, key, having
    if shape == "star":
        return [], None, None
    return [gen.expr(gen.kind([INT, FLOAT, STR, STR, BOOL, TS]), 2)
            for _ in range(draw(st.integers(1, 3)))], None, None


def query_texts(draw: Any, gen: _Gen, *, star: bool = False) -> tuple[str, str, bool]:
    """One query over the table ``gen`` reads, in our spelling and DuckDB's, and whether its
    rows' order is part of the answer (``star``: ``SELECT *`` is one of its shapes)."""
    shapes = ["rows", "rows", "aggregate", "grouped", "distinct"] + (["star"] if star else [])
    shape = draw(st.sampled_from(shapes))
    where = gen.predicate(2) if draw(st.booleans()) else None
    items, key, having = _select_items(draw, gen, shape)
    texts = []
    for side in ("ours", "duck"):
        select = ", ".join(f"{getattr(item, side)} AS x{i}" for i, item in enumerate(items))
        distinct = "DISTINCT " if shape == "distinct" else ""
        table = "s3object" if side == "ours" else "t"
        text = f"SELECT {distinct}{select or '*'} FROM {table}"
        if where is not None:
            text += f" WHERE {getattr(where, side)}"
        if key is not None:
            text += f" GROUP BY {getattr(key, side)}"
        if having is not None:
            text += f" HAVING {getattr(having, side)}"
        texts.append(text)
    ordered = shape == "grouped" or (shape == "rows" and draw(st.booleans()))
    if ordered:
        suffix = _order_by(len(items))
        if shape == "rows" and draw(st.booleans()):
            suffix += f" LIMIT {draw(st.integers(0, 4))}"
        texts = [t + suffix for t in texts]
    return texts[0], texts[1], ordered


@st.composite
def join_cases(draw: Any) -> StandardCase:
    """A CSV with a header and a JOIN of the object with an aggregate of itself, statements
    DataFusion plans over the tables they name (``rpc/tables/sql.py``): rows of generated
    expressions beside a text key, joined (inner or left) on the key with the key's count.

    DataFusion reads these statements as written, so what differs from DuckDB by DataFusion's
    definition is left out: ``LIKE … ESCAPE`` with another character than ``\\`` (DataFusion
    refuses it; the s3-select path rewrites it)."""
    data, columns = draw(_csv())
    ours, duck = join_texts(draw, _Gen(draw, columns))
    return StandardCase(data, columns, ours, duck, False)


def join_texts(draw: Any, gen: _Gen) -> tuple[str, str]:
    """A JOIN of the table ``gen`` reads with an aggregate of itself (see :func:`join_cases`;
    a table without a text column is keyed by another column), in our spelling and DuckDB's."""
    key = gen.column(STR)
    text_key = key is not None
    key = key or gen.any_column()
    items = [gen.expr(gen.kind([INT, FLOAT, STR, STR, TS]), 1)
             for _ in range(draw(st.integers(1, 2)))]
    where = gen.predicate(1) if draw(st.booleans()) else None
    join = draw(st.sampled_from(["JOIN", "LEFT JOIN"]))
    kept = f"{key.ours} <> 'a'" if text_key else f"{key.ours} IS NOT NULL"
    texts = []
    for side in ("ours", "duck"):
        table = "s3object" if side == "ours" else "t"
        select = ", ".join(f"{getattr(item, side)} AS x{i}" for i, item in enumerate(items))
        rows = f"SELECT {key.ours} AS k, {select} FROM {table}"
        if where is not None:
            rows += f" WHERE {getattr(where, side)}"
        counts = (f"SELECT {key.ours} AS k, count(*) AS n FROM {table} "
                  f"WHERE {kept} GROUP BY {key.ours}")
        texts.append(f"SELECT l.*, r.n FROM ({rows}) AS l {join} ({counts}) AS r ON l.k = r.k")
    assume(" ESCAPE " not in texts[0])
    return texts[0], texts[1]
