"""The pieces of timestamp text that the output writer and the UDF kernels both print.

A timestamp is printed at the offset it was written with: its wall-clock time there, each
field zero-padded, and the offset as ``±HH:MM`` (or ``±HHMM``, or ``±HH`` when whole hours, for
``to_string`` patterns). The output writer (:mod:`flight_storage.formats.output`) and the UDFs
that make text of timestamps (``s3_to_string``, ``s3_timestamp_to_string`` in
:mod:`flight_storage.execution.udfs`) lay these pieces out differently, so each keeps its own
layouts; the pieces live here once so that both print the same digits and the same sign.

Vectorised with ``pyarrow.compute``; hand-written because Arrow's ``strftime`` prints a
zone's offset only for the zone of the type, not one offset per row.
"""

from __future__ import annotations

import pyarrow as pa
import pyarrow.compute as pc

_NS_PER_MINUTE = 60 * 10**9


def zero_pad(values: pa.Array, width: int) -> pa.Array:
    """Integers as text, left-padded with zeros to ``width`` characters.

    Example:
        >>> zero_pad(pa.array([7, 2024]), 2).to_pylist()
        ['07', '2024']
    """
    return pc.utf8_lpad(pc.cast(values, pa.utf8()), width=width, padding="0")


def offset_text(offset_minutes: pa.Array, *, colon: bool = True,
                hours_only_when_whole: bool = False) -> pa.Array:
    """A zone offset in minutes east of UTC as ``±HH:MM`` (``±HHMM`` without ``colon``);
    ``±HH`` where the offset is whole hours and ``hours_only_when_whole``.

    Example:
        >>> offset_text(pa.array([-465, 0, 60])).to_pylist()
        ['-07:45', '+00:00', '+01:00']
        >>> offset_text(pa.array([60, 90]), colon=False, hours_only_when_whole=True).to_pylist()
        ['+01', '+0130']
    """
    minutes = pc.cast(offset_minutes, pa.int64())
    sign = pc.if_else(pc.less(minutes, 0), "-", "+")
    magnitude = pc.abs(minutes)
    whole_hours = pc.divide(magnitude, 60)
    rest = pc.subtract(magnitude, pc.multiply(whole_hours, 60))
    hours = zero_pad(whole_hours, 2)
    full = pc.binary_join_element_wise(sign, hours, ":" if colon else "", zero_pad(rest, 2), "")
    if not hours_only_when_whole:
        return full
    return pc.if_else(pc.equal(rest, 0), pc.binary_join_element_wise(sign, hours, ""), full)


def wall_clock(utc_ns: pa.Array, offset_minutes: pa.Array | None) -> pa.Array:
    """The naive ``timestamp[ns]`` wall-clock time of UTC instants (int64 nanoseconds) at
    their offsets (UTC itself when ``offset_minutes`` is None)."""
    local = pc.cast(utc_ns, pa.int64())
    if offset_minutes is not None:
        local = pc.add(local, pc.multiply(pc.cast(offset_minutes, pa.int64()), _NS_PER_MINUTE))
    return pc.cast(local, pa.int64()).cast(pa.timestamp("ns"))


def nanos_of_second(local: pa.Array) -> pa.Array:
    """The int64 nanoseconds within the second of naive ``timestamp[ns]`` values."""
    second = pc.cast(pc.floor_temporal(local, unit="second"), pa.int64())
    return pc.subtract(pc.cast(local, pa.int64()), second)
