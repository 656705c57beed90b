"""The README's "Serve your own data" walk-through, run as written (the port is the difference).

Each step is taken from the README's fenced blocks in that section, so a change to the README
changes what runs here: the shell step makes the data (a CSV with a header line and zone-less
timestamps), the server runs on that directory without configuration, each Python step (ADBC,
pandas, Spark) must print what its last comment shows, Spark's filter must run on the server,
and the JSON block, as the bucket's configuration, must win over what was inferred.
"""

from __future__ import annotations

import ast
import json
import re
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import ServerProcess, running_server

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text(encoding="utf-8")
OBJECT = "shop/orders/2025-01.csv"


def _section() -> str:
    match = re.search(r"^## Serve your own data\n(.*?)^## ", README, flags=re.DOTALL | re.MULTILINE)
    assert match is not None, "no 'Serve your own data' section in README.md"
    return match.group(1)


def _blocks(language: str) -> list[str]:
    """The section's fenced blocks of ``language`` (indented inside the list), in order."""
    blocks = re.findall(rf"^( *)```{language}\n(.*?)^\1```", _section(),
                        flags=re.DOTALL | re.MULTILINE)
    return [textwrap.dedent(body) for _, body in blocks]


def _run_step(code: str, server: ServerProcess) -> object:
    """Run a Python step against ``server``; its printed value must be its last comment's."""
    comment = code.rstrip().splitlines()[-1].strip()
    assert comment.startswith("# "), f"the step's last line shows no output: {comment!r}"
    done = subprocess.run(
        [sys.executable, "-c", code.replace("grpc://127.0.0.1:8815", server.location)],
        capture_output=True, text=True, timeout=300, check=False, cwd=ROOT)
    assert done.returncode == 0, done.stderr[-3000:]
    printed = ast.literal_eval(done.stdout.strip().splitlines()[-1])
    assert printed == ast.literal_eval(comment[2:])
    return printed


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    root = tmp_path_factory.mktemp("walkthrough")
    (bash,) = _blocks("bash")
    subprocess.run(bash, shell=True, cwd=root, check=True, timeout=60)
    assert "serve --data mydata" in _section()
    with running_server(root / "mydata") as process:
        yield process


def test_adbc_and_pandas_read_the_csv_typed_without_configuration(server: ServerProcess) -> None:
    adbc, pandas, _spark = _blocks("python")
    assert _run_step(adbc, server) == [("FR", 19.9, "2025-01-03T09:15:00+00:00"),
                                       ("FR", 42.5, "2025-01-04T08:02:55+00:00")]
    assert _run_step(pandas, server) == {"order_id": "int64", "amount": "float64",
                                         "country": "object",
                                         "ordered_at": "datetime64[us, UTC]"}


@pytest.mark.spark
def test_spark_pushes_the_filter_to_the_server(server: ServerProcess) -> None:
    *_, spark = _blocks("python")
    seen = len(server.log_lines)
    assert _run_step(spark, server) == ["ES", "FR"]
    sent = [json.loads(line) for line in server.log_lines[seen:] if line.startswith("{")]
    rows = sum(e.get("rows", 0) for e in sent
               if e.get("method") == "DO_GET" and e.get("object") == OBJECT)
    assert rows == 2  # the two matching rows of four: the server filtered


def test_the_configuration_wins_and_a_bad_value_names_its_line(server: ServerProcess) -> None:
    import adbc_driver_flightsql.dbapi as flightsql
    import adbc_driver_manager
    import pyarrow as pa

    (config,) = _blocks("json")
    data = Path(server.process.args[server.process.args.index("--data") + 1])
    (data / "shop" / ".flight-select.json").write_text(config, encoding="utf-8")
    with flightsql.connect(server.location, autocommit=True) as conn, conn.cursor() as cur:
        cur.execute(f'SELECT amount FROM "shop"."{OBJECT.split("/", 1)[1]}"')
        assert cur.fetch_arrow_table().schema.types == [pa.decimal128(10, 2)]
    quoted = re.search(r"`(shop/orders/2025-01\.csv: line \d+, column \d+ \(amount\): "
                       r"'n/a' is not a valid decimal\(10,2\))`", _section())
    assert quoted is not None, "the section no longer quotes the bad value's error"
    path = data / OBJECT
    path.write_text(path.read_text().replace("7.25", "n/a"))
    with flightsql.connect(server.location, autocommit=True) as conn, conn.cursor() as cur, \
            pytest.raises(adbc_driver_manager.Error) as info:
        _fetch_all(cur, 'SELECT sum(amount) FROM "shop"."orders/2025-01.csv"')
    assert quoted.group(1) in str(info.value)


def _fetch_all(cursor: Any, statement: str) -> list[Any]:
    cursor.execute(statement)
    return list(cursor.fetchall())
