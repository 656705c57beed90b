"""Install the JVM optimizer rule that keeps one query's pushed read from serving another.

PySpark 4.3.0 stores the read planned by the last query that pushed filters on the relation a
``load()`` created and reuses it for a later query that pushes none (the proof from Spark's
classes is in :mod:`compute_client.spark_source`). No Python hook runs per query, so the cure
is a small Java optimizer rule, ``jvm/ForgetStalePythonReads.java`` (its comment says what it
decides), compiled here with the JDK's ``javac`` against the running Spark's jars, cached per
source and Spark version, loaded through py4j and appended to the session's
``experimental.extraOptimizations`` (which run after scan pushdown). Hand-written because
neither Spark nor any package offers a way to scope a Python data source's read to its query.

Without a JDK (no ``javac``) the rule cannot be built: :func:`install` then says so and returns
False, and a DataFrame reused across filtered and unfiltered actions needs
``option("filter_pushdown", "false")`` or a ``load()`` per action.
"""

from __future__ import annotations

import hashlib
import logging
import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

log = logging.getLogger(__name__)

RULE_CLASS = "flightselect.ForgetStalePythonReads"
_SOURCE = Path(__file__).resolve().parent / "jvm" / "ForgetStalePythonReads.java"


def _spark_jars() -> Path:
    from pyspark.find_spark_home import _find_spark_home

    return Path(_find_spark_home()) / "jars"


def _javac() -> str | None:
    home = os.environ.get("JAVA_HOME")
    if home and (Path(home) / "bin" / "javac").is_file():
        return str(Path(home) / "bin" / "javac")
    return shutil.which("javac")


def _cache_dir(spark_version: str) -> Path:
    digest = hashlib.sha256(_SOURCE.read_bytes() + spark_version.encode()).hexdigest()[:16]
    base = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return base / "flight-select" / "jvm" / digest


def compiled_rule(spark_version: str) -> Path | None:
    """The folder holding the compiled rule (built on first use), or None without ``javac``.

    Raises:
        RuntimeError: ``javac`` failed (its output is in the message).
    """
    target = _cache_dir(spark_version)
    if (target / "flightselect" / "ForgetStalePythonReads.class").is_file():
        return target
    javac = _javac()
    if javac is None:
        return None
    building = target.with_name(target.name + f".{os.getpid()}")
    building.mkdir(parents=True, exist_ok=True)
    done = subprocess.run(
        [javac, "-nowarn", "-d", str(building), "-cp", str(_spark_jars() / "*"), str(_SOURCE)],
        capture_output=True, text=True, timeout=300, check=False,
    )
    if done.returncode != 0:
        raise RuntimeError(f"flight-select: compiling {_SOURCE.name} failed: {done.stderr}")
    try:
        building.rename(target)  # atomic: a concurrent build of the same rule may win
    except OSError:
        shutil.rmtree(building, ignore_errors=True)
    return target


def install(spark: Any) -> bool:
    """Add the rule to ``spark``'s optimizer once; False (and a warning) without a JDK."""
    jvm = spark.sparkContext._jvm
    experimental = spark._jsparkSession.experimental()
    rules = experimental.extraOptimizations()
    iterator = rules.iterator()
    while iterator.hasNext():
        if iterator.next().getClass().getName() == RULE_CLASS:
            return True
    folder = compiled_rule(spark.version)
    if folder is None:
        log.warning("flight-select: no javac (a JDK) found, so a DataFrame reused across "
                    "filtered and unfiltered actions may reuse pushed filters; use "
                    "option('filter_pushdown', 'false') or a load() per action")
        return False
    gateway = spark.sparkContext._gateway
    urls = gateway.new_array(jvm.java.net.URL, 1)
    urls[0] = jvm.java.io.File(str(folder) + os.sep).toURI().toURL()
    parent = jvm.java.lang.Thread.currentThread().getContextClassLoader()
    loader = jvm.java.net.URLClassLoader(urls, parent)
    rule = loader.loadClass(RULE_CLASS).getDeclaredConstructor(
        gateway.new_array(jvm.java.lang.Class, 0)).newInstance(
        gateway.new_array(jvm.java.lang.Object, 0))
    extended = jvm.java.util.ArrayList()
    iterator = rules.iterator()
    while iterator.hasNext():
        extended.add(iterator.next())
    extended.add(rule)
    setter = getattr(experimental, "extraOptimizations_$eq")  # Scala's setter name
    setter(jvm.scala.jdk.javaapi.CollectionConverters.asScala(extended).toSeq())
    return True
