"""``flight-select serve`` refuses at start what it could not serve, naming the option."""

from __future__ import annotations

import subprocess
import sys

import pytest

from tests.conftest import ROOT


@pytest.mark.parametrize("data, what", [
    ("README.md", "a file"),  # it used to start and answer InternalError
    ("no/such/folder", "not found"),
])
def test_data_that_is_not_a_folder_is_refused_at_start(data: str, what: str) -> None:
    result = subprocess.run(
        [sys.executable, "-m", "flight_storage", "serve", "--data", data, "--port", "0"],
        capture_output=True, text=True, cwd=ROOT, timeout=60)
    assert result.returncode == 2 and "listening" not in result.stdout
    assert f"--data {data}: {what}; give a folder of buckets" in result.stderr
    assert "Traceback" not in result.stderr
