"""The Spark side of ``test_spark_cluster.py``, in its own process: one SparkContext per
process, and the test session already holds a ``local[2]`` one.

    python -m tests.compute_client.spark_cluster_job PLANNER OUT_DIR

Starts Spark with master ``local-cluster[2,1,1024]`` (a standalone master and two workers
inside this driver, each executor its own JVM with its own Python workers), then prints one
JSON line per step on stdout:

Each line carries ``elapsed_s`` since the job started (the test's time budget, reported).

- ``{"step": "cluster", ...}``: executors and the process ids of the Python workers;
- ``{"step": "batch", "groups": ...}``: per-group count, distinct count and sum of ``b/rows.csv``
  read through the ``flight-select`` source from PLANNER;
- ``{"step": "pipeline", "output": ...}``: :func:`compute_client.pipeline.run` on the cluster;

then waits for one line on stdin (the test kills a storage node meanwhile) and prints the
batch step again as ``{"step": "batch-again", ...}``.
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from compute_client import pipeline
from compute_client.spark_source import local_session

ROOT = Path(__file__).resolve().parents[2]
MASTER = "local-cluster[2,1,1024]"
STARTED = time.monotonic()


def cluster_session() -> SparkSession:
    """A Spark session on ``local-cluster`` whose executors run this interpreter on our code."""
    return local_session("flight-select-cluster-test", cores=2, master=MASTER, config={
        "spark.executorEnv.PYTHONPATH": str(ROOT),
        "spark.executorEnv.PYSPARK_PYTHON": sys.executable,
    })


def batch_groups(spark: SparkSession, planner: str) -> dict[str, list[int]]:
    """``group -> [rows, distinct ids, sum of ids]`` of ``b/rows.csv`` read through Flight."""
    frame = (spark.read.format("flight-select").option("location", planner)
             .option("table", "b/rows.csv").load())
    groups = (frame.groupBy("_2")
              .agg(F.count("*").alias("n"), F.countDistinct("_1").alias("d"),
                   F.sum(F.col("_1").cast("long")).alias("s"))
              .collect())
    return {str(r["_2"]): [int(r["n"]), int(r["d"]), int(r["s"])] for r in groups}


def _emit(step: str, **fields: object) -> None:
    elapsed_s = round(time.monotonic() - STARTED, 1)
    print(json.dumps({"step": step, "elapsed_s": elapsed_s, **fields}), flush=True)


def main(planner: str, out: Path) -> None:
    """Run the steps the module docstring lists."""
    spark = cluster_session()
    context = spark.sparkContext
    worker_pids = context.parallelize(range(8), 8).map(lambda _: os.getpid()).distinct().collect()
    executors = context._jsc.sc().getExecutorMemoryStatus().size() - 1  # type: ignore[union-attr]
    _emit("cluster", master=context.master, executors=executors,
          worker_pids=sorted(worker_pids), driver_pid=os.getpid())
    _emit("batch", groups=batch_groups(spark, planner))
    summary = pipeline.run(planner, out, session=spark)
    _emit("pipeline", output=str(summary["output"]), rows_read=summary["rows_read"])
    sys.stdin.readline()
    _emit("batch-again", groups=batch_groups(spark, planner))
    spark.stop()


if __name__ == "__main__":
    main(sys.argv[1], Path(sys.argv[2]))
