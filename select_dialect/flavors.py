"""The dialect's flavours: the one list of their names and what each one means.

A flavour decides how a statement is read and answered. Three follow an S3 Select engine
exactly (the shared conformance corpus runs against them); ``standard`` is what a SQL user of
a Flight SQL server expects:

| flavour | LIMIT counts | ``"x"`` | reading and printing rules | values | beyond S3 Select |
|---|---|---|---|---|---|
| ``standard`` | result rows | identifier | AWS's (RFC 4180 CSV, valid JSON) | SQL types | GROUP BY, HAVING, ORDER BY, DISTINCT, SELECT without FROM |
| ``ceph`` | scanned records | string | Ceph RGW's s3select | s3-select's coercions | no |
| ``aws`` | result rows | identifier | AWS S3 Select's | s3-select's coercions | no |
| ``minio`` | result rows | identifier | AWS S3 Select's | s3-select's coercions | no |

``minio`` is MinIO's S3 Select as its own test suite (the shared corpus) and sources show it:
AWS's reading (with MinIO's defaults: ``Comments`` ``#``, quoted record delimiters read as
data), typing and printing (``CAST(x AS TIMESTAMP)`` is ``TO_TIMESTAMP``, a
timestamp prints as it was written: ``2010T``, ``…T04:11Z``, an offset kept), where
``standard`` would cast text as DataFusion does and refuse or normalise those; it differs from
``aws`` only in accepting AWS's reserved keywords as unquoted names (``value``, ``time``,
``first``), as MinIO's parser does.

``standard`` reads and prints by AWS's rules because they are the standard ones (RFC 4180
quoting, JSON output that parses, an empty CSV field is the empty string); Ceph's differ from
them where RGW's engine has quirks (quote toggling, unquoted strings in JSON output).
``standard`` also types values as SQL does (:attr:`Flavor.sql_types`): a CSV field is text,
and text never turns into a number by itself.

Every rule a flavour changes is a named, documented flag of its :class:`Flavor` (as sqlglot's
``Dialect`` carries ``SAFE_DIVISION``): the translation's flags on the record itself, how
input is read in :class:`ReadingRules` (``Flavor.reading``: the CSV and JSON readers of
``flight_storage/formats``) and how results are printed in :class:`PrintingRules`
(``Flavor.printing``: the output writer). Every consumer reads flags, never flavour names, so
a new flavour (MinIO's, say) is one record here; a test greps the consumers for names.

This module is the one list of flavour names: the server (header, CLI, engine) checks
names against it. The compute clients do not import it (they may not load the dialect); they
send the name the user gives in the header ``flight_storage.protocol.FLAVOR_HEADER``, or none
for the server's default, and learn the facts they need (whether LIMIT counts input records)
from the server's FlightInfo. Hand-written: the flavours are this project's own definition.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Final

from sqlglot.dialects.dialect import Dialect

from select_dialect.s3select import CephS3Select, S3Select


@dataclass(frozen=True)
class ReadingRules:
    """How a flavour reads CSV and JSON input (``flight_storage/formats``' readers read these).

    The defaults are AWS's (RFC 4180 CSV with lazy quotes, PartiQL JSON paths).

    Attributes:
        csv_quotes_anywhere: Ceph's tokenizing rules: a quote character anywhere in a field
            toggles quoting and is removed (``third="c31,c32"`` reads ``third=c31,c32``), the
            escape character is removed and makes the next character literal, and every record
            delimiter ends a record. Off: RFC 4180 with lazy quotes (AWS; MinIO's Go
            ``encoding/csv`` with LazyQuotes): a field is quoted only when it *starts* with the
            quote, inside it a doubled quote (or escape + quote) is one quote, a quote
            elsewhere is data.
        csv_escape: the ``QuoteEscapeCharacter`` when the request names none (None: none).
        csv_empty_is_null: an empty CSV field is NULL (Ceph) rather than ``""`` (AWS).
        csv_typed_empty_is_null: an empty field of a typed CSV table (configured or sniffed
            columns) is NULL in every column, text ones included, as DuckDB, Spark, pandas and
            DataFusion's reader read a table (the standard surface); off, a text column keeps
            :attr:`csv_empty_is_null`'s reading.
        csv_skip_empty_lines: an empty line is no record (AWS); off, it is a record of one
            empty field (Ceph).
        csv_comment: the ``Comments`` character when the request names none (None: none).
        csv_quoted_record_delimiter: a record delimiter inside quotes is data even when the
            request leaves ``AllowQuotedRecordDelimiter`` out (MinIO reads so).
        csv_unclosed_quote_error: a quoted field that never closes (before the end of its line;
            with ``AllowQuotedRecordDelimiter``, of the object) is an error naming its line and
            column, as DuckDB's reader stops there; off, it closes there (lazily).
        json_partiql_rows: ``FROM s3object[*].path`` is a PartiQL path (AWS): it yields exactly
            what it reaches (a key or index gives one value or MISSING, ``[*]`` iterates an
            array, ``*`` an object's members), a top-level array document is one row, the row
            is named after the path's last key, and a bare table alias is the whole row. Off
            (Ceph): arrays are transparent, every value the path reaches is a row (arrays
            among them flattened), a top-level array gives one row per element.
    """

    csv_quotes_anywhere: bool = False
    csv_escape: str | None = '"'
    csv_empty_is_null: bool = False
    csv_typed_empty_is_null: bool = False
    csv_skip_empty_lines: bool = True
    csv_comment: str | None = None
    csv_quoted_record_delimiter: bool = False
    csv_unclosed_quote_error: bool = False
    json_partiql_rows: bool = True


@dataclass(frozen=True)
class PrintingRules:
    """How a flavour prints results as S3 CSV or JSON records (``formats/output.py``).

    The defaults are AWS's (valid CSV and JSON).

    Attributes:
        csv_null: the text of a NULL in CSV output (``""`` AWS, ``null`` Ceph).
        csv_quote_as_needed: ``QuoteFields`` ASNEEDED quotes a field holding a delimiter, the
            quote or a line end (AWS); off, never (Ceph).
        csv_quote_escape_from_input: ``QuoteFields`` ALWAYS quotes as C++ ``std::quoted``
            does with the *input's* escape character (Ceph: a quote or that character inside
            is preceded by it); off, a quote inside is preceded by the output's
            ``QuoteEscapeCharacter``.
        aggregate_row_delimited: the one row of an aggregate in CSV ends with the record
            delimiter (AWS); off, nothing follows it (Ceph).
        timestamps_as_written: a timestamp prints with the precision it was written with,
            raised where a function needed more (``2010T``, ``…T04:11Z``), no zone as
            ``-00:00``, Parquet timestamps and dates in the shortest form (AWS); off, always
            ``YYYY-MM-DDTHH:MM:SS[.ffffff]`` and the zone as written, none as ``+00:00``, a date
            as ``YYYY-MM-DD`` (Ceph).
        plain_json_values: values print as Ceph's s3select prints them: a string unquoted in
            JSON output (``{"a":male}``), a JSON array or object of a JSON path as ``null``
            (CSV and JSON), a MISSING value as ``null``; off, JSON output is valid JSON and a
            MISSING value leaves its key out.
        json_rows_as_leaf_lines: ``SELECT *`` on JSON input prints one ``path. : value`` line
            per leaf and a ``#=== n ===#`` line per row (Ceph); off, the row is the record
            itself (its member values the fields, in CSV).
    """

    csv_null: str = ""
    csv_quote_as_needed: bool = True
    csv_quote_escape_from_input: bool = False
    aggregate_row_delimited: bool = True
    timestamps_as_written: bool = True
    plain_json_values: bool = False
    json_rows_as_leaf_lines: bool = False


AWS_READING: Final = ReadingRules()
"""AWS S3 Select's reading rules."""
CEPH_READING: Final = ReadingRules(csv_quotes_anywhere=True, csv_escape="\\",
                                   csv_empty_is_null=True, csv_skip_empty_lines=False,
                                   json_partiql_rows=False)
"""Ceph RGW's s3select reading rules."""
MINIO_READING: Final = replace(AWS_READING, csv_comment="#", csv_quoted_record_delimiter=True)
"""MinIO's reading rules: AWS's, with ``Comments`` ``#`` when the request names none (MinIO's
``csv.ReaderArgs`` default) and a record delimiter inside quotes read as data (its Go
``encoding/csv`` reader; the corpus's ``csv.TestReadFailures`` cases need it)."""
AWS_PRINTING: Final = PrintingRules()
"""AWS S3 Select's printing rules."""
CEPH_PRINTING: Final = PrintingRules(csv_null="null", csv_quote_as_needed=False,
                                     csv_quote_escape_from_input=True,
                                     aggregate_row_delimited=False, timestamps_as_written=False,
                                     plain_json_values=True, json_rows_as_leaf_lines=True)
"""Ceph RGW's s3select printing rules."""


@dataclass(frozen=True)
class Flavor:
    """What one flavour means.

    Attributes:
        name: the flavour's name (header value, ``--flavor``, option).
        summary: one line for help texts and error messages.
        limit_counts_input: LIMIT counts scanned records (Ceph) rather than result rows.
        standard_sql: GROUP BY, HAVING, ORDER BY, DISTINCT and SELECT without FROM are allowed.
        grammar: the sqlglot dialect that parses statements (:mod:`select_dialect.s3select`).
        syntax_error_code: the code of every syntax error (Ceph answers ``UnsupportedSyntax``);
            None keeps the parser's own codes.
        reading: how input is read (:class:`ReadingRules`).
        printing: how results are printed (:class:`PrintingRules`).
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
        unnamed_by_position: an output column without a name is ``_N`` for its position N in
            the SELECT list (AWS); off, ``_k`` for the k-th unnamed one (Ceph).
        unnamed_as_sql: on the SQL surface (a statement's Arrow result), an output column
            without a name is named by its expression's SQL text, as DataFusion and DuckDB
            name it (``count(*)``, ``max(amount)``: :mod:`select_dialect.sql_names`); S3
            records (JSON keys) keep :attr:`unnamed_by_position`'s ``_N``. Off: ``_N`` on both.
        alias_clashes_with_header: an alias spelled like a CSV header name (any case) is an
            error, "multiple definition of column" (Ceph).
        star_keeps_empty_fields: ``SELECT *`` on CSV prints each record with its own fields,
            an empty one empty, though every expression (the WHERE clause) still reads an empty
            field as NULL (Ceph; where :attr:`ReadingRules.csv_empty_is_null`).
        substring_start_clamped: ``SUBSTRING``'s start below 1 counts from 1 (AWS/MinIO);
            off, a start at or below 0 uses up length (Ceph).
        year_keeps_month_end: ``DATE_ADD(year, …)`` of a month's last day lands on the last
            day (boost's years, Ceph); off, the day is clamped.
        utcnow_in_z: ``UTCNOW()`` is written with ``Z`` (AWS); off, ``+00:00`` (Ceph).
        version_function: ``VERSION()`` answers Ceph's s3select version.
        json_bool_typed_equality: a JSON value equals a boolean only if it is that boolean
            (AWS/MinIO: ``42 != true``); off, the JSON value is read as a boolean.
        sniffs_csv_tables: a CSV table without configured columns gets the header and column
            types sniffed from a sample (the standard surface; ``flight_storage.request``).
        datafusion_sql: statements the s3-select translation does not read (JOINs, CTEs,
            subqueries, window functions, DataFusion's functions) are DataFusion's SQL over the
            tables they name, SELECT only (:mod:`select_dialect.sql_surface`).
    """

    name: str
    summary: str
    limit_counts_input: bool = False
    standard_sql: bool = False
    grammar: type[Dialect] = S3Select
    syntax_error_code: str | None = None
    reading: ReadingRules = field(default=AWS_READING)
    printing: PrintingRules = field(default=AWS_PRINTING)
    reserved_words: bool = False
    sql_types: bool = False
    double_quotes_are_strings: bool = False
    aws_names: bool = True
    missing_column_code: str = "MissingHeaderName"
    unnamed_index_paths: bool = True
    unnamed_by_position: bool = True
    unnamed_as_sql: bool = False
    alias_clashes_with_header: bool = False
    star_keeps_empty_fields: bool = False
    substring_start_clamped: bool = True
    year_keeps_month_end: bool = False
    utcnow_in_z: bool = True
    version_function: bool = False
    json_bool_typed_equality: bool = True
    sniffs_csv_tables: bool = False
    datafusion_sql: bool = False


STANDARD: Final = "standard"
CEPH: Final = "ceph"
AWS: Final = "aws"
MINIO: Final = "minio"

FLAVORS: Final[dict[str, Flavor]] = {
    STANDARD: Flavor(STANDARD, "standard SQL over S3 Select's functions (AWS reading rules)",
                     standard_sql=True, sql_types=True, sniffs_csv_tables=True,
                     unnamed_as_sql=True, datafusion_sql=True,
                     reading=replace(AWS_READING, csv_unclosed_quote_error=True,
                                     csv_quoted_record_delimiter=True,
                                     csv_typed_empty_is_null=True)),
    CEPH: Flavor(CEPH, "exactly Ceph RGW's s3select", limit_counts_input=True,
                 grammar=CephS3Select, syntax_error_code="UnsupportedSyntax",
                 reading=CEPH_READING, printing=CEPH_PRINTING,
                 double_quotes_are_strings=True, aws_names=False,
                 missing_column_code="ProcessingTimeError", unnamed_index_paths=False,
                 unnamed_by_position=False, alias_clashes_with_header=True,
                 star_keeps_empty_fields=True, substring_start_clamped=False,
                 year_keeps_month_end=True, utcnow_in_z=False, version_function=True,
                 json_bool_typed_equality=False),
    AWS: Flavor(AWS, "exactly AWS S3 Select", reserved_words=True),
    MINIO: Flavor(MINIO, "MinIO's S3 Select: AWS's reading, typing and printing, AWS's "
                         "reserved words accepted as names", reading=MINIO_READING),
}
FLAVOR_NAMES: Final = tuple(FLAVORS)
"""Every flavour's name (the order help texts list them in)."""

# Every flavour default, here and nowhere else (``tests/test_architecture.py`` pins it): each
# entry point resolves a call's flavour once, the one named or its surface's default.
STATEMENT_DEFAULT: Final = STANDARD
"""The flavour of a Flight SQL statement when the client names none (any SQL client)."""
S3_REQUEST_DEFAULT: Final = CEPH
"""The flavour of an S3 SelectObjectContent request over Flight when the client names none:
the server answers as the Ceph RGW it stands in for. Also the translator's and the engine's
when a caller names none."""
S3_API_DEFAULT: Final = AWS
"""The flavour of a SelectObjectContent call made in AWS's own API when the caller names
none: the S3 door (``serve --s3-port``) and ``flight-select query`` answer as AWS does."""


def flavor(name: str) -> Flavor:
    """The flavour called ``name``.

    Raises:
        KeyError: no such flavour (callers turn it into their own error).

    Example:
        >>> flavor("standard").reading.csv_empty_is_null
        False
    """
    return FLAVORS[name]


__all__ = [
    "AWS",
    "AWS_PRINTING",
    "AWS_READING",
    "CEPH",
    "CEPH_PRINTING",
    "CEPH_READING",
    "FLAVORS",
    "FLAVOR_NAMES",
    "MINIO",
    "MINIO_READING",
    "S3_API_DEFAULT",
    "S3_REQUEST_DEFAULT",
    "STANDARD",
    "STATEMENT_DEFAULT",
    "Flavor",
    "PrintingRules",
    "ReadingRules",
    "flavor",
]
