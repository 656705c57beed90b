"""How many cores this process may compute on: the one answer every default reads.

``os.cpu_count()`` counts the machine's cores, whatever the process is allowed to use; a server
started under ``taskset``, a cgroup cpuset or ``os.sched_setaffinity`` may run on fewer.
DataFusion sizes its own defaults (target partitions, its Tokio worker threads) from the
affinity, so the server's partitions, endpoints and compute slots must too: on a 64-core host
pinned to 16 cores, sizing by ``os.cpu_count()`` would cut each object into 4x the ranges, each
with its fixed cost, for cores the process cannot use.
"""

from __future__ import annotations

import os


def usable_cores() -> int:
    """The cores this process may run on (its CPU affinity where the platform has one, else
    the machine's cores; at least 1)."""
    affinity = getattr(os, "sched_getaffinity", None)
    if affinity is not None:
        return max(1, len(affinity(0)))
    return os.cpu_count() or 1
