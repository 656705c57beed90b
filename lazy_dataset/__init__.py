"""A ``pyarrow.dataset.Dataset`` that DataFusion reads lazily, fragment by fragment.

Shared by the server's readers (:mod:`flight_storage.execution.streaming_dataset`) and the
DataFusion client's remote tables (:mod:`compute_client.datafusion_table.dataset`); it depends
on pyarrow alone.
"""

from lazy_dataset.dataset import Columns, LazyDataset, ScanFunction, Scanner, project

__all__ = ["Columns", "LazyDataset", "ScanFunction", "Scanner", "project"]
