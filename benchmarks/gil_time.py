"""How long a process's threads hold the GIL while some work runs: py-spy samples the process
(``--gil``: only a thread holding the GIL is recorded; ``--nonblocking``: the process is not
paused) and the samples over the rate are the seconds held. What the many-core claim of issue 37
is read against: a server whose serving threads hold the GIL for ``g`` seconds per query cannot
answer that query in less than ``g`` seconds however many cores it has, so ``g`` must stay
below the engine's CPU over the cores (``1/N`` of the in-process CPU on N cores)."""

from __future__ import annotations

import signal
import subprocess
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from benchmarks.common import BIN

RATE_HZ = 500
ATTACH_S = 1.0
"""py-spy needs a moment to attach before the work starts."""


def gil_seconds(pid: int, work: Callable[[], Any], repeats: int, rate: int = RATE_HZ) -> float:
    """Seconds per run of ``work`` that process ``pid`` held the GIL (``repeats`` runs)."""
    with tempfile.TemporaryDirectory() as folder:
        out = Path(folder) / "samples.txt"
        spy = subprocess.Popen(
            [str(BIN / "py-spy"), "record", "--pid", str(pid), "--gil", "--nonblocking",
             "--rate", str(rate), "--format", "raw", "--output", str(out)],
            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        try:
            time.sleep(ATTACH_S)
            for _ in range(repeats):
                work()
        finally:
            spy.send_signal(signal.SIGINT)
            try:
                _, errors = spy.communicate(timeout=30)
            except subprocess.TimeoutExpired:
                spy.kill()
                raise
        if not out.exists():
            raise RuntimeError(f"py-spy wrote no samples: {errors[-500:]}")
        samples = sum(int(line.rsplit(" ", 1)[1]) for line in out.read_text().splitlines()
                      if line.strip())
    # the attach wait adds idle time, not GIL time: idle threads are not sampled under --gil
    return samples / rate / repeats
