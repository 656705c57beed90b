"""One driver per input format (DataFusion's ``FileFormat`` seam): how a statement over CSV,
JSON or Parquet is translated, cut into partitions, handed to DataFusion's own reader where
that reads exactly as S3 Select does, and read by the reference readers otherwise. The engine
above (``execution/engine.py``) caches and dispatches through :data:`DRIVERS`; it never
branches on the format.
"""

from __future__ import annotations

from flight_storage.execution.drivers.base import FormatDriver
from flight_storage.execution.drivers.csv_format import CsvDriver
from flight_storage.execution.drivers.json_format import JsonDriver
from flight_storage.execution.drivers.parquet_format import ParquetDriver

DRIVERS: dict[str, FormatDriver] = {
    "csv": CsvDriver(),
    "json": JsonDriver(),
    "parquet": ParquetDriver(),
}
"""The driver of each ``InputSpec.format``."""

__all__ = ["DRIVERS", "FormatDriver"]
