"""Arrow representations of s3-select values that Arrow has no exact type for.

An s3-select timestamp keeps the zone offset it was written with (for printing and for
``extract(timezone_hour ...)``) and how much of it was written (``2007T`` prints differently
from ``2007-01-01T00:00:00Z`` in some flavours). It travels through DataFusion as a struct:

* ``utc``            the instant, ``timestamp[ns, tz=UTC]``
* ``offset_minutes`` the zone offset as written, in minutes east of UTC (``-07:45`` -> -465)
* ``zone``           how the zone was written: 0 none, 1 ``Z``, 2 ``±HH:MM``
* ``precision``      how much was written: 0 year, 1 month, 2 day, 3 minute, 4 second,
                     5 fraction; -1 never written as text (a Parquet DATE or TIMESTAMP), which
                     the aws flavour prints in the shortest form (MinIO)
* ``fraction_digits`` number of fraction digits written (0 when none)
"""

from __future__ import annotations

import pyarrow as pa

ZONE_NONE = 0
ZONE_Z = 1
ZONE_OFFSET = 2

PRECISION_UNWRITTEN = -1
PRECISION_YEAR = 0
PRECISION_MONTH = 1
PRECISION_DAY = 2
PRECISION_MINUTE = 3
PRECISION_SECOND = 4
PRECISION_FRACTION = 5

S3_TIMESTAMP = pa.struct(
    [
        pa.field("utc", pa.timestamp("ns", tz="UTC")),
        pa.field("offset_minutes", pa.int16()),
        pa.field("zone", pa.int8()),
        pa.field("precision", pa.int8()),
        pa.field("fraction_digits", pa.int8()),
    ]
)


def is_s3_timestamp(data_type: pa.DataType) -> bool:
    """True when ``data_type`` is the s3-select timestamp struct."""
    return bool(data_type == S3_TIMESTAMP)
