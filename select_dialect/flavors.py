"""The dialect's flavours: the one list of their names and what each one means.

A flavour decides how a statement is read and answered. Two follow an S3 Select engine
exactly (the shared conformance corpus runs against them); ``standard`` is what a SQL user of
a Flight SQL server expects:

| flavour | LIMIT counts | ``"x"`` | reading and printing rules | beyond S3 Select |
|---|---|---|---|---|
| ``standard`` | result rows | identifier | AWS's (RFC 4180 CSV, valid JSON) | GROUP BY, HAVING, ORDER BY, DISTINCT, SELECT without FROM |
| ``ceph`` | scanned records | string | Ceph RGW's s3select | no |
| ``aws`` | result rows | identifier | AWS S3 Select's | no |

``standard`` reads and prints by AWS's rules because they are the standard ones (RFC 4180
quoting, JSON output that parses, an empty CSV field is the empty string); Ceph's differ from
them where RGW's engine has quirks (quote toggling, unquoted strings in JSON output).

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
        reserved_words: AWS's reserved keywords are refused as unquoted names
            (:mod:`select_dialect.reserved_words`).
        summary: one line for help texts and error messages.
    """

    name: str
    engine: str
    limit_counts_input: bool
    standard_sql: bool
    summary: str
    reserved_words: bool = False


STANDARD: Final = "standard"
CEPH: Final = "ceph"
AWS: Final = "aws"

FLAVORS: Final[dict[str, Flavor]] = {
    STANDARD: Flavor(STANDARD, AWS, limit_counts_input=False, standard_sql=True,
                     summary="standard SQL over S3 Select's functions (AWS reading rules)"),
    CEPH: Flavor(CEPH, CEPH, limit_counts_input=True, standard_sql=False,
                 summary="exactly Ceph RGW's s3select"),
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
