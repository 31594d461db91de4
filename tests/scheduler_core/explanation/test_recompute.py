"""scheduler_core.explanation.recompute: an auditor's check finds every figure of an explanation that does not
follow."""

from __future__ import annotations

import copy
import time
from typing import Any

import msgspec
import pytest

from scheduler_core.explanation.explain import explain
from scheduler_core.explanation.recompute import recompute_explanation
from scheduler_core.extender.protocol.binding import SimulatedBinder
from scheduler_core.extender.protocol.cluster import StaticCluster
from scheduler_core.extender.protocol.wire import encode
from scheduler_core.extender.scoring.herd import InMemoryBindLog
from scheduler_core.extender.scoring.profiles import load_profiles
from scheduler_core.extender.verbs import Extender
from tests.support.inputs import Inputs, traffic_store

MB = 1_000_000.0
POD = {"metadata": {"name": "web-1", "namespace": "shop", "uid": "uid-1"}, "spec": {"containers": []}}
TRAFFIC = {"n1": 1 * MB, "n2": 180 * MB, "n3": 400 * MB, "n4": 35 * MB, "n5": 36 * MB}


def served(scale: str, *, weight: str = "") -> dict[str, Any]:
    """A real cycle's explanation as the audit API serves it: herd bytes on two nodes, 5 candidates."""
    now = time.time()
    config = f"""
profiles:
- name: default
  answer: {{scale: {scale}{weight}}}
  pluginConfig:
  - {{name: NetworkTraffic, args: {{assumedBytesPerPod: 100000000}}}}
"""
    inputs = Inputs(traffic_store(TRAFFIC), InMemoryBindLog(15.0, default_decay_seconds=15.0))
    inputs.binds.record_bind(node="n1", pod="a", at=now - 3.0)
    inputs.binds.record_bind(node="n4", pod="b", at=now - 1.0)
    ext = Extender(
        load_profiles(config),
        cluster=StaticCluster(),
        traffic=traffic_store(TRAFFIC),
        binder=SimulatedBinder(),
        clock=lambda: now,
        inputs=inputs,
    )
    body = encode({"Pod": POD, "Nodes": None, "NodeNames": list(TRAFFIC)})
    record = ext.prioritize("default", body).event.prioritize
    explanation = explain(filter_record=None, prioritize_record=record, chosen_node="n1")
    return msgspec.json.decode(msgspec.json.encode(explanation))


@pytest.mark.parametrize("scale", ["fixed", "spread"])
def test_a_real_cycles_explanation_adds_up(scale):
    explanation = served(scale, weight=", extenderWeight: 5")
    assert any(t["traffic"]["herd_bytes"] for n in explanation["nodes"] for t in n["terms"])
    assert recompute_explanation(explanation) == []


def node(explanation: dict[str, Any], name: str) -> dict[str, Any]:
    return next(n for n in explanation["nodes"] if n["node"] == name)


def test_assumed_bytes_left_out_of_the_figures_are_found():
    explanation = served("spread")
    tampered = copy.deepcopy(explanation)
    node(tampered, "n1")["terms"][0]["traffic"]["herd_bytes"] = 0.0
    found = {(m.node, m.what) for m in recompute_explanation(tampered)}
    assert ("n1", "NetworkTraffic estimate_bytes") in found
    assert ("n1", "NetworkTraffic score") in found


def test_an_answer_that_does_not_follow_from_the_final_score_is_found():
    explanation = served("fixed")
    tampered = copy.deepcopy(explanation)
    node(tampered, "n2")["extender_score"] += 1
    [mismatch] = recompute_explanation(tampered)
    assert (mismatch.node, mismatch.what) == ("n2", "answer")
    assert str(mismatch) == f"n2: answer shown as {mismatch.shown!r}, recomputed as {mismatch.recomputed!r}"


def test_a_final_score_that_is_not_the_weighted_mean_of_its_terms_is_found():
    tampered = copy.deepcopy(served("spread"))
    node(tampered, "n3")["final_score"] += 0.01
    assert ("n3", "final score") in {(m.node, m.what) for m in recompute_explanation(tampered)}


def test_a_claimed_tie_that_is_not_one_is_found():
    tampered = copy.deepcopy(served("spread"))
    tampered["answer_tie"] = True
    assert [(m.node, m.what) for m in recompute_explanation(tampered)] == [("", "answer_tie")]
