"""Which clients read every endpoint of a FlightInfo, and so may get one endpoint per partition.

A Flight SQL client that redeems only ``info.endpoints[0]`` (flightsql-dbapi 0.2, or pyarrow's
``FlightClient`` used the obvious way: ``client.do_get(info.endpoints[0].ticket).read_all()``)
would silently get a fraction of a result split into several endpoints. So a statement's
FlightInfo has **one endpoint carrying the whole answer** unless the call shows that its client
reads every endpoint:

1. the call header ``x-flight-select-endpoints`` decides when present: ``partitioned`` (one
   endpoint per partition; our own client, hence the DataFusion client and both Spark sources,
   sends it) or ``single``;
2. otherwise the ``user-agent`` of a client in :data:`EVERY_ENDPOINT_READERS` gets partitions;
3. any other client gets one endpoint.

A client that gets one endpoint per partition may also ask for more of them than the data
justifies (``x-flight-select-parallelism: N``, :func:`wanted_parallelism`: Spark with many
executors); the engine then cuts the object into up to N ranges
(``SelectEngine.range_count``). A single endpoint ignores it.

A client missing from the table loses speed, never rows. Hand-written: choosing endpoints per
client is this project's rule; the table is data so that a new client is one record.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Final

from flight_storage.errors import InvalidRequestError
from flight_storage.protocol import (
    ENDPOINTS_HEADER,
    ENDPOINTS_PARTITIONED,
    ENDPOINTS_SINGLE,
    PARALLELISM_HEADER,
)

_VALUES: Final = (ENDPOINTS_SINGLE, ENDPOINTS_PARTITIONED)


@dataclass(frozen=True)
class EveryEndpointReader:
    """A client known to read every endpoint, recognised by how its user agent starts."""

    name: str
    user_agent_prefix: str
    evidence: str
    """Why we believe it reads every endpoint, and where its user agent was seen."""


EVERY_ENDPOINT_READERS: Final[tuple[EveryEndpointReader, ...]] = (
    EveryEndpointReader(
        name="ADBC Flight SQL driver",
        user_agent_prefix="ADBC Flight SQL Driver ",
        evidence=(
            "observed: adbc-driver-flightsql 1.13.0 (Python) sends 'ADBC Flight SQL Driver "
            "(unknown or development build) grpc-go/1.84.0'; the Go driver sets it with "
            "grpc.WithUserAgent (apache/arrow-adbc go/adbc/driver/flightsql), so every binding "
            "of it (C, Python, R, Go, Java JNI) sends it. cursor.execute reads every endpoint "
            "in parallel (tests/flight_storage/test_foreign_clients.py)."
        ),
    ),
    EveryEndpointReader(
        name="Arrow Flight SQL JDBC driver",
        user_agent_prefix="JDBC Flight SQL Driver ",
        evidence=(
            "documented in its source, not observed (the driver cannot be installed here): "
            "apache/arrow-java flight/flight-sql-jdbc-core ArrowFlightSqlClientHandler.Builder "
            "sets the user agent 'JDBC Flight SQL Driver %s' (grpc-java appends its own), and "
            "getStreams opens a stream for every endpoint of the FlightInfo."
        ),
    ),
)
"""Clients that read every endpoint without being told (see the module docstring)."""


@dataclass(frozen=True)
class EndpointChoice:
    """How a call's statements are split into endpoints, and why (for the call log)."""

    single: bool
    reason: str
    parallelism: int | None = None
    """The endpoints the client asked for (:func:`wanted_parallelism`); None for a single
    endpoint, or when it asked for none."""


def choose_endpoints(headers: Mapping[str, Sequence[str]]) -> EndpointChoice:
    """One endpoint or one per partition for a call with ``headers`` (lower-case names).

    Raises:
        InvalidRequestError: the endpoints header names neither ``single`` nor ``partitioned``,
            or the parallelism header is not a whole number >= 1.

    Example:
        >>> choose_endpoints({"user-agent": ["grpc-c++/1.81.1"]})
        EndpointChoice(single=True, reason='not known to read every endpoint', parallelism=None)
        >>> choose_endpoints({"user-agent": ["ADBC Flight SQL Driver v1.13.0 grpc-go/1.84.0"]})
        EndpointChoice(single=False, reason='ADBC Flight SQL driver', parallelism=None)
        >>> choose_endpoints({ENDPOINTS_HEADER: ["partitioned"], PARALLELISM_HEADER: ["8"]})
        EndpointChoice(single=False, reason='x-flight-select-endpoints: partitioned', parallelism=8)
    """
    wanted = wanted_parallelism(headers)
    named = headers.get(ENDPOINTS_HEADER)
    if named:
        value = named[0].strip().lower()
        if value not in _VALUES:
            raise InvalidRequestError(
                f"unknown value {value!r} in {ENDPOINTS_HEADER}; use single or partitioned")
        single = value == ENDPOINTS_SINGLE
        return EndpointChoice(single=single, reason=f"{ENDPOINTS_HEADER}: {value}",
                              parallelism=None if single else wanted)
    agent = (headers.get("user-agent") or [""])[0]
    for reader in EVERY_ENDPOINT_READERS:
        if agent.startswith(reader.user_agent_prefix):
            return EndpointChoice(single=False, reason=reader.name, parallelism=wanted)
    return EndpointChoice(single=True, reason="not known to read every endpoint")


def wanted_parallelism(headers: Mapping[str, Sequence[str]]) -> int | None:
    """The endpoints ``x-flight-select-parallelism`` asks for (None: the header is absent).

    Raises:
        InvalidRequestError: the value is not a whole number >= 1 (the message names the
            header).

    Example:
        >>> wanted_parallelism({PARALLELISM_HEADER: ["8"]})
        8
        >>> wanted_parallelism({}) is None
        True
    """
    named = headers.get(PARALLELISM_HEADER)
    if not named:
        return None
    text = named[0].strip()
    value = 0
    if text.isascii() and text.isdigit():  # digits only: no sign, no "1e3", no "2.5"
        value = int(text) if len(text) <= 18 else 10**18  # over any cap; int() stays cheap
    if value < 1:
        raise InvalidRequestError(
            f"{PARALLELISM_HEADER} must be a whole number >= 1 (the endpoints wanted), "
            f"not {named[0]!r}")
    return value
