"""The dependency arrows of the layout stay as designed."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
FORBIDDEN_IN_DIALECT = {"pyarrow", "datafusion", "pyspark", "flight_storage", "compute_client",
                        "select_dialect_helpers"}


def _imported_modules(package: Path) -> set[str]:
    names: set[str] = set()
    for path in package.rglob("*.py"):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                names.update(alias.name.split(".")[0] for alias in node.names)
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                names.add(node.module.split(".")[0])
    return names


def test_select_dialect_imports_only_sqlglot_and_stdlib() -> None:
    imported = _imported_modules(ROOT / "select_dialect")
    assert "sqlglot" in imported
    assert not imported & FORBIDDEN_IN_DIALECT


def test_importing_compute_client_loads_no_server_modules() -> None:
    code = (
        "import sys, compute_client.flight, compute_client.datafusion_source, "
        "compute_client.pushdown, compute_client.spark_source, compute_client.spark_stream, "
        "compute_client.spark_filters, compute_client.pipeline\n"
        "bad = sorted(m for m in sys.modules if m.startswith('select_dialect') or "
        "(m.startswith('flight_storage') and m not in "
        "('flight_storage', 'flight_storage.protocol', 'flight_storage._flight_sql_pb2')))\n"
        "print(','.join(bad))\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                            cwd=ROOT, check=True)
    assert result.stdout.strip() == ""


def test_flight_storage_package_init_is_empty() -> None:
    assert (ROOT / "flight_storage" / "__init__.py").read_text().strip() == ""
