"""Hypothesis strategies: a random object (CSV, JSON lines or Parquet) and a random query AST.

Every choice stays inside what the specification defines, so that a mismatch is a question
about the engine and not about the generator. What is left out, and why:

* CSV numbers are read through explicit casts (``CAST(_1 AS INT)``, Ceph's ``int(_1)``):
  CSV fields are strings and how Ceph compares a string column with a number is not
  specified; in the ``aws`` flavour a numeric field is never empty (``CAST('' AS INT)`` is
  an error in both engines' documentation of CAST).
* Divisors are non-zero literals; integers stay small (no overflow); floats have at most
  two decimals and moderate magnitude (their printing is the shortest round trip).
* Strings avoid the CSV delimiter, quote, escape and line ends (CSV parsing has its own
  tests) and ``[`` (a LIKE character class in Ceph, a literal in AWS).
* Any day of its month: ``DATE_ADD(month|year, …)`` clamps the day to the month reached
  (Ceph's ``_fn_add_month_to_timestamp``; the Ion timestamps behind AWS's DATE_ADD).
  ``DATE_DIFF`` only takes day/hour/minute/second (README: instants, truncated toward
  zero); year/month differences are calendar questions left out.
* JSON integers are read as FLOAT operands only: the engine computes with every JSON number
  as a double (``7 / 2`` over the JSON integer 7 is 3.5, not 3; a CAST to string prints
  ``14.0``) — a known gap, a strict xfail in ``test_regressions.py``; as floats the two agree.
* ``IS [NOT] MISSING`` only in the ``aws`` flavour over JSON: MISSING is the AWS/PartiQL
  notion of an absent key; whether a Parquet NULL or a CSV field is MISSING the reference
  does not say (the engine answers ``IS MISSING`` true for a Parquet NULL).
"""

from __future__ import annotations

import calendar
import io
import json
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
from hypothesis import strategies as st

from tests.fuzz.query_ast import (
    BOOL,
    FLOAT,
    INT,
    STR,
    TS,
    Agg,
    Arith,
    Between,
    Call,
    Case,
    Cast,
    Cmp,
    Col,
    In,
    IsTest,
    Like,
    Lit,
    Logic,
    Neg,
    Node,
    Not,
    Query,
)

_ALPHABET = "ab AB%_!é"
_KEY_NAMES = ["price", "Name", "qty", "Ts", "cat", "v"]
_PARTS = ["year", "month", "day", "hour", "minute", "second"]
_DIFF_PARTS = ["day", "hour", "minute", "second"]
_EXTRACT = ["YEAR", "MONTH", "DAY", "HOUR", "MINUTE", "SECOND", "TIMEZONE_HOUR",
            "TIMEZONE_MINUTE"]
_FORMATS = ["yyyy-MM-dd", "yy/M/d", "HH:mm:ss", "h:m a", "MMM d yyyy", "MMMM", "SSS", "ss.SSSSSS",
            "dd-MM-yyyy HH", "yyyyy", "MMMMM"]


@dataclass
class Case_:
    """One fuzz case: the object's bytes, its serialization, its records as the oracle sees
    them, and the query."""

    flavor: str
    source: str
    data: bytes
    input_serialization: dict[str, Any]
    rows: list[Any]
    query: Query


# --------------------------------------------------------------------------- values


def _ints() -> st.SearchStrategy[int]:
    return st.integers(-40, 40)


def _floats() -> st.SearchStrategy[float]:
    return st.integers(-4000, 4000).map(lambda n: n / 100)


def _strings() -> st.SearchStrategy[str]:
    return st.text(_ALPHABET, max_size=6)


