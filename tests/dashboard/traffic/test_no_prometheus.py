"""Outside the demo, a traffic query that no Prometheus answers is unmeasured, and every cycle says why: the demo's
invented traffic never explains a real placement (``SCHEDLENS_SYNTHETIC_TRAFFIC``, off unless binds are simulated)."""

from __future__ import annotations

import msgspec
import pytest

from dashboard.traffic.sources import NO_PROMETHEUS
from scheduler_core.extender.record.spool_codec import decode_event

POD = {"metadata": {"name": "web-1", "namespace": "shop", "uid": "uid-web-1"}, "spec": {"containers": []}}
BODY = msgspec.json.encode({"Pod": POD, "Nodes": None, "NodeNames": ["node-1", "node-2"]})


@pytest.fixture
def runtime(runtime_without_traffic, settings):
    settings.PROMETHEUS_URL = ""
    settings.SCHEDLENS_SYNTHETIC_TRAFFIC = False
    runtime_without_traffic.refresher.refresh_once()
    return runtime_without_traffic


def test_without_prometheus_the_traffic_is_unmeasured_and_the_record_says_why(client, runtime) -> None:
    query = next(iter(runtime.profiles["default"].traffic_queries()))
    stored = runtime.traffic.latest(query)
    assert stored is None or not stored.bytes_by_node, "no figures, invented or not"
    assert runtime.traffic.last_errors[query] == NO_PROMETHEUS

    answer = client.post("/extender/default/prioritize", data=BODY, content_type="application/json").json()

    assert len({host["Score"] for host in answer}) == 1, "no node is preferred on traffic nobody measured"
    (row,) = runtime.spool.read_rows(10)
    scored = decode_event(row.data).prioritize
    assert scored is not None
    (traffic,) = [p for p in scored.plugins if p.name == "NetworkTraffic"]
    assert not any(traffic.raw), "no bytes recorded"
    assert NO_PROMETHEUS in traffic.note
