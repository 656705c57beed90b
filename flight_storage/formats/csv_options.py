"""A request's CSV options (``InputSerialization.CSV``) under the flavour's reading rules.

:class:`CsvInputOptions` is what every CSV reader of the server takes: the reference reader
(:mod:`flight_storage.formats.csv_input`), the survey that lets DataFusion read an object
(:mod:`flight_storage.formats.csv_guard`) and the sniffer (:mod:`flight_storage.formats.csv_sniff`).
What the request leaves out comes from the flavour's
:class:`~select_dialect.flavors.ReadingRules`; this module only reads them.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import cast

from flight_storage.errors import InvalidRequestError
from flight_storage.formats.record_size import DEFAULT_MAX_RECORD_SIZE
from select_dialect.flavors import CEPH_READING, ReadingRules

_HEADER_INFO = ("NONE", "IGNORE", "USE")
_BOOL_TEXT = {"TRUE": True, "FALSE": False}


@dataclass(frozen=True)
class CsvInputOptions:
    """How to read a CSV object (AWS ``InputSerialization.CSV`` plus the flavour's reading
    rules; the defaults are Ceph's).

    Attributes:
        field_delimiter: separates fields (one or more characters).
        record_delimiter: ends records (one or more characters).
        quote: quote character, or None when quoting is disabled.
        escape: escape character, or None when disabled.
        comment: a record starting with this character is skipped, or None.
        file_header_info: ``NONE``, ``IGNORE`` or ``USE``.
        quoted_record_delimiter: a record delimiter inside quotes is data.
        quotes_anywhere: Ceph's tokenizing rules (quotes anywhere toggle and vanish); off,
            RFC 4180 with lazy quotes (:attr:`ReadingRules.csv_quotes_anywhere`).
        empty_is_null: an empty field is NULL (Ceph) rather than ``""`` (AWS).
        skip_empty_lines: empty records are dropped.
        trim_chars: characters trimmed from both ends of every field (Ceph extension).
        max_record_size: longest record accepted, in bytes.
        unclosed_quote_error: a quoted field that does not close (before its line ends, or
            with ``quoted_record_delimiter`` before the object ends) is an error rather than
            closed there (Ceph's rule).
    """

    field_delimiter: str = ","
    record_delimiter: str = "\n"
    quote: str | None = '"'
    escape: str | None = "\\"
    comment: str | None = None
    file_header_info: str = "NONE"
    quoted_record_delimiter: bool = False
    quotes_anywhere: bool = True
    empty_is_null: bool = True
    skip_empty_lines: bool = False
    trim_chars: str = ""
    max_record_size: int = DEFAULT_MAX_RECORD_SIZE
    unclosed_quote_error: bool = False

    @classmethod
    def from_request(
        cls,
        csv: Mapping[str, str] | None,
        reading: ReadingRules = CEPH_READING,
        *,
        extensions: Mapping[str, object] | None = None,
        max_record_size: int = DEFAULT_MAX_RECORD_SIZE,
        typed: bool = False,
    ) -> CsvInputOptions:
        """Build options from the request's ``InputSerialization["CSV"]`` mapping.

        Args:
            csv: ``FieldDelimiter``, ``RecordDelimiter``, ``QuoteCharacter``,
                ``QuoteEscapeCharacter``, ``Comments``, ``AllowQuotedRecordDelimiter``,
                ``FileHeaderInfo``; missing keys take the flavour's defaults. An empty
                ``QuoteCharacter`` / ``QuoteEscapeCharacter`` disables it.
            reading: the flavour's reading rules (``Flavor.reading``).
            extensions: Ceph-only options: ``comment_empty_lines`` (bool) and
                ``trim_chars`` (list of characters).
            max_record_size: longest record accepted, in bytes.
            typed: the table has configured or sniffed columns
                (:attr:`ReadingRules.csv_typed_empty_is_null` then says how an empty field
                reads).

        Raises:
            InvalidRequestError: empty delimiters, a multi-character quote or escape, or an
                unknown ``FileHeaderInfo``.

        Example:
            >>> from select_dialect.flavors import AWS_READING
            >>> CsvInputOptions.from_request({"FieldDelimiter": "|"}, AWS_READING).escape
            '"'
        """
        csv = csv or {}
        ext = extensions or {}
        header = str(csv.get("FileHeaderInfo") or "NONE").upper()
        if header not in _HEADER_INFO:
            raise InvalidRequestError(
                f"FileHeaderInfo must be one of {', '.join(_HEADER_INFO)}, not {header!r}"
            )
        quote = _optional_char(csv, "QuoteCharacter", '"')
        escape = _optional_char(csv, "QuoteEscapeCharacter", reading.csv_escape)
        comment = _optional_char(csv, "Comments", reading.csv_comment)
        field = str(csv.get("FieldDelimiter") or ",")
        record = str(csv.get("RecordDelimiter") or "\n")
        allow = str(csv.get("AllowQuotedRecordDelimiter") or "FALSE").upper()
        if allow not in _BOOL_TEXT:
            raise InvalidRequestError("AllowQuotedRecordDelimiter must be TRUE or FALSE")
        skip_empty = reading.csv_skip_empty_lines or bool(ext.get("comment_empty_lines"))
        # A string or a list of characters; anything else fails in join as it did untyped.
        trim_chars = cast("Iterable[object]", ext.get("trim_chars") or [])
        trim = "".join(str(c) for c in trim_chars)
        return cls(
            field_delimiter=field,
            record_delimiter=record,
            quote=quote,
            escape=escape,
            comment=comment,
            file_header_info=header,
            quoted_record_delimiter=_BOOL_TEXT[allow] or reading.csv_quoted_record_delimiter,
            quotes_anywhere=reading.csv_quotes_anywhere,
            empty_is_null=(reading.csv_empty_is_null
                           or (typed and reading.csv_typed_empty_is_null)),
            skip_empty_lines=skip_empty,
            trim_chars=trim,
            max_record_size=max_record_size,
            unclosed_quote_error=reading.csv_unclosed_quote_error,
        )

    @property
    def has_header(self) -> bool:
        """True when the first record is a header (``IGNORE`` or ``USE``)."""
        return self.file_header_info in ("IGNORE", "USE")


def _optional_char(csv: Mapping[str, str], key: str, default: str | None) -> str | None:
    if key not in csv or csv[key] is None:
        return default
    value = str(csv[key])
    if value == "":
        return None
    if len(value) != 1:
        raise InvalidRequestError(f"{key} must be a single character, not {value!r}")
    return value
