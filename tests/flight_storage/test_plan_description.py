"""``app_metadata``'s plan description: the one record the server writes and clients read."""

from __future__ import annotations

import json

import pytest

from flight_storage.protocol import PlanDescription


def test_round_trip_leaves_out_what_is_not_said() -> None:
    about = PlanDescription(reader="datafusion", endpoints=3, cores=2, limit_counts_input=False,
                            warnings=("a column is sniffed",), cache="miss")
    assert json.loads(about.to_json()) == {
        "reader": "datafusion", "endpoints": 3, "cores": 2, "limit_counts_input": False,
        "warnings": ["a column is sniffed"], "cache": "miss"}
    assert PlanDescription.from_json(about.to_json()) == about
    assert PlanDescription().to_json() == b"{}"


@pytest.mark.parametrize("sent", [None, b"", b"not json", b"\xff", b"[1, 2]", b'"text"'])
def test_a_server_that_says_nothing_reads_as_unknown(sent: bytes | None) -> None:
    assert PlanDescription.from_json(sent) == PlanDescription()


def test_unknown_keys_and_values_of_the_wrong_type_read_as_unknown() -> None:
    sent = {"reader": 5, "endpoints": True, "cores": "4", "limit_counts_input": 0,
            "mergeable": None, "warnings": ["ok", 3], "future_fact": 1, "files": 7}
    # only ``files`` is a fact of its own type: a bool is no count, 0 no bool
    assert PlanDescription.from_json(json.dumps(sent).encode()) == PlanDescription(files=7)


def test_every_field_is_read_back() -> None:
    about = PlanDescription(
        reader="reference", endpoints=1, cores=8, limit_counts_input=True, mergeable=True,
        reason="not a CSV or Parquet object", columns="configured", warnings=("w",),
        cache="filling", table="iceberg", snapshot=42, files=3, pruned_files=0,
        row_filter="AlwaysTrue()", tables=2, nodes=3)
    assert PlanDescription.from_json(about.to_json()) == about