@st.composite
def _timestamp_text(draw: Any) -> str:
    year = draw(st.integers(1990, 2030))
    month = draw(st.integers(1, 12))
    day = draw(st.integers(1, calendar.monthrange(year, month)[1]))
    hour, minute, second = draw(st.integers(0, 23)), draw(st.integers(0, 59)), draw(
        st.integers(0, 59))
    shape = draw(st.sampled_from(["Y", "YM", "YMD", "min", "sec", "frac"]))
    text = {"Y": f"{year:04d}T", "YM": f"{year:04d}-{month:02d}T",
            "YMD": f"{year:04d}-{month:02d}-{day:02d}T"}.get(shape)
    if text is not None:
        return text
    text = f"{year:04d}-{month:02d}-{day:02d}T{hour:02d}:{minute:02d}"
    if shape in ("sec", "frac"):
        text += f":{second:02d}"
    if shape == "frac":
        text += "." + draw(st.text("0123456789", min_size=1, max_size=9))
    zone = draw(st.sampled_from(["", "Z", "+00:00", "+05:30", "-07:45", "-01:00"]))
    return text + zone


_DATA = {INT: _ints, FLOAT: _floats, STR: _strings, TS: _timestamp_text}


# --------------------------------------------------------------------------- objects


@dataclass(frozen=True)
class Field:
    """A column of the object: how the query reaches it, and what kind of value it holds."""

    path: tuple[tuple[str, Any], ...]
    spelling: tuple[str, ...]
    data_kind: str
    typed: bool  # True: the engine sees the kind itself (JSON numbers, Parquet columns)
    json_number: bool = False


def _csv_object(draw: Any, flavor: str) -> tuple[bytes, dict[str, Any], list[Any], list[Field]]:
    kinds = draw(st.lists(st.sampled_from([INT, FLOAT, STR, TS]), min_size=1, max_size=4))
    n_rows = draw(st.integers(0, 6))
    texts: list[list[str]] = []
    for _ in range(n_rows):
        row = []
        for kind in kinds:
            empty_ok = flavor == "ceph" or kind == STR
            value = draw(_DATA[kind]())
            text = value if isinstance(value, str) else str(value)
            row.append("" if empty_ok and draw(st.integers(0, 4)) == 0 else text)
        texts.append(row)
    data = "".join(",".join(r) + "\n" for r in texts).encode()
    # an empty line is a record of one NULL field in Ceph and no record in AWS (NOTES.md,
    # "How DataFusion's CSV reader differs from s3-select")
    rows = [[None if (f == "" and flavor == "ceph") else f for f in r] for r in texts
            if flavor == "ceph" or ",".join(r)]
    fields = [Field((("pos", i),), (f"_{i + 1}",), k, False) for i, k in enumerate(kinds)]
    return data, {"CSV": {}}, rows, fields


def _spelled(draw: Any, key: str) -> str:
    flips = draw(st.lists(st.booleans(), min_size=len(key), max_size=len(key)))
    return "".join(c.swapcase() if f else c for c, f in zip(key, flips, strict=True))


def _json_object(draw: Any, flavor: str  # noqa: ARG001 - a builder of _OBJECTS
                 ) -> tuple[bytes, dict[str, Any], list[Any], list[Field]]:
    names = draw(st.lists(st.sampled_from(_KEY_NAMES), min_size=1, max_size=3, unique=True))
    kinds = [draw(st.sampled_from([INT, FLOAT, STR, TS])) for _ in names]
    n_rows = draw(st.integers(0, 6))
    rows: list[dict[str, Any]] = []
    for _ in range(n_rows):
        record: dict[str, Any] = {}
        for name, kind in zip(names, kinds, strict=True):
            presence = draw(st.integers(0, 5))
            if presence == 0:
                continue  # MISSING
            record[name] = None if presence == 1 else draw(_DATA[kind]())
        if draw(st.booleans()):
            record["nest"] = {"x": draw(_ints())} if draw(st.booleans()) else {}
        if draw(st.booleans()):
            record["arr"] = draw(st.lists(_ints(), max_size=3))
        rows.append(record)
    data = "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows).encode()
    fields = [
        Field((("key", n),), (_spelled(draw, n),), k, k != TS, k == INT)
        for n, k in zip(names, kinds, strict=True)
    ]
    fields.append(Field((("key", "nest"), ("key", "x")), ("nest", _spelled(draw, "x")), INT,
                        True, True))
    index = draw(st.integers(0, 3))
    fields.append(Field((("key", "arr"), ("index", index)), ("arr", ""), INT, True, True))
    return data, {"JSON": {"Type": "LINES"}}, rows, fields


