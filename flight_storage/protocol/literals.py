"""The one renderer of Python values as s3-select literals, for both sides of the wire.

The server binds a prepared statement's ``?`` parameters with it (``request/parameters.py``) and
the compute clients render the filters they push with it (``compute_client/pushdown.py``), so a
value means the same whichever side writes it. A value with no exact literal is refused with
:class:`LiteralError`, never written approximately:

| value | literal |
|---|---|
| None | ``null`` |
| bool | ``true`` / ``false`` |
| int | its digits; int64 only, and not its minimum (``-9223372036854775808`` has no literal: its digits overflow before the sign applies) |
| float | ``repr`` (the shortest text that reads back as the same double); NaN and infinities refused |
| Decimal | its digits in fixed notation (``0.0000001``, never ``1E-7``, which reads as a float); NaN and infinities refused |
| str | quoted, ``'`` doubled; a NUL character refused |
| datetime with a zone | ``to_timestamp('<ISO 8601>')`` (``Z`` for UTC) |
| datetime without a zone | refused: the instant it means depends on a zone nobody gave |
| date | ``CAST('<date>T' AS TIMESTAMP)``: midnight UTC, as a date column reads |

Hand-written: the dialect's literal forms are this project's own.
"""

from __future__ import annotations

import datetime as dt
import decimal
import math
from collections.abc import Callable
from typing import Any, Final

INT64_MIN: Final = -(2**63)
INT64_MAX: Final = 2**63 - 1


class LiteralError(ValueError):
    """A value with no exact s3-select literal (the message says why and what to do)."""


def string_literal(value: str) -> str:
    """``value`` as a quoted s3-select string."""
    if "\x00" in value:
        raise LiteralError("a string with a NUL character has no literal")
    return "'" + value.replace("'", "''") + "'"


def _integer(value: int) -> str:
    if not INT64_MIN < value <= INT64_MAX:
        raise LiteralError(f"integer {value} has no int64 literal")
    return str(value)


def _float(value: float) -> str:
    if not math.isfinite(value):
        raise LiteralError(f"float {value} has no literal (NaN and infinities have none)")
    return repr(value)


def _decimal(value: decimal.Decimal) -> str:
    if not value.is_finite():
        raise LiteralError(f"decimal {value} has no literal")
    return format(value, "f")


def _timestamp(value: dt.datetime) -> str:
    if value.tzinfo is None or value.utcoffset() is None:
        raise LiteralError(
            f"timestamp {value.isoformat()} has no time zone: give one "
            "(e.g. datetime(..., tzinfo=timezone.utc)), the instant depends on it")
    return f"to_timestamp({string_literal(value.isoformat().replace('+00:00', 'Z'))})"


def _date(value: dt.date) -> str:
    return f"CAST({string_literal(value.isoformat() + 'T')} AS TIMESTAMP)"


_LITERALS: tuple[tuple[type, Callable[[Any], str]], ...] = (
    (bool, lambda v: "true" if v else "false"),  # before int: a bool is an int
    (int, _integer),
    (float, _float),
    (decimal.Decimal, _decimal),
    (str, string_literal),
    (dt.datetime, _timestamp),  # before date: a datetime is a date
    (dt.date, _date),
)


def sql_literal(value: Any) -> str:
    """Render one Python value as an s3-select literal.

    Raises:
        LiteralError: the value has no exact literal (see the module's table).

    Example:
        >>> sql_literal(decimal.Decimal("0.0000001")), sql_literal("it's")
        ('0.0000001', "'it''s'")
    """
    if value is None:
        return "null"
    for kind, render in _LITERALS:
        if isinstance(value, kind):
            return render(value)
    raise LiteralError(f"no literal for a {type(value).__name__}")
