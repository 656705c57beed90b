"""``flight-select cache status``: a running server's decoded cache (``serve --cache-dir``), as
its ``health`` action reports it (the same figures as ``/metrics`` and the log)."""

from __future__ import annotations

import json
from collections.abc import Mapping

import pyarrow.flight as flight

TIMEOUT_S = 10.0


def cache_status(location: str, user: str | None = None, password: str | None = None,
                 tls_root_certs: bytes | None = None) -> dict[str, object] | None:
    """The ``decoded_cache`` part of the server's ``health`` action, or None when the server
    runs without a decoded cache.

    Raises:
        flight.FlightError: the server cannot be reached, or refuses the credentials.
    """
    client = flight.FlightClient(location, tls_root_certs=tls_root_certs)
    try:
        headers = []
        if user is not None:
            headers.append(client.authenticate_basic_token(
                user, password or "", flight.FlightCallOptions(timeout=TIMEOUT_S)))
        options = flight.FlightCallOptions(headers=headers, timeout=TIMEOUT_S)
        health = json.loads(b"".join(r.body.to_pybytes() for r in client.do_action(
            flight.Action("health", b""), options)))
    finally:
        client.close()
    stats = health.get("decoded_cache")
    return dict(stats) if isinstance(stats, dict) else None


_MIB = 1 << 20


def format_cache_status(stats: Mapping[str, object] | None) -> str:
    """A few lines for people: entries and bytes against the bound, hits and misses, fills."""
    if stats is None:
        return "decoded cache: off (start the server with --cache-dir DIR)"
    size, bound = float(str(stats["bytes"])), float(str(stats["max_bytes"]))
    hits, misses = int(str(stats["hits"])), int(str(stats["misses"]))
    asked = hits + misses
    lines = [
        f"decoded cache: {stats['folder']}",
        f"  entries    {stats['entries']} ({size / _MIB:.1f} MiB of {bound / _MIB:.0f} MiB, "
        f"{100 * size / bound if bound else 0:.0f}%)",
        f"  hits       {hits} of {asked} plans ({100 * hits / asked if asked else 0:.0f}%), "
        f"misses {misses}",
        f"  fills      {stats['fills']} done, {stats['filling']} running, "
        f"{stats['failures']} failed; evictions {stats['evictions']}",
    ]
    if "last_fill_bytes" in stats:
        lines.append(f"  last fill  {float(str(stats['last_fill_bytes'])) / _MIB:.1f} MiB, "
                     f"{stats.get('last_fill_cpu_s')} CPU-s")
    return "\n".join(lines)
