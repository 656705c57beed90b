"""The sniffer: header and types from a CSV's first records, and which tables get them."""

from __future__ import annotations

import io
import json
import re
from pathlib import Path

import pytest

from flight_storage.errors import InvalidRequestError
from flight_storage.formats.csv_options import CsvInputOptions
from flight_storage.formats.csv_sniff import TableReading, read_sample, sniff_csv
from flight_storage.request.sniffing import TableSniffer
from flight_storage.request.tables import resolve_table
from select_dialect.flavors import FLAVORS
from tests.flight_storage.test_server_support import write_bucket

STANDARD = CsvInputOptions.from_request({}, FLAVORS["standard"].reading)


@pytest.mark.parametrize(("sample", "header", "names", "types"), [
    # the user's CSV: a text header over numbers and zone-less timestamps
    (b"id,amount,ts\n1,2.5,2024-08-16 20:29:54\n2,3,2024-08-16 20:30:00\n", True,
     ("id", "amount", "ts"), ("int64", "float64", "timestamp")),
    # zoned timestamps, dates, booleans, a column empty in the whole sample
    (b"t,d,ok,e\n2024-08-16T20:29:54Z,2024-08-16,true,\n2024-08-16T20:29:54+05:30,"
     b"2024-08-17,False,\n", True, ("t", "d", "ok", "e"),
     ("timestamp", "date", "bool", "string")),
    # one typed column is enough to show the header (DuckDB's rule)
    (b"name,city,n\nann,paris,1\nbob,rome,2\n", True, ("name", "city", "n"),
     ("string", "string", "int64")),
    # a header that is a number where the column is numbers too: not a header by that column,
    # but "name" breaks nothing either: no header
    (b"name,2024\nann,5\n", False, ("_1", "_2"), ("string", "int64")),
    # all text: the header cannot be told from data (DuckDB assumes one; we do not)
    (b"a,b\nc,d\n", False, ("_1", "_2"), ("string", "string")),
    # numbers from the first record on: no header
    (b"1,2\n3,4\n", False, ("_1", "_2"), ("int64", "int64")),
    # a first record that is a float where the rest are integers only widens the type
    (b"1.5,x\n2,y\n", False, ("_1", "_2"), ("float64", "string")),
])
def test_header_and_types(sample: bytes, header: bool, names: tuple[str, ...],
                          types: tuple[str, ...]) -> None:
    sniffed = sniff_csv(sample, STANDARD)
    assert (sniffed.has_header, sniffed.names, sniffed.types) == (header, names, types)


def test_types_datafusion_does_not_read_the_same_way_stay_text() -> None:
    """pyarrow takes a minutes-only timestamp and "n/a"-free numbers; DataFusion's reader
    refuses ``2024-08-16 20:29``, so the column stays a string."""
    sniffed = sniff_csv(b"id,at\n1,2024-08-16 20:29\n2,2024-08-16 20:30\n", STANDARD)
    assert sniffed.types == ("int64", "string")


def test_only_an_empty_field_is_null() -> None:
    """pyarrow's default NULL spellings (``n/a``, ``NA``, ``null``) are values to DataFusion's
    reader: a column holding them is text."""
    sniffed = sniff_csv(b"id,amount\n1,2.5\n2,n/a\n3,\n", STANDARD)
    assert sniffed.types == ("int64", "string")


def test_header_names_are_made_unique() -> None:
    sniffed = sniff_csv(b"a,a,,b\n1,2,3,4\n", STANDARD)
    assert sniffed.names == ("a", "a_2", "_3", "b")


def test_a_ragged_record_says_nothing_of_the_types() -> None:
    sniffed = sniff_csv(b"id,n\n1,2\n3,4,5\n6\n7,8\n", STANDARD)
    assert (sniffed.has_header, sniffed.types) == (True, ("int64", "int64"))


@pytest.mark.parametrize(("sample", "reason"), [
    (b"", "empty"),
    (b"id,name\n1,caf\xe9\n", "invalid UTF-8"),
])
def test_what_cannot_be_sniffed_says_why(sample: bytes, reason: str) -> None:
    sniffed = sniff_csv(sample, STANDARD)
    assert not sniffed.sniffed and reason in sniffed.reason


def test_cephs_rules_are_not_sniffed() -> None:
    assert "Ceph" in sniff_csv(b"id\n1\n", CsvInputOptions.from_request({}, FLAVORS["ceph"].reading)).reason


def test_a_configured_header_wins() -> None:
    sniffed = sniff_csv(b"a,b\n1,2\n", STANDARD, header=True)
    assert (sniffed.names, sniffed.types) == (("a", "b"), ("int64", "int64"))
    sniffed = sniff_csv(b"id,n\n1,2\n", STANDARD, header=False)
    assert (sniffed.names, sniffed.types) == (("_1", "_2"), ("string", "string"))


def test_the_sample_ends_at_a_record_delimiter() -> None:
    assert read_sample(io.BytesIO(b"ab\ncd\nef"), STANDARD, 4) == b"ab\n"
    assert read_sample(io.BytesIO(b"ab\ncd\n"), STANDARD, 100) == b"ab\ncd\n"
    assert read_sample(io.BytesIO(b"abcdef\n"), STANDARD, 4) is None


# ------------------------------------------------------------------ which tables are sniffed


