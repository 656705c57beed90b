"""Generators of CSV objects for the property tests of the CSV readers (test_native_csv.py,
test_csv_paths.py): lines of plain and quoted fields, and arbitrary bytes over the characters
that matter to CSV rules."""

from __future__ import annotations

from hypothesis import strategies as st

FIELD = st.text(alphabet="ab é,", max_size=4).map(lambda s: s.replace(",", ""))
"""A field without delimiters."""
QUOTED = st.tuples(FIELD, st.sampled_from([",", '""', ',""'])).map(
    lambda t: f'"{t[0]}{t[1]}{t[0]}"')
"""A quoted field holding a delimiter or a doubled quote."""
LINE = st.lists(st.one_of(FIELD, QUOTED), min_size=1, max_size=4).map(",".join)
"""One record of plain and quoted fields."""
ANY_BYTES = st.lists(st.sampled_from([b"a", b",", b'"', b"\n", b"\r", b"\\", b"#", b"\xc3\xa9",
                                      b"\xff", b" "]), max_size=80).map(b"".join)
"""Any bytes of the characters CSV rules care about (invalid UTF-8 included)."""
