"""``schedlens_answer_ties_total``: prioritize answers where rounding to 0..10 erased our preference, counted by the
web process that answered.

Traffic as in ``tests/dashboard/api/test_answer_tie.py``, on the ``fixed`` scale (``spread`` keeps 10 for the best node,
so it never ties a node that scored less): node-1 is busy (final 0); 1.12 and 1.16 MB give finals 72 and 71, both
answered 7; 1.0 and 2.0 MB give 75 and 50, answered 8 and 5.
"""

from __future__ import annotations

import dataclasses
import uuid

import msgspec
import pytest
from prometheus_client.parser import text_string_to_metric_families

from tests.support.inputs import traffic_store

JSON = "application/json"
TIED = {"node-1": 4.0e6, "node-2": 1.12e6, "node-3": 1.16e6}
UNTIED = {"node-1": 4.0e6, "node-2": 1.0e6, "node-3": 2.0e6}


def ties(client) -> float:
    response = client.get("/metrics")
    assert response.status_code == 200
    for family in text_string_to_metric_families(response.content.decode()):
        for sample in family.samples:
            if sample.name == "schedlens_answer_ties_total" and sample.labels == {"profile": "default"}:
                return sample.value
    return 0.0


def prioritize(client, runtime, traffic: dict[str, float]) -> dict[str, int]:
    query = next(iter(runtime.profiles["default"].traffic_queries()))
    runtime.traffic.put(traffic_store(traffic, query=query).latest(query))
    pod = {"metadata": {"name": "web-1", "namespace": "shop", "uid": str(uuid.uuid4())}, "spec": {"containers": []}}
    body = msgspec.json.encode({"Pod": pod, "Nodes": None, "NodeNames": list(traffic)})
    response = client.post("/extender/default/prioritize", data=body, content_type=JSON)
    assert response.status_code == 200, response.content
    return {host["Host"]: host["Score"] for host in response.json()}


@pytest.mark.parametrize(("traffic", "counted"), [(TIED, 1), (UNTIED, 0)], ids=["tied", "untied"])
def test_a_prioritize_answer_that_ties_our_preferred_node_is_counted_once(client, runtime, traffic, counted):
    runtime.profiles["default"] = dataclasses.replace(runtime.profiles["default"], answer_scale="fixed")
    before = ties(client)
    answered = prioritize(client, runtime, traffic)
    assert (answered["node-2"] == answered["node-3"]) is bool(counted), answered  # the premise, on the wire
    assert ties(client) == before + counted
    client.post(
        "/extender/default/filter", data=msgspec.json.encode({"Pod": {}, "NodeNames": ["node-1"]}), content_type=JSON
    )
    assert ties(client) == before + counted, "only prioritize answers are counted"
