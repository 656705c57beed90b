"""Benchmarks that reach into the server's private steps follow the server they measure."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pytest
from pyarrow import csv

from benchmarks import common, endpoint_steps


@pytest.mark.slow
def test_endpoint_steps_runs_the_per_endpoint_path_of_this_commit(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """``benchmarks.endpoint_steps`` times a DoGet's steps by calling them one at a time; a
    step that moved (the bucket kind's ``_plan_ticket``, issue 40) broke it with nothing else
    noticing. One round over its 64 endpoints: every step ran, and the endpoints together
    answered what pyarrow finds in the object."""
    monkeypatch.setattr(common, "WORK", tmp_path)
    result = endpoint_steps.run(rounds=1)
    table = csv.read_csv(common.peer_csv(endpoint_steps.endpoint_cost.ROWS),
                         read_options=csv.ReadOptions(autogenerate_column_names=True),
                         convert_options=csv.ConvertOptions(column_types={"f2": pa.string()}))
    expected = pc.sum(pc.equal(table["f2"], "none")).as_py() or 0
    assert result["endpoints"] == 64
    assert set(result["cpu_ms"]) == {"ticket", "access", "plan ticket", "planning thread",
                                     "schema", "engine", "version check", "stream thread"}
    assert result["rows"] == expected
