"""A row-at-a-time reference evaluator of the fuzzer's AST (an independent oracle).

Written from the conformance README ("Semantics a conforming Ceph-dialect engine must
reproduce", "MinIO / AWS") and the AWS S3 Select SQL reference, not from the engine: it imports
nothing of ``select_dialect``, ``flight_storage`` or the readers. Its rules, by section:

* Values: CSV fields are strings (an empty field is NULL in ``ceph``, ``''`` in ``aws``);
  JSON keys match case-insensitively and an absent key / index is MISSING, which behaves as
  NULL except under ``IS [NOT] MISSING`` (AWS reference, "NULL, MISSING").
* Arithmetic: ``int op int`` stays integral, ``/`` and ``%`` truncate toward zero (README:
  ``1 / 2 -> 0``; C semantics), ``%`` on floats is fmod; NULL propagates.
* Three-valued logic for AND/OR/NOT, comparisons, BETWEEN, IN and LIKE (README, "Types,
  comparison and NULL").
* SUBSTRING: Ceph's start <= 0 consumes length; MinIO/AWS clamp the start to 1 (README).
  TRIM removes spaces only (README), or the characters of its set.
* Timestamps: README "Output formatting" (Ceph: six fraction digits when the input had a
  fraction, ``Z`` / ``+HH:MM`` as written, no zone -> ``+00:00``); AWS reference, DATE_ADD
  and TO_TIMESTAMP examples (the precision as written, raised by DATE_ADD as necessary, the
  fraction's digits kept, no zone -> ``-00:00``); ``date_diff``
  truncates toward zero on instants, ``extract(timezone_minute)`` carries the sign.
* LIMIT counts scanned input rows in Ceph, returned rows in AWS (README).
* Output: CSV, NULL as ``null`` (Ceph) or an empty field (AWS), floats as the shortest
  round-trip decimal without ``.0``, the Ceph aggregate row without a record delimiter.
"""

from __future__ import annotations

import calendar
import datetime as dt
import math
import re
from dataclasses import dataclass, replace
from typing import Any

