"""Timestamp expressions composed from DataFusion builtins where they are exact, the
``S3_TIMESTAMP`` UDFs for the rows they are not: the instant and the wall clock of a timestamp,
whole months between two, durations added, and the year barrier of ``extract(year ...)``.

Text of the common layout (``YYYY-MM-DDTHH:MM:SS[.f][Z|±HH:MM]``, one regex) goes through
DataFusion's casts; everything else through the UDF (:mod:`select_dialect.udf_names`).
"""

from __future__ import annotations

from collections.abc import Callable

from sqlglot import exp

from select_dialect import udf_names as U
from select_dialect.sql_nodes import (
    cast,
    fn,
    lit_str,
    paren,
)

DATE_PART_PRECISION: dict[str, int] = {
    "year": 0,
    "month": 1,
    "day": 2,
    "hour": 3,
    "minute": 3,
    "second": 4,
}


EXTRACT_LOCAL_PARTS = frozenset({"year", "month", "day", "hour", "minute", "second", "week"})


YEAR_BARRIER = "year_range_barrier"


"""Marks the DOUBLE cast that keeps DataFusion from rewriting ``extract(year …) <op> n``."""


_YEARS_AS_RANGES = range(1678, 2262)


"""Years n whose January 1st and the next one are both nanosecond timestamps: DataFusion's
rewrite of ``date_part('year', t) <op> n`` into ``t`` against those two instants is exact
for them (``t`` itself always is one), and skips computing the year of every row (extract
of the year compared with 2024 over 623k timestamps: 52 ms with the barrier, 44 ms
without)."""


# The layout almost every timestamp in data is written in: a full date and time to the
# second, an optional fraction of up to 9 digits, and an optional ``Z`` or ``±HH:MM`` zone.
# On text of this layout DataFusion's string -> timestamp cast reads exactly what
# ``s3_to_timestamp`` reads (the instant; a missing zone is UTC, as s3-select's offset 0),
# and the first 19 characters are the wall-clock time at the written offset. The pattern
# keeps out what the cast reads differently (leap second ``:60``, offsets like ``+05:70``,
# ``+0500``, a space or ``t`` before the time, over 9 fraction digits); digits it lets through
# that make no date or time (month 13, day 32, hour 24, offset hour 24 and up, ``02-30``)
# make the cast NULL, and that row goes to the UDF, which raises the s3-select error. Loose
# digit classes keep the regex cheap: it costs about what the cast does.
_LAYOUT_DATE_TIME = r"^[0-9]{4}-[01][0-9]-[0-3][0-9]T[0-2][0-9]:[0-5][0-9]:[0-5][0-9]"


_COMMON_TIMESTAMP = _LAYOUT_DATE_TIME + r"(\.[0-9]{1,9})?(Z|[+-][0-2][0-9]:[0-5][0-9])?$"


_WALL_CLOCK_CHARS = 19  # len("YYYY-MM-DDTHH:MM:SS")


# Date parts that are exact durations (the others are calendar arithmetic), in nanoseconds.
DURATION_NS: dict[str, int] = {
    "second": 10**9,
    "minute": 60 * 10**9,
    "hour": 3600 * 10**9,
    "day": 86400 * 10**9,
}


def _written_text(ts: exp.Expression) -> exp.Expression | None:
    """The text of ``s3_to_timestamp(text)``, else None."""
    if isinstance(ts, exp.Anonymous) and ts.this == U.TO_TIMESTAMP and len(ts.expressions) == 1:
        text: exp.Expression = ts.expressions[0]
        return text
    return None


def year_as_range(side: exp.Expression, other: exp.Expression) -> exp.Expression:
    """``side`` without its year barrier when ``other`` is an integer literal of
    :data:`_YEARS_AS_RANGES` (DataFusion then compares timestamps), else ``side``."""
    inner = side.this if isinstance(side, exp.Cast) else None
    if not (isinstance(inner, exp.Cast) and inner.meta.get(YEAR_BARRIER)):
        return side
    if not (isinstance(other, exp.Literal) and other.is_int
            and int(other.this) in _YEARS_AS_RANGES):
        return side
    return cast(inner.this.copy(), "BIGINT")


def _zone_free_instant(ts: exp.Expression) -> exp.Expression | None:
    """The Arrow instant of ``s3_timestamp_from_utc(instant, p)`` / ``s3_timestamp_z(...)``
    (offset 0, so its wall clock is the instant itself), else None."""
    if isinstance(ts, exp.Anonymous) and ts.this in (U.TIMESTAMP_FROM_UTC, U.TIMESTAMP_Z):
        instant: exp.Expression = ts.expressions[0]
        return instant
    return None


def _duration_added(ts: exp.Expression) -> tuple[int, exp.Expression, exp.Expression] | None:
    """``(unit ns, amount, inner)`` of ``s3_date_add('<duration part>', amount, inner)``."""
    if not (isinstance(ts, exp.Anonymous) and ts.this == U.DATE_ADD and len(ts.expressions) == 3):
        return None
    part, amount, inner = ts.expressions
    if isinstance(part, exp.Literal) and part.is_string and part.this in DURATION_NS:
        return DURATION_NS[part.this], amount, inner
    return None


