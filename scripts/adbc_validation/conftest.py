"""pytest wiring of the validation suite for flight-select (see flight_select.py)."""

from __future__ import annotations

import adbc_drivers_validation.model
import adbc_drivers_validation.tests.conftest
import pytest
from adbc_drivers_validation.tests.conftest import (  # noqa: F401 - fixtures
    conn,
    conn_factory,
    db_kwargs,
    manual_test,
    noci,
    pytest_collection_modifyitems,
)
from flight_select import FlightSelectQuirks
from flight_select import driver_path as _driver_path


def pytest_addoption(parser: pytest.Parser) -> None:
    adbc_drivers_validation.tests.conftest.pytest_addoption(parser)


@pytest.fixture(scope="session")
def driver() -> adbc_drivers_validation.model.DriverQuirks:
    return FlightSelectQuirks()


@pytest.fixture(scope="session")
def driver_path(driver: adbc_drivers_validation.model.DriverQuirks) -> str:  # noqa: ARG001 - the suite's fixture depends on the driver
    return _driver_path()