from tests.fuzz.query_ast import (
    FLOAT,
    INT,
    STR,
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


class _Missing:
    def __repr__(self) -> str:
        return "MISSING"


MISSING: Any = _Missing()


class UndefinedCase(Exception):
    """The generator built a query whose answer the specification leaves open."""


def _absent(value: Any) -> bool:
    return value is None or value is MISSING


# --------------------------------------------------------------------------- timestamps


@dataclass(frozen=True)
class Timestamp:
    """A timestamp as written: local wall time, nanoseconds, how many fraction digits the
    text had (0 = none) and the zone (``"Z"``, ``None`` for none, or an offset in minutes)."""

    local: dt.datetime
    nanos: int
    digits: int
    zone: str | int | None
    precision: int  # 0 year, 1 month, 2 day, 3 minute, 4 second, 5 fraction (as written)

    @property
    def offset(self) -> int:
        return self.zone if isinstance(self.zone, int) else 0

    def instant_ns(self) -> int:
        seconds = calendar.timegm(self.local.timetuple()) - self.offset * 60
        return seconds * 1_000_000_000 + self.nanos


_TS_RE = re.compile(
    r"^(\d{4})(?:-(\d{2})(?:-(\d{2}))?)?T(?:(\d{2}):(\d{2})(?::(\d{2})(?:\.(\d{1,9}))?)?)?"
    r"(Z|[+-]\d{2}:\d{2})?$"
)


def parse_timestamp(text: str) -> Timestamp:
    """The AWS timestamp literal forms (``YYYYT`` … ``YYYY-MM-DDThh:mm:ss.sssTZD``)."""
    m = _TS_RE.match(text)
    if m is None:
        raise UndefinedCase(f"not a timestamp the generator writes: {text!r}")
    year, month, day, hour, minute, second, frac, zone = m.groups()
    local = dt.datetime(int(year), int(month or 1), int(day or 1), int(hour or 0),
                        int(minute or 0), int(second or 0))
    nanos = int((frac or "").ljust(9, "0")) if frac else 0
    parsed_zone: str | int | None
    if zone is None:
        parsed_zone = None
    elif zone == "Z":
        parsed_zone = "Z"
    else:
        sign = -1 if zone[0] == "-" else 1
        parsed_zone = sign * (int(zone[1:3]) * 60 + int(zone[4:6]))
    precision = (5 if frac else 4 if second else 3 if hour else 2 if day else 1 if month
                 else 0)
    return Timestamp(local, nanos, len(frac or ""), parsed_zone, precision)


def _add_months(value: dt.datetime, months: int, *, end_stays_end: bool = False
                ) -> dt.datetime:
    """Calendar months added, the day clamped to the month reached; ``end_stays_end``: the
    last day of a month lands on the last day of the month reached (boost's month
    arithmetic, which Ceph's year addition uses: 2023-02-28 + 1 year is 2024-02-29)."""
    total = value.year * 12 + value.month - 1 + months
    last = calendar.monthrange(total // 12, total % 12 + 1)[1]
    at_end = value.day == calendar.monthrange(value.year, value.month)[1]
    day = last if end_stays_end and at_end else min(value.day, last)
    return value.replace(year=total // 12, month=total % 12 + 1, day=day)


_PART_SECONDS = {"day": 86400, "hour": 3600, "minute": 60, "second": 1}


# AWS DATE_ADD: "result will add precision as necessary"
_PART_PRECISION = {"year": 0, "month": 1, "day": 2, "hour": 3, "minute": 3, "second": 4}


def date_add(part: str, amount: int, ts: Timestamp, flavor: str = "aws") -> Timestamp:
    ts = replace(ts, precision=max(ts.precision, _PART_PRECISION[part]))
    if part == "year":
        # Ceph adds boost::gregorian::years; its own month addition only clamps
        return replace(ts, local=_add_months(ts.local, 12 * amount,
                                             end_stays_end=flavor == "ceph"))
    if part == "month":
        return replace(ts, local=_add_months(ts.local, amount))
    return replace(ts, local=ts.local + dt.timedelta(seconds=_PART_SECONDS[part] * amount))


def date_diff(part: str, first: Timestamp, second: Timestamp) -> int:
    delta = second.instant_ns() - first.instant_ns()
    unit = _PART_SECONDS[part] * 1_000_000_000
    return int(delta / unit) if abs(delta) < 2**52 else _trunc_div(delta, unit)


def extract(part: str, ts: Timestamp) -> int:
    if part == "timezone_hour":
        return _trunc_div(ts.offset, 60)
    if part == "timezone_minute":
        return ts.offset - 60 * _trunc_div(ts.offset, 60)
    return int(getattr(ts.local, part))


_MONTHS = ["January", "February", "March", "April", "May", "June", "July", "August",
           "September", "October", "November", "December"]


def to_string(ts: Timestamp, pattern: str) -> str:
    """README "to_string formats" (Java-like letters; other characters are literal)."""
    out = []
    for run in re.finditer(r"(.)\1*", pattern):
        token, letter, n = run.group(0), run.group(1), len(run.group(0))
        t = ts.local
        if letter == "y":
            out.append(f"{t.year % 100:02d}" if n == 2 else f"{t.year:0{max(n, 4)}d}")
        elif letter == "M":
            out.append({1: str(t.month), 2: f"{t.month:02d}", 3: _MONTHS[t.month - 1][:3],
                        4: _MONTHS[t.month - 1]}.get(n, _MONTHS[t.month - 1][0]))
        elif letter in "dHms":
            value = {"d": t.day, "H": t.hour, "m": t.minute, "s": t.second}[letter]
            out.append(f"{value:0{n}d}")
        elif letter == "h":
            out.append(f"{(t.hour % 12) or 12:0{n}d}")
        elif letter == "a":
            out.append("AM" if t.hour < 12 else "PM")
        elif letter == "S":
            out.append(f"{ts.nanos:09d}"[:n].ljust(n, "0"))
        else:
            out.append(token)
    return "".join(out)


def _zone_hhmm(offset: int) -> str:
    sign = "-" if offset < 0 else "+"
    return f"{sign}{abs(offset) // 60:02d}:{abs(offset) % 60:02d}"


def format_timestamp(ts: Timestamp, flavor: str) -> str:
    t = ts.local
    if flavor == "ceph":
        text = f"{t.year:04d}-{t.month:02d}-{t.day:02d}T{t.hour:02d}:{t.minute:02d}:{t.second:02d}"
        if ts.digits:
            text += f".{ts.nanos // 1000:06d}"
        if ts.zone == "Z":
            return text + "Z"
        return text + _zone_hhmm(ts.offset)
    # AWS (DATE_ADD / TO_TIMESTAMP examples): the precision as written, no zone -> -00:00
    zone = "Z" if ts.zone == "Z" else "-00:00" if ts.zone is None else _zone_hhmm(ts.offset)
    date = f"{t.year:04d}-{t.month:02d}-{t.day:02d}T"
    minute = f"{date}{t.hour:02d}:{t.minute:02d}"
    second = f"{minute}:{t.second:02d}"
    return [
        f"{t.year:04d}T", f"{t.year:04d}-{t.month:02d}T", date, minute + zone, second + zone,
        f"{second}.{ts.nanos:09d}"[: len(second) + 1 + ts.digits] + zone,
    ][ts.precision]


# --------------------------------------------------------------------------- evaluation


def _trunc_div(a: int, b: int) -> int:
    q = abs(a) // abs(b)
    return q if (a >= 0) == (b >= 0) else -q


def _arith(op: str, a: Any, b: Any) -> Any:
    integral = isinstance(a, int) and isinstance(b, int)
    if op == "+":
        return a + b
    if op == "-":
        return a - b
    if op == "*":
        return a * b
    if b == 0:
        raise UndefinedCase("division by zero")
    if op == "/":
        return _trunc_div(a, b) if integral else a / b
    return a - b * _trunc_div(a, b) if integral else math.fmod(a, b)


def _compare(op: str, a: Any, b: Any) -> bool:
    if isinstance(a, Timestamp):
        a, b = a.instant_ns(), b.instant_ns()
    return {
        "=": a == b, "<>": a != b, "!=": a != b, "<": a < b, "<=": a <= b, ">": a > b,
        ">=": a >= b,
    }[op]


def _and(a: Any, b: Any) -> Any:
    if a is False or b is False:
        return False
    if _absent(a) or _absent(b):
        return None
    return True


def _or(a: Any, b: Any) -> Any:
    if a is True or b is True:
        return True
    if _absent(a) or _absent(b):
        return None
    return False


def _not(a: Any) -> Any:
    return None if _absent(a) else not a


def like_matches(text: str, pattern: str, escape: str | None) -> bool:
    """``%`` any run, ``_`` one character, ``escape`` makes the next character literal."""
    regex, i = "", 0
    while i < len(pattern):
        c = pattern[i]
        if escape is not None and c == escape and i + 1 < len(pattern):
            regex += re.escape(pattern[i + 1])
            i += 2
            continue
        regex += ".*" if c == "%" else "." if c == "_" else re.escape(c)
        i += 1
    return re.fullmatch(regex, text, re.DOTALL) is not None


def _substring(text: str, start: int, length: int | None, flavor: str) -> str:
    begin = max(start, 1)
    if length is None:
        return text[begin - 1:]
    if length < 0:
        raise UndefinedCase("negative substring length")
    end = start + length if flavor == "ceph" else begin + length
    return text[begin - 1:max(end - 1, begin - 1)]


def _cast(value: Any, kind: str) -> Any:
    if kind == STR:
        return format_scalar(value, "aws") if not isinstance(value, str) else value
    if isinstance(value, bool):
        raise UndefinedCase("cast of a boolean")
    if kind == INT:
        if isinstance(value, float):
            raise UndefinedCase("float to int cast rounding is not specified")
        return int(value)
    return float(value)


@dataclass
class Evaluator:
    """Evaluates nodes over one record of a given source format, in one flavour."""

    flavor: str
    source: str

    def value(self, node: Node, row: Any) -> Any:
        method = getattr(self, "_" + type(node).__name__.lower())
        return method(node, row)

    def _lit(self, node: Lit, row: Any) -> Any:  # noqa: ARG002 - value() calls every node's method with (node, row)
        return node.value

    def _col(self, node: Col, row: Any) -> Any:
        value = row
        for step, key in node.path:
            if step == "key" and isinstance(value, dict):
                found = [k for k in value if k.lower() == str(key).lower()]
                if len(found) > 1:
                    raise UndefinedCase("ambiguous key")
                value = value[found[0]] if found else MISSING
            elif step == "index" and isinstance(value, list) and 0 <= key < len(value):
                value = value[key]
            elif step == "pos" and isinstance(value, list):
                value = value[key] if key < len(value) else None
            else:
                value = MISSING
            if value is MISSING:
                return MISSING
        if isinstance(value, (dict, list)):
            raise UndefinedCase("container value in an expression")
        if node.kind == FLOAT and isinstance(value, int) and not isinstance(value, bool):
            return float(value)  # a JSON integer the generator reads as a FLOAT operand
        return value

    def _cast(self, node: Cast, row: Any) -> Any:
        value = self.value(node.operand, row)
        return value if _absent(value) else _cast(value, node.kind)

    def _neg(self, node: Neg, row: Any) -> Any:
        value = self.value(node.operand, row)
        return value if _absent(value) else -value

    def _arith(self, node: Arith, row: Any) -> Any:
        a, b = self.value(node.left, row), self.value(node.right, row)
        if _absent(a) or _absent(b):
            return None
        return _arith(node.op, a, b)

    def _cmp(self, node: Cmp, row: Any) -> Any:
        a, b = self.value(node.left, row), self.value(node.right, row)
        if _absent(a) or _absent(b):
            return None
        return _compare(node.op, a, b)

    def _logic(self, node: Logic, row: Any) -> Any:
        a, b = self.value(node.left, row), self.value(node.right, row)
        return _and(a, b) if node.op == "AND" else _or(a, b)

    def _not(self, node: Not, row: Any) -> Any:
        return _not(self.value(node.operand, row))

    def _istest(self, node: IsTest, row: Any) -> Any:
        value = self.value(node.operand, row)
        result = value is MISSING if node.what == "MISSING" else _absent(value)
        return result != node.negate

    def _between(self, node: Between, row: Any) -> Any:
        x = self.value(node.operand, row)
        lo, hi = self.value(node.low, row), self.value(node.high, row)
        low_ok = None if _absent(x) or _absent(lo) else _compare("<=", lo, x)
        high_ok = None if _absent(x) or _absent(hi) else _compare("<=", x, hi)
        result = _and(low_ok, high_ok)
        return _not(result) if node.negate else result

    def _in(self, node: In, row: Any) -> Any:
        x = self.value(node.operand, row)
        result: Any = False
        for item in node.items:
            v = self.value(item, row)
            result = _or(result, None if _absent(x) or _absent(v) else _compare("=", x, v))
        return _not(result) if node.negate else result

    def _like(self, node: Like, row: Any) -> Any:
        x = self.value(node.operand, row)
        if _absent(x):
            return None
        return like_matches(x, node.pattern, node.escape) != node.negate

    def _case(self, node: Case, row: Any) -> Any:
        subject = self.value(node.subject, row) if node.subject is not None else None
        for condition, result in node.whens:
            if node.subject is not None:
                v = self.value(condition, row)
                hit = not _absent(subject) and not _absent(v) and _compare("=", subject, v)
            else:
                hit = self.value(condition, row) is True
            if hit:
                return self.value(result, row)
        return None if node.default is None else self.value(node.default, row)

    def _call(self, node: Call, row: Any) -> Any:
        args = [self.value(a, row) for a in node.args]
        if node.name == "COALESCE":
            return next((a for a in args if not _absent(a)), None)
        if node.name == "NULLIF":
            a, b = args
            if _absent(a):
                return a
            return None if not _absent(b) and _compare("=", a, b) else a
        if any(_absent(a) for a in args):
            return None
        return getattr(self, "_fn_" + node.name.lower())(node, *args)

    def _fn_upper(self, node: Call, s: str) -> str:  # noqa: ARG002 - every function gets its Call node
        return s.upper()

    def _fn_lower(self, node: Call, s: str) -> str:  # noqa: ARG002 - every function gets its Call node
        return s.lower()

    def _fn_char_length(self, node: Call, s: str) -> int:  # noqa: ARG002 - every function gets its Call node
        return len(s)

    def _fn_trim(self, node: Call, s: str, chars: str = " ") -> str:
        side = node.words[0] if node.words else "BOTH"
        if side == "LEADING":
            return s.lstrip(chars)
        if side == "TRAILING":
            return s.rstrip(chars)
        return s.strip(chars)

    def _fn_substring(self, node: Call, s: str, start: int,  # noqa: ARG002 - as _fn_upper
                      length: int | None = None) -> str:
        return _substring(s, start, length, self.flavor)

    def _fn_to_timestamp(self, node: Call, s: str) -> Timestamp:  # noqa: ARG002 - every function gets its Call node
        return parse_timestamp(s)

    def _fn_date_add(self, node: Call, amount: int, ts: Timestamp) -> Timestamp:
        return date_add(node.words[0].lower(), amount, ts, self.flavor)

    def _fn_date_diff(self, node: Call, a: Timestamp, b: Timestamp) -> int:
        return date_diff(node.words[0].lower(), a, b)

    def _fn_extract(self, node: Call, ts: Timestamp) -> int:
        return extract(node.words[0].lower(), ts)

    def _fn_to_string(self, node: Call, ts: Timestamp, pattern: str) -> str:  # noqa: ARG002 - every function gets its Call node
        return to_string(ts, pattern)

    def _agg(self, node: Agg, row: Any) -> Any:  # noqa: ARG002 - value() calls every node's method with (node, row)
        raise UndefinedCase("aggregate inside a row expression")


# --------------------------------------------------------------------------- output


def format_scalar(value: Any, flavor: str) -> str:
    """A value as S3 prints it in a CSV field."""
    if _absent(value):
        return "null" if flavor == "ceph" else ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        if math.isinf(value) or math.isnan(value):
            raise UndefinedCase("non-finite float")
        text = repr(value)
        return text.removesuffix(".0")
    if isinstance(value, Timestamp):
        return format_timestamp(value, flavor)
    return str(value)


def _aggregate(node: Agg, values: list[Any]) -> Any:
    present = [v for v in values if not _absent(v)]
    if node.name == "COUNT":
        return len(values) if node.arg is None else len(present)
    if not present:
        return None
    if node.name == "SUM":
        return sum(present) if all(isinstance(v, int) for v in present) else math.fsum(present)
    if node.name == "AVG":
        return math.fsum(present) / len(present)
    if isinstance(present[0], str):
        raise UndefinedCase("min/max of strings")
    return min(present) if node.name == "MIN" else max(present)


def answer(query: Query, rows: list[Any], flavor: str) -> list[list[str]]:
    """The records the query returns, each a list of CSV field texts."""
    ev = Evaluator(flavor, query.source)
    if query.limit is not None and flavor == "ceph":
        rows = rows[: query.limit]  # Ceph: LIMIT counts scanned rows
    kept = [r for r in rows if query.where is None or ev.value(query.where, r) is True]
    if query.is_aggregate:
        record = []
        for item in query.select:
            if not isinstance(item, Agg):
                raise UndefinedCase("aggregates mixed with row expressions")
            values = [None if item.arg is None else ev.value(item.arg, r) for r in kept]
            record.append(format_scalar(_aggregate(item, values), flavor))
        # AWS: LIMIT counts the returned rows, and an aggregate returns one. Ceph: LIMIT 0
        # stops before the first record, and no row is printed (s3select_example)
        return [record] if query.limit is None or query.limit > 0 else []
    if query.limit is not None:
        kept = kept[: query.limit]
    return [[format_scalar(ev.value(item, r), flavor) for item in query.select] for r in kept]


def render_csv(records: list[list[str]], flavor: str, aggregate: bool) -> str:
    """CSV output text: ``,`` between fields, ``\\n`` after each record except Ceph's
    aggregate row (README, "CSV rows")."""
    lines = [",".join(fields) for fields in records]
    if aggregate and flavor == "ceph":
        return "\n".join(lines)
    return "".join(line + "\n" for line in lines)