def _on_common_layout(text: exp.Expression, fast: exp.Expression, slow: exp.Expression
                      ) -> exp.Expression:
    """``fast`` for rows whose text has the common layout, ``slow`` for the others. ``fast``
    must be NULL exactly when the date is impossible; DataFusion evaluates each CASE branch
    only on the rows that reach it, so the UDF in ``slow`` sees only the rows the builtins
    cannot answer (and the NULL rows)."""
    layout = fn("regexp_like", text.copy(), lit_str(_COMMON_TIMESTAMP))
    return exp.Coalesce(this=exp.Case(ifs=[exp.If(this=layout, true=fast)]), expressions=[slow])


def _plus_duration(instant: exp.Expression, amount: exp.Expression, unit_ns: int
                   ) -> exp.Expression:
    """``instant + amount * unit`` on naive nanosecond timestamps."""
    moved = exp.Add(this=cast(instant, "BIGINT"),
                    expression=exp.Mul(this=paren(amount), expression=exp.Literal.number(unit_ns)))
    return fn("to_timestamp_nanos", moved)


def whole_months_between(first: exp.Expression, second: exp.Expression) -> exp.Expression:
    """Calendar months from ``first`` to ``second`` (naive UTC timestamps), truncated toward
    zero: the month count, less one when the later end has not reached the earlier end's
    position in its month (what ``s3_date_diff`` computes)."""

    def month_index(ts: exp.Expression) -> exp.Expression:
        year = cast(fn("date_part", lit_str("year"), ts), "BIGINT")
        month = cast(fn("date_part", lit_str("month"), ts.copy()), "BIGINT")
        return exp.Add(this=exp.Mul(this=year, expression=exp.Literal.number(12)),
                       expression=month)

    def into_month(ts: exp.Expression) -> exp.Expression:
        start = fn("date_trunc", lit_str("month"), ts.copy())
        return exp.Paren(this=exp.Sub(this=cast(ts, "BIGINT"), expression=cast(start, "BIGINT")))

    months = exp.Paren(this=exp.Sub(this=exp.Paren(this=month_index(second)),
                                    expression=exp.Paren(this=month_index(first))))

    def one_if(condition: exp.Expression) -> exp.Expression:
        return exp.Case(ifs=[exp.If(this=condition, true=exp.Literal.number(1))],
                        default=exp.Literal.number(0))

    zero = exp.Literal.number(0)
    back = one_if(exp.And(this=exp.GT(this=months.copy(), expression=zero),
                          expression=exp.LT(this=into_month(second.copy()),
                                            expression=into_month(first.copy()))))
    forward = one_if(exp.And(this=exp.LT(this=months.copy(), expression=zero.copy()),
                             expression=exp.GT(this=into_month(second.copy()),
                                               expression=into_month(first.copy()))))
    return exp.Paren(this=exp.Add(this=exp.Sub(this=months, expression=back),
                                  expression=forward))


def utc_instant(ts: exp.Expression) -> exp.Expression:
    """The instant of an S3_TIMESTAMP expression as a naive (UTC) nanosecond timestamp,
    composed from builtins where the timestamp comes from text of the common layout."""

    def from_text(text: exp.Expression) -> exp.Expression:
        return exp.TryCast(this=text.copy(), to=exp.DataType.build("TIMESTAMP"))

    slow = cast(fn("get_field", ts, lit_str("utc")), "TIMESTAMP")
    return _through_builtins(ts, from_text, slow, utc_instant)


def local_time(ts: exp.Expression) -> exp.Expression:
    """The wall-clock time at the written offset (naive timestamp) for date parts from year to
    second: on the builtin path the fraction of a second is dropped, which no such part
    reads."""

    def from_text(text: exp.Expression) -> exp.Expression:
        # Written in ``Z`` the instant is the wall clock (no string to cut); otherwise the
        # first 19 characters are (a fraction, which no caller reads, is dropped).
        written_in_z = exp.Like(this=text.copy(), expression=lit_str("%Z"))
        wall_clock = fn("left", text.copy(), exp.Literal.number(_WALL_CLOCK_CHARS))
        clock_text = exp.Case(ifs=[exp.If(this=written_in_z, true=text.copy())],
                              default=wall_clock)
        return exp.TryCast(this=clock_text, to=exp.DataType.build("TIMESTAMP"))

    return _through_builtins(ts, from_text, fn(U.LOCAL_TIME, ts), local_time)


def _through_builtins(ts: exp.Expression,
                      from_text: Callable[[exp.Expression], exp.Expression],
                      slow: exp.Expression,
                      reading: Callable[[exp.Expression], exp.Expression]) -> exp.Expression:
    """A reading of ``ts`` (``reading`` itself, for the recursion) from builtins where its
    origin allows: a zone-free instant is its own wall clock; text of the common layout goes
    through ``from_text`` (``slow``, the UDF, for the other rows); a duration added moves the
    inner reading; anything else is ``slow``."""
    instant = _zone_free_instant(ts)
    if instant is not None:
        return cast(instant.copy(), "TIMESTAMP")
    text = _written_text(ts)
    if text is not None:
        return _on_common_layout(text, from_text(text), slow)
    added = _duration_added(ts)
    if added is not None:
        unit_ns, amount, inner = added
        return _plus_duration(reading(inner), amount.copy(), unit_ns)
    return slow


def native_timestamp(node: exp.Expression) -> exp.Expression:
    """SQL's ``CAST(node AS TIMESTAMP)`` (DataFusion's timestamp of nanoseconds, no zone)."""
    return cast(paren(node), "TIMESTAMP")


def is_native_timestamp(node: exp.Expression) -> bool:
    return type(node) is exp.Cast and node.to.is_type(exp.DataType.Type.TIMESTAMP)
