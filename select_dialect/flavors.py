"""The dialect's flavours: the one list of their names and what each one means.

A flavour decides how a statement is read and answered. Two follow an S3 Select engine
exactly (the shared conformance corpus runs against them); ``standard`` is what a SQL user of
a Flight SQL server expects:

| flavour | LIMIT counts | ``"x"`` | reading and printing rules | values | beyond S3 Select |
|---|---|---|---|---|---|
| ``standard`` | result rows | identifier | AWS's (RFC 4180 CSV, valid JSON) | SQL types | GROUP BY, HAVING, ORDER BY, DISTINCT, SELECT without FROM |
| ``ceph`` | scanned records | string | Ceph RGW's s3select | s3-select's coercions | no |
| ``aws`` | result rows | identifier | AWS S3 Select's | s3-select's coercions | no |

``standard`` reads and prints by AWS's rules because they are the standard ones (RFC 4180
quoting, JSON output that parses, an empty CSV field is the empty string); Ceph's differ from
them where RGW's engine has quirks (quote toggling, unquoted strings in JSON output).
``standard`` also types values as SQL does (:attr:`Flavor.sql_types`): a CSV field is text,
and text never turns into a number by itself.

Every rule a flavour changes in the translation is a named flag of its :class:`Flavor`; the
lowering reads flags, never flavour names, so a new flavour is one record here.

This module is the one list of flavour names: the server (header, CLI, engine) checks
names against it. The compute clients do not import it (they may not load the dialect); they
send the name the user gives in the header ``flight_storage.protocol.FLAVOR_HEADER``, or none
for the server's default. Hand-written: the flavours are this project's own definition.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final


@dataclass(frozen=True)
class Flavor:
    """What one flavour means.

    Attributes:
        name: the flavour's name (header value, ``--flavor``, option).
        engine: whose reading, typing and printing rules apply: ``ceph`` or ``aws``.
        limit_counts_input: LIMIT counts scanned records (Ceph) rather than result rows.
        standard_sql: GROUP BY, HAVING, ORDER BY, DISTINCT and SELECT without FROM are allowed.
        summary: one line for help texts and error messages.
        reserved_words: AWS's reserved keywords are refused as unquoted names
            (:mod:`select_dialect.reserved_words`).
        sql_types: values keep SQL types, as DataFusion, DuckDB and PostgreSQL type them,
            instead of s3-select's coercions: a CSV field is text (VARCHAR), so ``MIN``/``MAX``
            of it compare text, ``SUM``/``AVG`` of text (or of booleans, timestamps) and
            arithmetic on text are refused with an error naming the function or operator and
            the type (cast first: ``sum(CAST(x AS DOUBLE))``); ``MIN``/``MAX`` of booleans
            and timestamps keep their type; ``CAST(text AS TIMESTAMP)`` is DataFusion's
            zone-less timestamp (``'2024-08-16 20:29:54'`` reads as written, an offset is
            converted to UTC, text that is no timestamp is an error) and text compared with
            such a timestamp is cast the same way. Text compared with a number is still read
            as a number (DataFusion's rule), text that is no number comparing as NULL. Off:
            s3-select's rules (a CSV field next to a number is a number, ``MIN``/``MAX``/
            ``SUM``/``AVG`` read their argument as a number, ``CAST(x AS TIMESTAMP)`` is
            ``TO_TIMESTAMP``).
        double_quotes_are_strings: a bare ``"x"`` is a string literal (Ceph), not a name.
        aws_names: AWS's name rules: a quoted name matches its own letter case only (CSV
            headers, Parquet columns, JSON keys) and still names a projection alias; an
            unquoted name that matches spellings differing only in case is
            ``AmbiguousFieldName``. Off: Ceph's (any case, the exact spelling first; JSON:
            the last key that matches).
        missing_column_code: the error code of an unknown column.
        unnamed_index_paths: a JSON path ending in an index has no output name (MinIO's
            ``_N``, as an expression has).
        substring_start_clamped: ``SUBSTRING``'s start below 1 counts from 1 (AWS/MinIO);
            off, a start at or below 0 uses up length (Ceph).
        year_keeps_month_end: ``DATE_ADD(year, …)`` of a month's last day lands on the last
            day (boost's years, Ceph); off, the day is clamped.
        utcnow_in_z: ``UTCNOW()`` is written with ``Z`` (AWS); off, ``+00:00`` (Ceph).
        version_function: ``VERSION()`` answers Ceph's s3select version.
        json_bool_typed_equality: a JSON value equals a boolean only if it is that boolean
            (AWS/MinIO: ``42 != true``); off, the JSON value is read as a boolean.
    """

    name: str
    engine: str
    limit_counts_input: bool
    standard_sql: bool
    summary: str
    reserved_words: bool = False
    sql_types: bool = False
    double_quotes_are_strings: bool = False
    aws_names: bool = True
    missing_column_code: str = "MissingHeaderName"
    unnamed_index_paths: bool = True
    substring_start_clamped: bool = True
    year_keeps_month_end: bool = False
    utcnow_in_z: bool = True
    version_function: bool = False
    json_bool_typed_equality: bool = True


STANDARD: Final = "standard"
CEPH: Final = "ceph"
AWS: Final = "aws"

FLAVORS: Final[dict[str, Flavor]] = {
    STANDARD: Flavor(STANDARD, AWS, limit_counts_input=False, standard_sql=True,
                     summary="standard SQL over S3 Select's functions (AWS reading rules)",
                     sql_types=True),
    CEPH: Flavor(CEPH, CEPH, limit_counts_input=True, standard_sql=False,
                 summary="exactly Ceph RGW's s3select", double_quotes_are_strings=True,
                 aws_names=False, missing_column_code="ProcessingTimeError",
                 unnamed_index_paths=False, substring_start_clamped=False,
                 year_keeps_month_end=True, utcnow_in_z=False, version_function=True,
                 json_bool_typed_equality=False),
    AWS: Flavor(AWS, AWS, limit_counts_input=False, standard_sql=False,
                summary="exactly AWS S3 Select", reserved_words=True),
}
FLAVOR_NAMES: Final = tuple(FLAVORS)
"""Every flavour's name (the order help texts list them in)."""

STATEMENT_DEFAULT: Final = STANDARD
"""The flavour of a Flight SQL statement when the client names none (any SQL client)."""
S3_REQUEST_DEFAULT: Final = CEPH
"""The flavour of an S3 SelectObjectContent request over Flight when the client names none:
the server answers as the Ceph RGW it stands in for."""


def flavor(name: str) -> Flavor:
    """The flavour called ``name``.

    Raises:
        KeyError: no such flavour (callers turn it into their own error).

    Example:
        >>> flavor("standard").engine
        'aws'
    """
    return FLAVORS[name]


def engine_rules(name: str) -> str:
    """Whose reading and printing rules flavour ``name`` follows (``ceph`` or ``aws``)."""
    return FLAVORS[name].engine


__all__ = [
    "AWS",
    "CEPH",
    "FLAVORS",
    "FLAVOR_NAMES",
    "S3_REQUEST_DEFAULT",
    "STANDARD",
    "STATEMENT_DEFAULT",
    "Flavor",
    "engine_rules",
    "flavor",
]
