"""Building the JVM reuse guard: compiled once per source and Spark version, none without javac.

Whether the rule does its job is tests/compute_client/test_spark_reuse.py (real Spark)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from compute_client import spark_reuse_guard


def test_without_javac_there_is_no_rule(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    monkeypatch.setattr(spark_reuse_guard, "_javac", lambda: None)
    assert spark_reuse_guard.compiled_rule("4.3.0") is None


@pytest.mark.skipif(shutil.which("javac") is None, reason="needs a JDK's javac")
def test_the_rule_is_compiled_once_and_cached(tmp_path: Path,
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    folder = spark_reuse_guard.compiled_rule("4.3.0")
    assert folder is not None
    assert folder.is_relative_to(tmp_path)
    assert (folder / "flightselect" / "ForgetStalePythonReads.class").is_file()
    monkeypatch.setattr(spark_reuse_guard, "_javac", lambda: None)  # cached: no javac needed
    assert spark_reuse_guard.compiled_rule("4.3.0") == folder
    assert spark_reuse_guard.compiled_rule("4.4.0") is None  # another Spark: built anew
