"""LIKE patterns as DataFusion reads them: as its own LIKE where that is exact, else as a
regular expression (``[classes]``, any escape character).

Hand-written: s3-select's LIKE has character classes and any escape character; DataFusion's
LIKE has neither and its ``ESCAPE`` accepts only a backslash.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Final

# Characters escaped when a LIKE pattern becomes a regular expression (valid in Rust regex,
# RE2 and Python re alike).
_REGEX_META = frozenset("\\.+*?()|[]{}^$#&-~")


def like_to_regex(pattern: str, escape: str | None) -> str:
    """Translate an s3-select LIKE pattern into an anchored regular expression.

    ``%`` is any run, ``_`` one character, ``[a-c]``/``[^a-c]`` character classes, and the
    escape character (any single character) makes the next character literal.

    Args:
        pattern: the LIKE pattern.
        escape: the escape character, or ``None``.

    Returns:
        A regex matching the whole string (``.`` matches newlines).

    Example:
        >>> like_to_regex("a%[b-c]_", None)
        '^(?s:a.*[b-c].)$'
    """
    out: list[str] = []
    for kind, text in _like_tokens(pattern, escape):
        if kind == "class":
            negate = text.startswith("^")
            body = text[1:] if negate else text
            escaped = "".join("\\" + c if c in "\\[]^" else c for c in body)
            out.append("[" + ("^" if negate else "") + escaped + "]")
        else:
            out.append(_REGEX_PIECES.get(kind) or _regex_literal(text))
    return "^(?s:" + "".join(out) + ")$"


def like_to_builtin_pattern(pattern: str, escape: str | None) -> str | None:
    r"""The same LIKE pattern for DataFusion's LIKE, or None when it has no equivalent.

    DataFusion's LIKE (arrow-rs) has ``%`` (newlines included) and ``_`` (one character) and
    always reads a backslash as its escape; s3-select's escape is any character and its
    ``[a-c]`` classes have no LIKE form (those patterns keep :func:`like_to_regex`).

    Example:
        >>> like_to_builtin_pattern("50#%_\\", "#")
        '50\\%_\\\\'
        >>> like_to_builtin_pattern("[ab]%", None) is None
        True
    """
    out: list[str] = []
    for kind, text in _like_tokens(pattern, escape):
        if kind == "class":
            return None
        escaped = kind == "literal" and text in "%_\\"  # DataFusion's LIKE escapes with a backslash
        out.append("\\" + text if escaped else text)
    return "".join(out)


_REGEX_PIECES: Final = {"any": ".*", "one": "."}


def _like_tokens(pattern: str, escape: str | None) -> Iterator[tuple[str, str]]:
    """A LIKE pattern as ``(kind, text)`` tokens: ``any`` (``%``), ``one`` (``_``), ``class``
    (the body of ``[...]``, a leading ``^`` negating it) and ``literal`` (one character, an
    escaped one included). The one reading of s3-select's LIKE syntax both renderers share."""
    i = 0
    n = len(pattern)
    while i < n:
        ch = pattern[i]
        if escape and ch == escape and i + 1 < n:
            yield "literal", pattern[i + 1]
            i += 2
            continue
        if ch == "[" and (close := _class_end(pattern, i)) > 0:
            yield "class", pattern[i + 1 : close]
            i = close + 1
            continue
        yield {"%": ("any", ch), "_": ("one", ch)}.get(ch, ("literal", ch))
        i += 1


def _class_end(pattern: str, start: int) -> int:
    close = pattern.find("]", start + 2 if pattern[start + 1 : start + 2] == "^" else start + 1)
    return close if close > start + 1 else -1


def _regex_literal(ch: str) -> str:
    return "\\" + ch if ch in _REGEX_META else ch
