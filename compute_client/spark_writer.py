"""The ``flight-select`` data source's writer: a DataFrame into a prefix table of Parquet objects.

    (df.write.format("flight-select")
       .option("location", "grpc://127.0.0.1:8815")
       .option("table", "lake/people")          # bucket/table: the prefix table lake/people/
       .mode("append")                          # or "overwrite"
       .save())

It takes the server's bulk-ingest path (``CommandStatementIngest``, as ADBC's ``adbc_ingest``;
the server runs ``--writable``), in two phases so that a job is all or nothing per task: each
task sends its rows as one *staged* ingest (the server writes the Parquet object but keeps it
out of the table) and returns the token it got; when every task succeeded Spark calls
:meth:`FlightSelectWriter.commit` on the driver, which stores every staged object
(``CommitIngest``), and when one failed, :meth:`FlightSelectWriter.abort`, which removes them
(``AbortIngest``). A task that fails before it reports its token leaves a staged file the
server removes after ``--ticket-max-age``; what a task stages after its job's abort (Spark
aborts without waiting for tasks still running) is removed at once, since the abort marks the
job on the server. ``append`` creates the table or appends to it (the
schema must equal the table's: checked by every task); ``overwrite`` replaces it: the commit
stores the new objects, then deletes the table's others. The commit stores the objects one by
one: each is atomic, so a query planned during a commit may see some tasks' objects and not
yet others'.

Options: ``location``, ``table`` (``bucket/table``) and the connection options of the reader
(``username``, ``password``, ``tls_root_certs``, ``timeout``).
"""

from __future__ import annotations

import secrets
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

import pyarrow as pa
from pyspark.sql.datasource import DataSourceArrowWriter, WriterCommitMessage
from pyspark.sql.pandas.types import to_arrow_schema
from pyspark.sql.types import StructType

from compute_client.flight import FlightSelectClient
from compute_client.spark_common import connection_options


@dataclass(frozen=True)
class StagedObjects(WriterCommitMessage):
    """What one task wrote: the staged-ingest tokens to commit or abort (none for no rows)."""

    tokens: tuple[str, ...]


class FlightSelectWriter(DataSourceArrowWriter):
    """Writes each task's batches as one staged ingest; commits or aborts them on the driver.

    Args:
        options: the data source's options (``location``, ``table``, connection options).
        schema: the DataFrame's schema.
        overwrite: Spark's ``overwrite`` mode (replace the table) rather than ``append``.
    """

    def __init__(self, options: dict[str, str], schema: StructType, overwrite: bool) -> None:
        options = {k.lower(): v for k, v in options.items()}
        table = options.get("table", "")
        bucket, _, name = table.partition("/")
        if not bucket or not name.strip("/"):
            raise ValueError("flight-select: writing needs option 'table' as bucket/table")
        self.options = options
        self.bucket, self.table = bucket, name.strip("/")
        self.schema = to_arrow_schema(schema)
        self.overwrite = overwrite
        self.job = secrets.token_hex(8)  # made on the driver, pickled into every task

    def write(self, iterator: Iterator[pa.RecordBatch]) -> StagedObjects:
        first = next(iterator, None)
        if first is None:
            return StagedObjects(())

        def batches() -> Iterator[pa.RecordBatch]:
            yield first
            yield from iterator

        mode = "replace" if self.overwrite else "create_append"
        with FlightSelectClient(connection_options(self.options)) as client:
            _, token = client.ingest(self.bucket, self.table, first.schema, batches(),
                                     mode=mode, staged_job=self.job)
        assert token is not None
        return StagedObjects((token,))

    def commit(self, messages: Sequence[WriterCommitMessage | None]) -> None:
        self._finish(messages, commit=True)

    def abort(self, messages: Sequence[WriterCommitMessage | None]) -> None:
        self._finish(messages, commit=False)

    def _finish(self, messages: Sequence[WriterCommitMessage | None], *, commit: bool) -> None:
        tokens = [t for m in messages if isinstance(m, StagedObjects) for t in m.tokens]
        if commit and not tokens:
            return
        with FlightSelectClient(connection_options(self.options)) as client:
            if commit:
                client.finish_ingest(tokens, commit=True, replace=self.overwrite)
            else:  # also what tasks still running stage after this
                client.finish_ingest(tokens, commit=False, job=self.job, bucket=self.bucket)