def _columns(tmp_path: Path, files: dict[str, str], key: str,
             config: dict[str, object] | None = None, sniffer: TableSniffer | None = None,
             overrides: dict[str, object] | None = None) -> list[tuple[str, str]] | None:
    catalog = write_bucket(tmp_path, files, config)
    table = resolve_table(catalog, "b", key, overrides,
                          sniffer=sniffer if sniffer is not None else TableSniffer())
    columns = table.input.columns
    return None if columns is None else list(zip(columns.names, columns.types, strict=True))


def test_an_object_without_configuration_is_sniffed_once_per_version(tmp_path: Path) -> None:
    sniffer = TableSniffer()
    files = {"t.csv": "id,v\n1,x\n"}
    assert _columns(tmp_path, files, "t.csv", sniffer=sniffer) == [("id", "int64"),
                                                                    ("v", "string")]
    _columns(tmp_path, {}, "t.csv", sniffer=sniffer)
    assert sniffer.sniffs == 1
    (tmp_path / "b" / "t.csv").write_text("id,v\n1.5,x\n")
    assert _columns(tmp_path, {}, "t.csv", sniffer=sniffer) == [("id", "float64"),
                                                                ("v", "string")]
    assert sniffer.sniffs == 2


def test_a_configuration_entry_wins(tmp_path: Path) -> None:
    files = {"raw/t.csv": "id,v\n1,x\n", "on/t.csv": "1,2\n3,4\n"}
    config = {"tables": [{"prefix": "raw/"},
                         {"prefix": "on/", "sniff": True,
                          "InputSerialization": {"CSV": {"FileHeaderInfo": "NONE"}}}]}
    assert _columns(tmp_path, files, "raw/t.csv", config) is None
    # "sniff": true types the entry's objects under its own FileHeaderInfo
    assert _columns(tmp_path, files, "on/t.csv", config) == [("_1", "int64"), ("_2", "int64")]


def test_file_header_info_in_the_statement_is_not_sniffed(tmp_path: Path) -> None:
    files = {"t.csv": "id,v\n1,x\n"}
    assert _columns(tmp_path, files, "t.csv",
                    overrides={"CSV": {"FileHeaderInfo": "USE"}}) is None
    assert _columns(tmp_path, files, "t.csv", overrides={"CSV": {"FieldDelimiter": ","}}) == [
        ("id", "int64"), ("v", "string")]


def test_a_headerless_object_keeps_s3_selects_reading(tmp_path: Path) -> None:
    assert _columns(tmp_path, {"t.csv": "1,x\n2,y\n"}, "t.csv") is None


def test_a_prefix_takes_its_first_objects_columns(tmp_path: Path) -> None:
    files = {"p/a.csv": "id,v\n1,x\n", "p/b.csv": "id,v\n2.5,y\n"}
    assert _columns(tmp_path, files, "p/") == [("id", "int64"), ("v", "string")]


def test_sniff_and_columns_exclude_each_other(tmp_path: Path) -> None:
    config = {"tables": [{"prefix": "", "sniff": True, "columns": [{"name": "id"}]}]}
    with pytest.raises(InvalidRequestError, match=re.escape("both 'columns' and 'sniff'")):
        _columns(tmp_path, {"t.csv": "id\n1\n"}, "t.csv", config)


@pytest.mark.parametrize(("entry", "message"), [
    ({"prefix": "", "sniff": "yes"}, "'sniff' of table '' must be true or false"),
    ({"prefix": "", "bad_values": "skip"}, "'bad_values' of table '' must be one of error, null"),
])
def test_bad_reading_settings_are_refused(tmp_path: Path, entry: dict[str, object],
                                          message: str) -> None:
    folder = tmp_path / "b"
    folder.mkdir()
    (folder / "t.csv").write_text("id\n1\n")
    (folder / ".flight-select.json").write_text(json.dumps({"tables": [entry]}))
    with pytest.raises(InvalidRequestError, match=re.escape(message)):
        _columns(tmp_path, {}, "t.csv")


def test_reading_settings_are_checked() -> None:
    with pytest.raises(InvalidRequestError, match="bad_values must be one of"):
        TableReading(bad_values="ignore")


@pytest.mark.parametrize(("values", "expected"), [
    (["00611", "12345"], "string"),  # a zip code prints without its leading zero
    (["+1", "2"], "string"),  # nor with its plus
    (["007.5", "8.5"], "string"),
    (["-0", "3"], "string"),  # -0 prints 0
    (["611", "-12", "0"], "int64"),
    (["1e3", "2E5"], "float64"),  # a float's notation: the number it spells
    (["1.50", "0.5", ".5", "-.25"], "float64"),
])
def test_a_number_column_must_read_back_as_written(values: list[str], expected: str) -> None:
    """Issue #39 item 2: a column whose texts do not come back from the inferred type stays
    text, as DuckDB keeps zip codes and ``+1``."""
    sample = ("name,v\n" + "".join(f"n{i},{v}\n" for i, v in enumerate(values))).encode()
    assert sniff_csv(sample, STANDARD).types == ("string", expected)


def test_a_sample_is_never_cut_inside_quotes() -> None:
    """The standard flavour reads RFC 4180: the sample ends at a record's end, not at a line
    break inside a quoted field (pyarrow would refuse the sample, leaving the object
    unsniffed)."""
    data = b'id,note\n1,"one\ntwo\nthree"\n2,plain\n'
    for size in range(len(b"id,note\n"), len(data)):
        sample = read_sample(io.BytesIO(data), STANDARD, size)
        assert sample in (b"id,note\n", data[: data.index(b"2,plain")])
