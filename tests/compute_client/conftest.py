"""One local Spark session for every Spark test."""

from __future__ import annotations

from collections.abc import Iterator

import pytest


@pytest.fixture(scope="session")
def spark() -> Iterator[object]:
    from compute_client.spark_source import local_session

    session = local_session("flight-select-tests")
    yield session
    session.stop()
