"""CPU-seconds of processes, a server's with the processes below it (its engine workers).

Hand-written: ``time.clock_gettime`` on a process's CPU clock id (nanoseconds), and ``/proc``
for the process tree and the ticks of reaped children; psutil elsewhere.
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Iterable
from pathlib import Path


def process_cpu_seconds(pid: int | None = None) -> float:
    """CPU-seconds (user + system, every thread, ended threads included) of process ``pid``
    and every process below it (None: this process alone): a server's engine workers run its
    aggregates (``--engine-workers``), so their CPU is the server's.

    On Linux it reads each process's CPU clock (``clock_gettime`` on the clock id of its pid),
    which counts in nanoseconds; the tick counts in ``/proc/<pid>/stat`` that psutil reads move
    in 10 ms steps, as long as a whole quick query. Children that ended and were reaped count
    through their parent's ``cutime``/``cstime`` ticks (a worker replaced after a large job).
    psutil elsewhere.
    """
    if pid is None or pid == os.getpid():
        return time.process_time()
    if sys.platform == "linux":
        tree = process_tree(pid)
        total = 0.0
        for member in tree:
            try:
                # MAKE_PROCESS_CPUCLOCK(pid, CPUCLOCK_SCHED) of the kernel's posix-cpu-timers
                total += time.clock_gettime(((~member) << 3) | 2)
                fields = Path(f"/proc/{member}/stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue  # ended meanwhile
            total += (int(fields[13]) + int(fields[14])) / os.sysconf("SC_CLK_TCK")
        return total
    import psutil

    times = psutil.Process(pid).cpu_times()
    return float(times.user + times.system)


def process_tree(pid: int) -> list[int]:
    """``pid`` and every process below it (Linux ``/proc``): a server and its engine workers
    (with their forkserver and resource tracker; ``execution/engine_workers.py``)."""
    parents: dict[int, int] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text()
            except OSError:
                continue  # ended meanwhile
            parents[int(entry.name)] = int(stat.rsplit(")", 1)[1].split()[1])
    tree = [pid]
    for member in tree:
        tree.extend(child for child, parent in parents.items() if parent == member)
    return tree


def process_cpu_seconds_of(pids: Iterable[int]) -> float:
    """The CPU-seconds of several processes together (:func:`process_cpu_seconds`)."""
    return sum(process_cpu_seconds(pid) for pid in pids)
