"""The README's examples, run as written (the server's port is the one difference).

The ADBC snippet and the CLI example are taken from the README's fenced blocks, so a change to
the README changes what runs here. Their answers are checked against the sample data.
"""

from __future__ import annotations

import ast
import csv
import json
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import ServerProcess, start_server

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text(encoding="utf-8")
ORDERS = ROOT / "data" / "samples" / "sales" / "orders" / "2024-01.csv"


def _block(language: str, contains: str) -> str:
    for match in re.finditer(rf"```{language}\n(.*?)```", README, flags=re.S):
        if contains in match.group(1):
            return match.group(1)
    raise AssertionError(f"no {language} block with {contains!r} in README.md")


def _orders() -> list[dict[str, str]]:
    with ORDERS.open(newline="", encoding="utf-8") as handle:
        return list(csv.DictReader(handle))


@pytest.fixture(scope="module")
def server() -> Iterator[ServerProcess]:
    """The README's server on the samples, with its S3 door (``door`` has its URL)."""
    process = start_server(ROOT / "data" / "samples", "--s3-port", "0")
    try:
        yield process
    finally:
        process.stop()


@pytest.fixture(scope="module")
def door(server: ServerProcess) -> str:
    assert server.process.stdout is not None
    return server.process.stdout.readline().split("s3 listening on ", 1)[1].strip()


def _run_python(code: str) -> subprocess.CompletedProcess[str]:
    """``code`` in its own interpreter, as a user runs a snippet, every warning shown."""
    return subprocess.run([sys.executable, "-W", "always", "-c", code], cwd=ROOT,
                          capture_output=True, text=True, timeout=120)


def test_readme_adbc_snippet(server: ServerProcess) -> None:
    """Runs as written, and prints its rows and nothing else: no warning from the driver
    (it turns autocommit off at connect, which needs the server's transactions)."""
    code = _block("python", "flightsql.connect").replace("grpc://127.0.0.1:8815",
                                                         server.location)
    result = _run_python(code)
    assert result.returncode == 0, result.stderr
    assert result.stderr == "", result.stderr
    expected = [(r["order_id"], r["region"]) for r in _orders()
                if r["status"] == "delivered"][:5]
    assert ast.literal_eval(result.stdout) == expected


def test_readme_boto3_snippet(door: str) -> None:
    """The S3 door's boto3 example prints the records it selected."""
    code = _block("python", "select_object_content").replace("http://127.0.0.1:9000", door)
    result = _run_python(code)
    assert result.returncode == 0, result.stderr
    assert result.stderr == "", result.stderr
    shipped = [r["order_id"] for r in _orders() if r["status"] == "shipped"]
    assert result.stdout.split() == shipped


def test_readme_datafusion_snippet(server: ServerProcess) -> None:
    code = _block("python", "collect_aggregate").replace("grpc://127.0.0.1:8815",
                                                         server.location)
    scope: dict[str, object] = {}
    exec(compile(code, "README.md", "exec"), scope)  # noqa: S102 - the README's own code
    result: Any = scope["result"]
    comment = re.search(r"print\(result\.server_query\)\s*# (.*)", code)
    assert comment is not None
    assert result.server_query == comment.group(1)
    counts: dict[str, int] = {}
    for row in _orders():
        counts[row["region"]] = counts.get(row["region"], 0) + 1
    assert dict(zip(result.table["region"].to_pylist(), result.table["n"].to_pylist(),
                    strict=True)) == counts


def test_readme_cli_example() -> None:
    command = _block("bash", "flight-select query").replace("\\\n", " ")
    command = command.replace(".venv/bin/flight-select", f"{sys.executable} -m flight_storage")
    result = subprocess.run(command, shell=True, cwd=ROOT, capture_output=True, text=True,
                            timeout=120)
    assert result.returncode == 0, result.stderr
    records = [json.loads(line) for line in result.stdout.splitlines()]
    expected = [r for r in _orders() if r["status"] == "shipped"][:3]
    assert [str(r["order_id"]) for r in records] == [r["order_id"] for r in expected]
    assert [r["r"] for r in records] == [r["region"].upper() for r in expected]
