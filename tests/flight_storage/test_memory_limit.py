"""The per-query memory limit (``--memory-limit-mb``) through a real server.

Sorting and grouping (the standard flavour's ORDER BY and GROUP BY) are the operators that hold
memory; DataFusion's fair spill pool bounds them, and a query over the limit fails with an S3
code and a message naming the option, while the server keeps serving.
"""

from __future__ import annotations

import random
from collections.abc import Iterator
from pathlib import Path

import pyarrow as pa
import pytest
from pyarrow import flight

from tests.conftest import ServerProcess, start_server
from tests.flight_storage.test_server_support import error_document, statement_descriptor

pytestmark = pytest.mark.reliability

ROWS = 40_000


@pytest.fixture(scope="module")
def tight_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    root = tmp_path_factory.mktemp("memory")
    (root / "b").mkdir()
    rng = random.Random(7)
    lines = [f"{i},{rng.getrandbits(128):032x}" for i in range(ROWS)]  # no header: _1, _2
    (root / "b" / "t.csv").write_text("\n".join(lines) + "\n")
    server = start_server(root, "--memory-limit-mb", "1")
    try:
        yield server
    finally:
        server.stop()


def _read(server: ServerProcess, sql: str) -> pa.Table:
    client = flight.connect(server.location)
    info = client.get_flight_info(statement_descriptor(sql))
    return pa.concat_tables(client.do_get(e.ticket).read_all() for e in info.endpoints)


@pytest.mark.parametrize("sql", [
    'SELECT _1, _2 FROM "b"."t.csv" ORDER BY _2',
    'SELECT _2, count(*) AS n FROM "b"."t.csv" GROUP BY _2',
])
def test_a_query_over_the_memory_limit_fails_naming_the_option(
    tight_server: ServerProcess, sql: str
) -> None:
    with pytest.raises(pa.ArrowException) as failed:
        _read(tight_server, sql)
    document = error_document(failed.value)
    assert document["code"] == "ResourceLimitExceeded"
    assert "--memory-limit-mb" in document["message"]
    # the server goes on serving what fits
    assert _read(tight_server, 'SELECT count(*) AS n FROM "b"."t.csv"').column(0).to_pylist() == [ROWS]


def test_the_same_sort_fits_the_default_limit(tmp_path: Path) -> None:
    (tmp_path / "b").mkdir()
    (tmp_path / "b" / "t.csv").write_text("2,b\n1,a\n")
    server = start_server(tmp_path)
    try:
        table = _read(server, 'SELECT _1 FROM "b"."t.csv" ORDER BY _2')
        assert table.column(0).to_pylist() == ["1", "2"]
    finally:
        server.stop()
