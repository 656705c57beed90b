"""The validation suite's ingest tests against flight-select."""

import adbc_drivers_validation.tests.ingest as suite
from flight_select import FlightSelectQuirks


def pytest_generate_tests(metafunc) -> None:  # noqa: ANN001 - pytest's hook
    return suite.generate_tests([FlightSelectQuirks()], metafunc)


class TestIngest(suite.TestIngest):
    pass
