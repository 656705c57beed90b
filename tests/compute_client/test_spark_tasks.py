"""Packing endpoints into Spark tasks: every endpoint once, in order, the tasks as even as can
be; and how many tasks a plan asks for."""

from __future__ import annotations

import pyarrow as pa
from hypothesis import given
from hypothesis import strategies as st

from compute_client.flight import Endpoint, QueryPlan
from compute_client.spark_common import EndpointPartition, task_groups
from compute_client.spark_source import spark_tasks


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


def _plan(endpoints: list[Endpoint], about: dict) -> QueryPlan:
    return QueryPlan(pa.schema([]), tuple(endpoints), -1, -1, about)


def test_tasks_are_the_server_cores_per_node_unless_asked() -> None:
    one_node = _endpoints(10)
    assert spark_tasks(_plan(one_node, {"cores": 2}), None) == 2
    assert spark_tasks(_plan(one_node, {"cores": 2}), 7) == 7
    assert spark_tasks(_plan(one_node, {}), None) is None  # a server that does not say
    assert spark_tasks(_plan(one_node, {"cores": "2"}), None) is None
    two_nodes = _endpoints(4, ("grpc://a:1",)) + _endpoints(4, ("grpc://b:1",))
    assert spark_tasks(_plan(two_nodes, {"cores": 3}), None) == 6
