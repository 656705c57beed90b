"""Packing endpoints into Spark tasks: every endpoint once, in order, the tasks as even as can
be; and how many tasks a plan asks for."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from compute_client.flight import Endpoint
from compute_client.spark_common import EndpointPartition, spark_tasks, task_groups
from flight_storage.protocol import PlanDescription


def _endpoints(n: int, locations: tuple[str, ...] = ()) -> list[Endpoint]:
    return [Endpoint(b"ticket-%d" % i, locations, index=i) for i in range(n)]


@given(count=st.integers(0, 40), tasks=st.one_of(st.none(), st.integers(1, 50)))
def test_groups_keep_every_endpoint_once_in_order_and_even(count: int, tasks: int | None
                                                           ) -> None:
    endpoints = _endpoints(count)
    groups = task_groups(endpoints, tasks)
    assert [e for g in groups for e in g] == endpoints
    assert all(groups)
    expected = count if tasks is None else min(count, tasks)
    assert len(groups) == expected
    if groups:
        assert max(map(len, groups)) - min(map(len, groups)) <= 1


def test_a_partition_value_round_trips_its_endpoints() -> None:
    endpoints = _endpoints(3, ("grpc://127.0.0.1:1", "grpc://127.0.0.1:2"))
    partition = EndpointPartition(EndpointPartition.value_of(endpoints), by_position=True)
    assert partition.endpoints() == endpoints


def test_tasks_are_the_server_cores_per_node_unless_asked() -> None:
    one_node = _endpoints(10)
    said = PlanDescription.from_json
    assert spark_tasks(said(b'{"cores": 2}'), one_node, None) == 2
    assert spark_tasks(said(b'{"cores": 2}'), one_node, 7) == 7
    assert spark_tasks(said(b"{}"), one_node, None) is None  # a server that does not say
    assert spark_tasks(said(b'{"cores": "2"}'), one_node, None) is None
    assert spark_tasks(said(b'{"cores": 0}'), one_node, None) is None
    two_nodes = _endpoints(4, ("grpc://a:1",)) + _endpoints(4, ("grpc://b:1",))
    assert spark_tasks(said(b'{"cores": 3}'), two_nodes, None) == 6
