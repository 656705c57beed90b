"""Shared fixtures: a real storage server in a subprocess on a free loopback port."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from hypothesis import settings

# CI runs every property test on the same examples (a red CI names a reproducible case); a
# developer's run explores new ones each time.
settings.register_profile("ci", derandomize=True, database=None)
if os.environ.get("CI"):
    settings.load_profile("ci")

ROOT = Path(__file__).resolve().parents[1]
SAMPLES = ROOT / "data" / "samples"


@dataclass
class ServerProcess:
    """A running ``flight-select serve`` and what it printed."""

    location: str
    process: subprocess.Popen[str]
    log_lines: list[str]

    def stop(self) -> int:
        self.process.terminate()
        try:
            return self.process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            self.process.kill()
            return self.process.wait()


def start_server(data_dir: Path, *extra: str, env: dict[str, str] | None = None) -> ServerProcess:
    """Start ``python -m flight_storage serve`` and wait for its ``listening on`` line."""
    command = [sys.executable, "-m", "flight_storage", "serve", "--data", str(data_dir),
               "--port", "0", *extra]
    process = subprocess.Popen(
        command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=ROOT,
        env={**os.environ, **(env or {})},
    )
    log_lines: list[str] = []
    threading.Thread(
        target=lambda: log_lines.extend(iter(process.stderr.readline, "")),  # type: ignore[union-attr]
        daemon=True,
    ).start()
    assert process.stdout is not None
    line = process.stdout.readline()
    if "listening on " not in line:
        process.kill()
        raise RuntimeError(f"server did not start: {line!r} {''.join(log_lines)}")
    location = line.split("listening on ", 1)[1].strip()
    return ServerProcess(location, process, log_lines)


@pytest.fixture(scope="session")
def sample_server() -> Iterator[ServerProcess]:
    """One server over data/samples for the whole session."""
    server = start_server(SAMPLES)
    yield server
    server.stop()