_ARROW = {INT: pa.int64(), FLOAT: pa.float64(), STR: pa.string(), TS: pa.string()}


def _parquet_object(draw: Any, flavor: str  # noqa: ARG001 - a builder of _OBJECTS
                    ) -> tuple[bytes, dict[str, Any], list[Any], list[Field]]:
    kinds = draw(st.lists(st.sampled_from([INT, FLOAT, STR, TS]), min_size=1, max_size=4))
    names = [f"c{i}" for i in range(len(kinds))]
    n_rows = draw(st.integers(0, 6))
    rows = [
        {n: (None if draw(st.integers(0, 4)) == 0 else draw(_DATA[k]())) for n, k in
         zip(names, kinds, strict=True)}
        for _ in range(n_rows)
    ]
    table = pa.table({n: pa.array([r[n] for r in rows], _ARROW[k]) for n, k in
                      zip(names, kinds, strict=True)})
    sink = io.BytesIO()
    pq.write_table(table, sink)
    fields = [Field((("key", n),), (n,), k, k != TS) for n, k in zip(names, kinds, strict=True)]
    return sink.getvalue(), {"Parquet": {}}, rows, fields


_OBJECTS = {"csv": _csv_object, "json": _json_object, "parquet": _parquet_object}


# --------------------------------------------------------------------------- expressions


