"""The README's "Serve your own data" walk-through, run as written (the port is the difference).

Each step is taken from the README's fenced blocks in that section, so a change to the README
changes what runs here: the shell step makes the data, the JSON block is the bucket's
configuration, the server runs on that directory, and the Python step's printed rows must be
the ones its comment shows.
"""

from __future__ import annotations

import ast
import re
import subprocess
import sys
import textwrap
from pathlib import Path

from tests.conftest import start_server

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text(encoding="utf-8")


def _section() -> str:
    match = re.search(r"^## Serve your own data\n(.*?)^## ", README, flags=re.DOTALL | re.MULTILINE)
    assert match is not None, "no 'Serve your own data' section in README.md"
    return match.group(1)


def _block(language: str) -> str:
    """The section's one fenced block of ``language`` (indented inside the list)."""
    blocks = re.findall(rf"^( *)```{language}\n(.*?)^\1```", _section(), flags=re.DOTALL | re.MULTILINE)
    assert len(blocks) == 1, f"expected one {language} block, found {len(blocks)}"
    return textwrap.dedent(blocks[0][1])


def test_serve_your_own_data_walkthrough(tmp_path: Path) -> None:
    subprocess.run(_block("bash"), shell=True, cwd=tmp_path, check=True, timeout=60)
    data = tmp_path / "mydata"
    (data / "shop" / ".flight-select.json").write_text(_block("json"), encoding="utf-8")
    assert "serve --data mydata" in _section()
    server = start_server(data)
    try:
        code = _block("python").replace("grpc://127.0.0.1:8815", server.location)
        done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                              timeout=120, check=True)
    finally:
        server.stop()
    comment = re.search(r"print\(cur\.fetchall\(\)\)\s*# (\[.*?\]):", _block("python"))
    assert comment is not None, "the Python step's comment no longer shows its rows"
    expected = ast.literal_eval(comment.group(1))
    assert ast.literal_eval(done.stdout.strip()) == expected == [("DE", 5.0), ("FR", None)]
