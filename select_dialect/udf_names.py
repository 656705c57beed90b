"""Every UDF name the DataFusion generator may emit, with its signature (the contract).

``flight_storage.execution.udfs`` registers exactly one kernel per entry of :data:`UDFS`. Types are
plain strings so this module needs no pyarrow:

* ``utf8``, ``int64``, ``float64``, ``bool``
* ``timestamp_ns_utc`` (``timestamp[ns, tz=UTC]``), ``timestamp_ns`` (naive local time)
* ``s3_timestamp`` (``flight_storage.formats.values.S3_TIMESTAMP``)
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class UdfSignature:
    """One UDF: its SQL name, argument types and return type (strings above)."""

    name: str
    args: tuple[str, ...]
    returns: str


CAST_INT = "s3_cast_int"
CAST_FLOAT = "s3_cast_float"
STRING_TO_BOOL = "s3_string_to_bool"
JSON_TO_DOUBLE = "s3_json_to_double"
JSON_TO_STRING = "s3_json_to_string"
TO_TIMESTAMP = "s3_to_timestamp"
TIMESTAMP_FROM_UTC = "s3_timestamp_from_utc"
TIMESTAMP_Z = "s3_timestamp_z"
TIMESTAMP_TO_STRING = "s3_timestamp_to_string"
LOCAL_TIME = "s3_local_time"
DATE_ADD = "s3_date_add"
CEPH_YEAR = "ceph_year"
"""The date part ``s3_date_add`` takes for Ceph's ``DATE_ADD(year, …)``: boost's year
arithmetic, where the last day of a month stays the last day (2023-02-28 + 1 year is
2024-02-29); ``year`` clamps the day (AWS)."""
DATE_DIFF = "s3_date_diff"
TO_STRING = "s3_to_string"
LIKE = "s3_like"
JSON_IN = "s3_json_in"
JSON_EQUAL = "s3_json_equal"
JSON_QUOTE = "s3_json_quote"

UDFS: tuple[UdfSignature, ...] = (
    UdfSignature(CAST_INT, ("utf8",), "int64"),
    UdfSignature(CAST_FLOAT, ("utf8",), "float64"),
    UdfSignature(STRING_TO_BOOL, ("utf8",), "bool"),
    UdfSignature(JSON_TO_DOUBLE, ("utf8",), "float64"),
    UdfSignature(JSON_TO_STRING, ("utf8",), "utf8"),
    UdfSignature(TO_TIMESTAMP, ("utf8",), "s3_timestamp"),
    UdfSignature(TIMESTAMP_FROM_UTC, ("timestamp_ns_utc", "int64"), "s3_timestamp"),
    # the same instant written with the zone "Z" (AWS's UTCNOW)
    UdfSignature(TIMESTAMP_Z, ("timestamp_ns_utc", "int64"), "s3_timestamp"),
    UdfSignature(TIMESTAMP_TO_STRING, ("s3_timestamp",), "utf8"),
    UdfSignature(LOCAL_TIME, ("s3_timestamp",), "timestamp_ns"),
    UdfSignature(DATE_ADD, ("utf8", "int64", "s3_timestamp"), "s3_timestamp"),
    UdfSignature(DATE_DIFF, ("utf8", "s3_timestamp", "s3_timestamp"), "int64"),
    UdfSignature(TO_STRING, ("s3_timestamp", "utf8"), "utf8"),
    UdfSignature(LIKE, ("utf8", "utf8", "utf8"), "bool"),
    # needle (JSON text), haystack (JSON text): is the needle an element of the array?
    UdfSignature(JSON_IN, ("utf8", "utf8"), "bool"),
    # structural equality of two JSON texts (numbers compare as numbers)
    UdfSignature(JSON_EQUAL, ("utf8", "utf8"), "bool"),
    # a string as a JSON string literal
    UdfSignature(JSON_QUOTE, ("utf8",), "utf8"),
)

UDF_NAMES: frozenset[str] = frozenset(signature.name for signature in UDFS)

# DataFusion builtins the generator may emit (everything else is rejected).
BUILTIN_FUNCTIONS: frozenset[str] = frozenset(
    {
        "arrow_cast",
        "avg",
        "btrim",
        "character_length",
        "concat",
        "count",
        "date_part",
        "date_trunc",
        "get_field",
        "greatest",
        "left",
        "lower",
        "ltrim",
        "max",
        "min",
        "now",
        "nullif",
        "power",
        "regexp_like",
        "rtrim",
        "substr",
        "sum",
        "to_char",
        "to_timestamp_nanos",
        "upper",
    }
)

DATE_PARTS: tuple[str, ...] = ("year", "month", "day", "hour", "minute", "second")