@dataclass
class _Gen:
    draw: Any
    flavor: str
    source: str
    fields: list[Field]

    def choose(self, options: list[Any]) -> Any:
        return self.draw(st.sampled_from(options))

    def column(self, kind: str) -> Node | None:
        """A column read as ``kind``, or None when no column can be."""
        options: list[Node] = []
        for f in self.fields:
            col = Col(f.path, f.data_kind if f.typed else STR, f.spelling)
            if f.json_number and kind == INT:
                continue  # see the module docstring: JSON integers in arithmetic
            if f.data_kind == TS and kind == TS:
                options.append(Call("TO_TIMESTAMP", (col,), TS))
            elif f.typed and f.data_kind == kind:
                options.append(col)
            elif f.typed and f.json_number and kind == FLOAT:
                options.append(Col(f.path, FLOAT, f.spelling))
            elif not f.typed and kind == STR:
                options.append(col)
            elif not f.typed and f.data_kind in (INT, FLOAT) and kind in (INT, FLOAT) and (
                    f.data_kind == INT or kind == FLOAT):
                shorthand = self.flavor == "ceph" and self.draw(st.booleans())
                options.append(Cast(col, kind, shorthand))
        return self.choose(options) if options else None

    def literal(self, kind: str, nullable: bool = True) -> Node:
        if nullable and self.draw(st.integers(0, 9)) == 0:
            return Lit(None, kind)
        if kind == BOOL:
            return Lit(self.draw(st.booleans()), BOOL)
        if kind == TS:
            return Call("TO_TIMESTAMP", (Lit(self.draw(_timestamp_text()), STR),), TS)
        return Lit(self.draw(_DATA[kind]()), kind)

    def leaf(self, kind: str) -> Node:
        col = self.column(kind) if self.draw(st.integers(0, 2)) else None
        return col if col is not None else self.literal(kind)

    def expr(self, kind: str, depth: int) -> Node:
        if depth <= 0 or self.draw(st.integers(0, 3)) == 0:
            return self.leaf(kind) if kind != BOOL else self.predicate(0)
        builder = getattr(self, "_" + kind)
        return builder(depth - 1)

    # ---- per kind

    def _shared(self, kind: str, depth: int) -> Node | None:
        """CASE / COALESCE / NULLIF, which any kind has."""
        pick = self.draw(st.integers(0, 5))
        if pick == 0:
            whens = tuple((self.predicate(depth), self.expr(kind, depth))
                          for _ in range(self.draw(st.integers(1, 2))))
            default = self.expr(kind, depth) if self.draw(st.booleans()) else None
            return Case(whens, default, kind)
        if pick == 1 and kind in (INT, STR):
            subject = self.expr(kind, depth)
            whens = tuple((self.literal(kind, nullable=False), self.expr(kind, depth))
                          for _ in range(self.draw(st.integers(1, 2))))
            return Case(whens, self.expr(kind, depth), kind, subject)
        if pick == 2:
            args = tuple(self.expr(kind, depth) for _ in range(self.draw(st.integers(1, 3))))
            return Call("COALESCE", args, kind)
        if pick == 3 and kind != TS:
            return Call("NULLIF", (self.expr(kind, depth), self.expr(kind, depth)), kind)
        return None

    def _int(self, depth: int) -> Node:
        shared = self._shared(INT, depth)
        if shared is not None:
            return shared
        pick = self.draw(st.integers(0, 5))
        if pick == 0:
            return Call("CHAR_LENGTH", (self.expr(STR, depth),), INT)
        if pick == 1:
            return Call("EXTRACT", (self.expr(TS, depth),), INT, (self.choose(_EXTRACT),))
        if pick == 2:
            return Call("DATE_DIFF", (self.expr(TS, depth), self.expr(TS, depth)), INT,
                        (self.choose(_DIFF_PARTS),))
        if pick == 3:
            return Neg(self.expr(INT, depth), INT)
        op = self.choose(["+", "-", "*", "/", "%"])
        right = (Lit(self.draw(st.integers(1, 9)) * self.choose([1, -1]), INT)
                 if op in "/%" else self.expr(INT, depth))
        return Arith(op, self.expr(INT, depth), right, INT)

    def _float(self, depth: int) -> Node:
        shared = self._shared(FLOAT, depth)
        if shared is not None:
            return shared
        op = self.choose(["+", "-", "*", "/", "%"])
        left = self.expr(FLOAT, depth)
        if op in "/%":
            divisor = self.choose([0.5, 2.0, -4.0, 0.25, 3])
            right: Node = Lit(divisor, INT if isinstance(divisor, int) else FLOAT)
        else:
            right = self.expr(self.choose([INT, FLOAT]), depth)
        if self.draw(st.booleans()):
            left, right = (right, left) if op in "+-*" else (left, right)
        return Arith(op, left, right, FLOAT)

    def _str(self, depth: int) -> Node:
        shared = self._shared(STR, depth)
        if shared is not None:
            return shared
        pick = self.draw(st.integers(0, 6))
        s = self.expr(STR, depth)
        if pick == 0:
            return Call(self.choose(["UPPER", "LOWER"]), (s,), STR)
        if pick == 1:
            return Call("TRIM", (s,), STR)
        if pick == 2:
            chars = Lit(self.draw(st.text("ab !", min_size=1, max_size=2)), STR)
            return Call("TRIM", (s, chars), STR, (self.choose(["BOTH", "LEADING", "TRAILING"]),))
        if pick == 3:
            start = self.draw(st.integers(-2, 5) if self.flavor == "ceph" else st.integers(1, 5))
            args: tuple[Node, ...] = (s, Lit(start, INT))
            if self.draw(st.booleans()):
                args += (Lit(self.draw(st.integers(0, 4)), INT),)
            words = ("FROM",) if self.draw(st.booleans()) else ()
            return Call("SUBSTRING", args, STR, words)
        if pick == 4:
            return Call("TO_STRING", (self.expr(TS, depth), Lit(self.choose(_FORMATS), STR)), STR)
        if pick == 5:
            return Cast(self.expr(INT, depth), STR)
        return s

    def _ts(self, depth: int) -> Node:
        if self.draw(st.booleans()):
            shared = self._shared(TS, depth)
            if shared is not None:
                return shared
        amount = Lit(self.draw(st.integers(-30, 30)), INT)
        base = self.leaf(TS)  # date_add does not nest
        return Call("DATE_ADD", (amount, base), TS, (self.choose(_PARTS),))

    def _bool(self, depth: int) -> Node:
        return self.predicate(depth)

    def predicate(self, depth: int) -> Node:
        pick = self.draw(st.integers(0, 9 if depth > 0 else 6))
        comparable = self.choose([INT, FLOAT, STR, TS, INT, STR])
        d = max(depth, 0)
        if pick == 0:
            return self.literal(BOOL)
        if pick in (1, 2):
            op = self.choose(["=", "<>", "!=", "<", "<=", ">", ">="])
            return Cmp(op, self.expr(comparable, d), self.expr(comparable, d))
        if pick == 3:
            kinds = [INT, FLOAT, STR]
            missing_defined = self.flavor == "aws" and self.source == "json"
            what = "MISSING" if missing_defined and self.draw(st.booleans()) else "NULL"
            operand = self.expr(self.choose(kinds), d)
            if what == "MISSING":
                # a bare path: the reference defines MISSING for an absent key only (the
                # engine also answers true for a computed NULL, which PartiQL would not)
                paths = [Col(f.path, FLOAT if f.json_number else STR, f.spelling)
                         for f in self.fields if f.typed or f.data_kind == TS]
                operand = self.choose(paths)
            return IsTest(operand, what, self.draw(st.booleans()))
        if pick == 4:
            kind = self.choose([INT, FLOAT, STR])
            return Between(self.expr(kind, d), self.expr(kind, d), self.expr(kind, d),
                           self.draw(st.booleans()))
        if pick == 5:
            kind = self.choose([INT, STR, FLOAT])
            items = tuple(self.expr(kind, 0) for _ in range(self.draw(st.integers(1, 3))))
            return In(self.expr(kind, d), items, self.draw(st.booleans()))
        if pick == 6:
            return self._like(d)
        if pick == 7:
            return Not(self.predicate(depth - 1))
        return Logic(self.choose(["AND", "OR"]), self.predicate(depth - 1),
                     self.predicate(depth - 1))

    def _like(self, depth: int) -> Node:
        escape = self.choose([None, "!", "#"])
        pieces = self.draw(st.lists(st.sampled_from(["a", "b", " ", "é", "%", "_", "A", "lit%",
                                                     "lit_", "lit!"]), max_size=4))
        pattern = ""
        for piece in pieces:
            if piece.startswith("lit"):
                if escape is None:
                    continue
                pattern += escape + piece[3:].replace("!", escape)
            else:
                pattern += piece
        return Like(self.expr(STR, depth), pattern, escape, self.draw(st.booleans()))

    def aggregate(self) -> Node:
        name = self.choose(["COUNT", "COUNT*", "SUM", "MIN", "MAX", "AVG"])
        if name == "COUNT*":
            return Agg("COUNT", None, INT)
        kind = self.choose([INT, FLOAT]) if name != "COUNT" else self.choose([INT, STR, FLOAT])
        arg = self.expr(kind, 1)
        result = INT if name == "COUNT" else FLOAT if name == "AVG" else kind
        return Agg(name, arg, result)


@st.composite
def fuzz_cases(draw: Any, flavor: str, source: str) -> Case_:
    """A random object of ``source`` format and a query over it, in ``flavor``."""
    data, serialization, rows, fields = _OBJECTS[source](draw, flavor)
    gen = _Gen(draw, flavor, source, fields)
    if draw(st.integers(0, 3)) == 0:
        select = [gen.aggregate() for _ in range(draw(st.integers(1, 3)))]
    else:
        kinds = [INT, FLOAT, STR, BOOL, TS]
        select = [gen.expr(gen.choose(kinds), 2)
                  for _ in range(draw(st.integers(1, 3)))]
    where = gen.predicate(2) if draw(st.booleans()) else None
    limit = draw(st.integers(0, 5)) if draw(st.integers(0, 3)) == 0 else None
    return Case_(flavor, source, data, serialization, rows,
                 Query(select, where, limit, source))
