"""The validation suite's statement tests against flight-select."""

import adbc_drivers_validation.tests.statement as suite
from flight_select import FlightSelectQuirks


def pytest_generate_tests(metafunc) -> None:  # noqa: ANN001 - pytest's hook
    return suite.generate_tests([FlightSelectQuirks()], metafunc)


class TestStatement(suite.TestStatement):
    pass
