"""The ``to_string`` pattern language: its tokenizer and its overlap with strftime.

s3-select formats timestamps with Java-like patterns (``yyyy-MM-dd'T'HH``, letter runs,
quoted literals, ``''`` for a quote). Neither chrono's strftime (what DataFusion's
``to_char`` speaks) nor Python's reads them, so the tokenizer is hand-written here, once: the
UDF kernel formats with it and the lowering uses it to decide when ``to_char`` gives the same
text (:func:`strftime_for`).
"""

from __future__ import annotations

# Longest run of one pattern letter read as one field (``ddd`` is ``dd`` then ``d``).
MAX_RUN: dict[str, int] = {
    "d": 2, "H": 2, "h": 2, "m": 2, "s": 2, "a": 1, "n": 1, "M": 5, "X": 5, "x": 5,
}  # fmt: skip

Token = tuple[str, int] | str

# (letter, run length) -> strftime directive giving the same text for a wall-clock time with
# a four-digit year. Absent: fields needing the fraction or the offset (S, n, X, x), five-letter
# months and years padded past four digits; a pattern using them keeps the UDF.
_STRFTIME: dict[tuple[str, int], str] = {
    ("y", 1): "%Y", ("y", 2): "%y", ("y", 3): "%Y", ("y", 4): "%Y",
    ("M", 1): "%-m", ("M", 2): "%m", ("M", 3): "%b", ("M", 4): "%B",
    ("d", 1): "%-d", ("d", 2): "%d",
    ("H", 1): "%-H", ("H", 2): "%H",
    ("h", 1): "%-I", ("h", 2): "%I",
    ("a", 1): "%p",
    ("m", 1): "%-M", ("m", 2): "%M",
    ("s", 1): "%-S", ("s", 2): "%S",
}  # fmt: skip

# Letters the kernel formats (everything else is printed as itself, ``letter * count``).
FIELD_LETTERS = frozenset("yMdHhamsSnXx")


def tokenize(pattern: str) -> list[Token]:
    """Split a ``to_string`` pattern into ``(letter, count)`` runs and literal text.

    Example:
        >>> tokenize("yyyy-MM'T'")
        [('y', 4), '-', ('M', 2), 'T']
    """
    tokens: list[Token] = []
    i = 0
    while i < len(pattern):
        ch = pattern[i]
        if ch == "'":
            end = pattern.find("'", i + 1)
            if end == i + 1:
                tokens.append("'")
                i += 2
                continue
            end = len(pattern) if end < 0 else end
            tokens.append(pattern[i + 1 : end])
            i = end + 1
        elif ch.isascii() and ch.isalpha():
            j = i
            limit = i + MAX_RUN.get(ch, len(pattern))
            while j < len(pattern) and j < limit and pattern[j] == ch:
                j += 1
            tokens.append((ch, j - i))
            i = j
        else:
            tokens.append(ch)
            i += 1
    return tokens


def strftime_for(pattern: str) -> str | None:
    """The strftime format printing what ``to_string(ts, pattern)`` prints, or None.

    Only patterns whose fields come from the wall-clock time to the second (year .. second,
    AM/PM) have one; the caller guarantees a four-digit year.

    Example:
        >>> strftime_for("yyyy-MM-dd 'at' h a")
        '%Y-%m-%d at %-I %p'
        >>> strftime_for("HH:mm:ss.SSS") is None
        True
    """
    out: list[str] = []
    for token in tokenize(pattern):
        if isinstance(token, str):
            out.append(token.replace("%", "%%"))
            continue
        letter, count = token
        if letter not in FIELD_LETTERS:
            out.append((letter * count).replace("%", "%%"))
            continue
        directive = _STRFTIME.get(token)
        if directive is None:
            return None
        out.append(directive)
    return "".join(out)
