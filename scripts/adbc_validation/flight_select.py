"""flight-select's quirks for the adbc-drivers/validation suite (run by scripts/adbc_validation.sh).

The suite drives the ADBC Flight SQL driver against a server given by ``FLIGHT_SELECT_URI``.
Features are what the server does: it runs only SELECT (no DDL or DML, so the suite's
``CREATE TABLE`` setups fail and are counted as such), sessions (catalog = a bucket) and bulk
ingest into the bucket ``FLIGHT_SELECT_CATALOG`` (the server runs ``--writable
--default-catalog`` with it).
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import adbc_driver_flightsql
from adbc_drivers_validation import model, quirks

CATALOG = os.environ.get("FLIGHT_SELECT_CATALOG", "lake")
DATA = Path(os.environ.get("FLIGHT_SELECT_DATA", "/nonexistent"))
"""The server's data folder: DROP TABLE is no SQL the server runs, so the harness drops a
table by removing its folder there (the script gives every run a fresh folder)."""


class FlightSelectQuirks(model.DriverQuirks):
    name = "flightselect"
    driver = "adbc_driver_flightsql"
    driver_name = "ADBC Flight SQL Driver - Go"
    vendor_name = "flight-select"
    vendor_version = "0.1.0"
    short_version = "0.1"
    features = model.DriverFeatures(
        connection_get_table_schema=True,
        connection_set_current_catalog=True,
        connection_set_current_schema=True,
        connection_transactions=False,
        get_objects=True,
        statement_bind=True,
        statement_bulk_ingest=True,
        statement_bulk_ingest_catalog=True,
        statement_bulk_ingest_schema=True,
        statement_execute_schema=True,
        statement_prepare=True,
        statement_rows_affected=True,  # an ingest answers the rows it wrote
        current_catalog=CATALOG,
        current_schema="",
    )
    setup = model.DriverSetup(
        database={
            "uri": os.environ.get("FLIGHT_SELECT_URI", "grpc://127.0.0.1:8815"),
            "adbc.flight.sql.rpc.with_cookie_middleware": "true",
        },
        connection={"adbc.connection.catalog": CATALOG},
        statement={},
    )

    @property
    def queries_paths(self) -> tuple[Path]:
        return (Path(__file__).parent / "queries",)

    def is_table_not_found(self, table_name: str | None,  # noqa: ARG002 - DriverQuirks' signature
                           error: Exception) -> bool:
        text = str(error)
        return "NoSuchKey" in text or "NoSuchTable" in text or "no object" in text

    def try_drop_table(self, cursor: object, *, table_name: str,  # noqa: ARG002 - DriverQuirks' signature
                       schema_name: str | None = None, catalog_name: str | None = None,
                       temporary: bool = False) -> None:  # noqa: ARG002 - DriverQuirks' signature
        folder = DATA / (catalog_name or CATALOG) / (schema_name or "") / table_name
        shutil.rmtree(folder, ignore_errors=True)

    def split_statement(self, statement: str) -> list[str]:
        return quirks.split_statement(statement)


def driver_path() -> str:
    """The Go driver's shared library shipped in the Python package."""
    return str(adbc_driver_flightsql._driver_path())
