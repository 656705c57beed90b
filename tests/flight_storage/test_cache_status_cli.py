"""``flight-select cache status`` against real servers: what the health action says of the
decoded cache (entries, bytes, hits, fills), as JSON and for people; a server without
``--cache-dir`` says it is off; an unreachable server is exit status 1."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pyarrow.flight as flight

from tests.conftest import ROOT, running_server
from tests.flight_storage.test_decoded_cache_server import _filled, _health
from tests.flight_storage.test_server_support import statement_descriptor


def _status(location: str, *extra: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "flight_storage", "cache", "status", "--location", location,
         *extra], capture_output=True, text=True, cwd=ROOT, timeout=120)


def test_cache_status_reports_the_servers_figures(tmp_path: Path) -> None:
    bucket = tmp_path / "data" / "b"
    bucket.mkdir(parents=True)
    (bucket / "t.csv").write_text("".join(f"{i},v{i}\n" for i in range(5000)))
    with running_server(tmp_path / "data", "--no-sniff", "--cache-dir",
                        str(tmp_path / "cache")) as server:
        empty = json.loads(_status(server.location, "--json").stdout)
        assert (empty["entries"], empty["hits"], empty["fills"]) == (0, 0, 0)
        client = flight.connect(server.location)
        for _ in range(3):
            info = client.get_flight_info(statement_descriptor('SELECT count(*) FROM "b"."t.csv"'))
            client.do_get(info.endpoints[0].ticket).read_all()
            _filled(server, 1)
        result = _status(server.location, "--json")
        assert result.returncode == 0, result.stderr
        stats = json.loads(result.stdout)
        assert stats == _health(server)
        assert stats["entries"] == stats["fills"] == 1 and stats["hits"] >= 2
        text = _status(server.location)
        assert text.returncode == 0
        assert f"entries    1 ({stats['bytes'] / (1 << 20):.1f} MiB" in text.stdout
        assert "fills      1 done, 0 running, 0 failed" in text.stdout


def test_a_server_without_the_cache_says_it_is_off(tmp_path: Path) -> None:
    (tmp_path / "data" / "b").mkdir(parents=True)
    with running_server(tmp_path / "data") as server:
        result = _status(server.location)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "decoded cache: off (start the server with --cache-dir DIR)"
    gone = _status(server.location)  # the server has stopped
    assert gone.returncode == 1
    assert "did not answer" in gone.stderr and "Traceback" not in gone.stderr
