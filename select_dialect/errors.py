"""Errors raised while reading or translating an s3-select statement.

    SelectDialectError (code, message, line, column)
    ├── QuerySyntaxError          the text does not parse (line, column, offending text)
    ├── UnsupportedFeatureError   parses, but asks for something we do not (or must not) run
    └── QuerySemanticError        well formed but meaningless for this input (unknown column,
                                  alias clash, cyclic alias, string arithmetic, ...)

Every error carries the S3 error ``code`` a client sees. Ceph's RGW reports every syntax error
as ``UnsupportedSyntax`` and every execution-time error as ``ProcessingTimeError``; the AWS
codes are kept where AWS documents a more precise one.
"""

from __future__ import annotations

from typing import Any


class SelectDialectError(Exception):
    """Base class: a user error in an s3-select statement."""

    code: str = "InvalidQuery"

    def __init__(
        self,
        message: str,
        *,
        code: str | None = None,
        line: int | None = None,
        column: int | None = None,
    ) -> None:
        super().__init__(message)
        self.message = message
        if code is not None:
            self.code = code
        self.line = line
        self.column = column

    def to_dict(self) -> dict[str, Any]:
        """The JSON-able description sent to clients."""
        out: dict[str, Any] = {"code": self.code, "message": self.message}
        if self.line is not None:
            out["line"] = self.line
        if self.column is not None:
            out["column"] = self.column
        return out

    def __str__(self) -> str:
        return f"{self.code}: {self.message}"


class QuerySyntaxError(SelectDialectError):
    """The statement does not parse; ``offending`` is the text at the error position."""

    code = "ParseUnexpectedToken"

    def __init__(
        self,
        message: str,
        *,
        code: str | None = None,
        line: int | None = None,
        column: int | None = None,
        offending: str = "",
    ) -> None:
        super().__init__(message, code=code, line=line, column=column)
        self.offending = offending

    def to_dict(self) -> dict[str, Any]:
        out = super().to_dict()
        out["offending"] = self.offending
        return out


class UnsupportedFeatureError(SelectDialectError):
    """The statement asks for a feature that is not supported (or not allowed)."""

    code = "UnsupportedSyntax"


class TableShapeError(UnsupportedFeatureError):
    """The statement reads its table in a way the table's columns cannot serve (a path into a
    column holding JSON text): final, whichever engine would plan the statement."""


class QuerySemanticError(SelectDialectError):
    """The statement is well formed but cannot be evaluated as written."""

    code = "ProcessingTimeError"
