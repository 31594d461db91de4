"""Wire exactness: every real kube-scheduler capture replayed, the protocol examples round-tripped."""

from __future__ import annotations

import json
from pathlib import Path

import msgspec
import pytest

from scheduler_core.extender.protocol import wire
from scheduler_core.extender.protocol.binding import SimulatedBinder
from scheduler_core.extender.protocol.cluster import StaticCluster
from scheduler_core.extender.scoring.profiles import load_profiles
from scheduler_core.extender.verbs import Extender
from tests.support.inputs import traffic_store
from tests.support.paths import CAPTURES, EXAMPLES

FILTER_KEYS = ["Nodes", "NodeNames", "FailedNodes", "FailedAndUnresolvableNodes", "Error"]
CAPTURED = sorted(p for p in CAPTURES.glob("*/*.body.json"))
# node-3 is the busiest, so the threshold fails it: like the captured extender, which failed node-3.
THRESHOLD_CONFIG = """
profiles:
- name: default
  pluginConfig:
  - {name: TrafficThreshold, args: {maxBytesPerSecond: 10000}}
"""


def extender() -> Extender:
    traffic = traffic_store({"node-1": 1.2e6, "node-2": 0.4e6, "node-3": 9.0e6})
    return Extender(load_profiles(THRESHOLD_CONFIG), cluster=StaticCluster(), traffic=traffic, binder=SimulatedBinder())


def verb_of(path: Path) -> str:
    return path.name.split("-", 1)[1].split(".", 1)[0]


class _RawList(msgspec.Struct):
    items: list[msgspec.Raw]


class _RawArgs(msgspec.Struct):
    Nodes: _RawList | None
    NodeNames: list[str] | None


def test_the_real_kube_scheduler_captures_are_all_here():
    # A missing shared/ folder must fail loudly, not parametrize the replay below into nothing.
    assert len(CAPTURED) == 15, f"expected the 15 captured request bodies under {CAPTURES}"
    assert len(list(EXAMPLES.glob("ex*.json"))) == 14


@pytest.mark.parametrize("body_path", CAPTURED, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_every_captured_request_gets_an_answer_kube_scheduler_accepts(body_path: Path):
    body = body_path.read_bytes()
    verb = verb_of(body_path)
    result = getattr(extender(), verb)("default", body)

    assert result.status == 200
    answer = json.loads(result.body)
    if verb == "bind":
        assert answer == {"Error": ""}
        return
    request = msgspec.json.decode(body, type=_RawArgs)
    input_names = request.NodeNames or [json.loads(bytes(r))["metadata"]["name"] for r in request.Nodes.items]
    if verb == "prioritize":
        assert isinstance(answer, list)
        assert [entry["Host"] for entry in answer] == input_names
        for entry in answer:
            assert list(entry) == ["Host", "Score"]
            assert type(entry["Score"]) is int
            assert 0 <= entry["Score"] <= wire.MAX_EXTENDER_PRIORITY
        assert b".0" not in result.body
        return
    assert list(answer) == FILTER_KEYS
    assert answer["Error"] == ""
    failed = {**(answer["FailedNodes"] or {}), **(answer["FailedAndUnresolvableNodes"] or {})}
    if request.NodeNames is not None:
        assert answer["Nodes"] is None, "NodeNames in, NodeNames out"
        passed = answer["NodeNames"]
    else:
        assert answer["NodeNames"] is None, "Nodes in, Nodes out"
        echoed = msgspec.json.decode(result.body, type=_RawArgs).Nodes.items
        sent = {json.loads(bytes(r))["metadata"]["name"]: bytes(r) for r in request.Nodes.items}
        passed = [json.loads(bytes(r))["metadata"]["name"] for r in echoed]
        for raw, name in zip(echoed, passed, strict=True):
            assert bytes(raw) == sent[name], "a passing node is echoed back byte for byte"
    assert set(passed) <= set(input_names), "never name a node that was not in the request"
    assert set(passed) | set(failed) == set(input_names), "every dropped node comes with a reason"
    assert "node-3" in failed
    assert "node-3" not in passed


@pytest.mark.parametrize(
    ("scenario", "mode"),
    [("A-filter-prioritize-nodecache-false", "nodes"), ("B-filter-prioritize-nodecache-true", "names")],
)
def test_the_captured_filter_is_recorded_with_its_node_mode_and_pod(scenario: str, mode: str):
    result = extender().filter("default", (CAPTURES / scenario / "001-filter.body.json").read_bytes())
    assert result.event.node_mode == mode
    assert result.event.pod_name.startswith("ext-test-")
    assert result.event.filter.nodes == ["node-1", "node-2", "node-3"]


def compact(path: Path) -> bytes:
    return json.dumps(json.loads(path.read_text()), separators=(",", ":"), ensure_ascii=False).encode()


@pytest.mark.parametrize(
    ("name", "wire_type"),
    [
        ("ex2-filter-resp.json", wire.ExtenderFilterResult),
        ("ex3-filter-resp.json", wire.ExtenderFilterResult),
        ("ex8-filter-resp-error.json", wire.ExtenderFilterResult),
        ("ex9-filter-resp-unresolvable.json", wire.ExtenderFilterResult),
        ("ex4-prioritize-resp.json", list[wire.HostPriority]),
        ("ex5-bind-req.json", wire.ExtenderBindingArgs),
        ("ex5-bind-resp-ok.json", wire.ExtenderBindingResult),
        ("ex5-bind-resp-fail.json", wire.ExtenderBindingResult),
        ("ex6-preempt-resp.json", wire.ExtenderPreemptionResult),
    ],
)
def test_protocol_examples_round_trip_byte_identically_through_our_types(name: str, wire_type: type):
    expected = compact(EXAMPLES / name)
    assert wire.encode(msgspec.json.decode(expected, type=wire_type)) == expected


@pytest.mark.parametrize("name", ["ex1-filter-req.json", "ex3-filter-req.json", "ex4-prioritize-req.json"])
def test_protocol_example_requests_decode(name: str):
    args = wire.decode_extender_args(compact(EXAMPLES / name))
    assert args.pod.metadata.name == "web-7d9f8c6b5-x2kqp"


@pytest.mark.parametrize("name", ["ex6-preempt-req.json", "ex7-preempt-req.json"])
def test_preempt_answers_only_with_victims_from_the_input(name: str):
    body = compact(EXAMPLES / name)
    config = "profiles: [{name: default, plugins: {filter: {disabled: [{name: '*'}]}}}]"
    ext = Extender(load_profiles(config), cluster=StaticCluster(), traffic=traffic_store({}), binder=SimulatedBinder())
    result = ext.preempt("default", body)

    assert result.status == 200
    answer = json.loads(result.body)
    assert list(answer) == ["NodeNameToMetaVictims"], "always the UID form, whatever the request's form"
    request = json.loads(body)
    for node, victims in answer["NodeNameToMetaVictims"].items():
        sent = (request["NodeNameToMetaVictims"] or request["NodeNameToVictims"])[node]
        sent_uids = [p.get("UID") or p["metadata"]["uid"] for p in sent["Pods"]]
        assert [p["UID"] for p in victims["Pods"]] == sent_uids
        assert victims["NumPDBViolations"] == sent["NumPDBViolations"]


def test_preempt_drops_candidate_nodes_the_profile_s_filters_reject():
    body = compact(EXAMPLES / "ex6-preempt-req.json")
    ext = Extender(
        load_profiles(THRESHOLD_CONFIG),
        cluster=StaticCluster(),
        traffic=traffic_store({"worker-a": 1.0, "worker-c": 9e9}),
        binder=SimulatedBinder(),
    )
    result = ext.preempt("default", body)
    assert list(json.loads(result.body)["NodeNameToMetaVictims"]) == ["worker-a"]
    assert result.event.preempt.dropped == {"worker-c": "TrafficThreshold: receive rate above 10.0 kB/s"}


@pytest.mark.parametrize(
    ("body", "path", "message"),
    [
        (b"", "$", "empty request body"),
        (b"   ", "$", "empty request body"),
        (
            b"not json",
            "$",
            "malformed JSON at byte 0 (line 1, column 1): unexpected character 'n' where a value was expected",
        ),
        (b'{"Pod":1,"Nodes":null,"NodeNames":[]}', "$.Pod", "expected an object, got a number"),
        (b'{"Nodes":null,"NodeNames":[]}', "$", "missing required field `Pod`"),
        (
            b'{"Pod":{},"Nodes":null,"NodeNames":null}',
            "$.NodeNames",
            "both Nodes and NodeNames are null; exactly one must be set",
        ),
        (
            b'{"Pod":{},"Nodes":{"items":[]},"NodeNames":[]}',
            "$.NodeNames",
            "both Nodes and NodeNames are set; exactly one must be non-null",
        ),
        (b'{"Pod":{},"Nodes":null,"NodeNames":[1]}', "$.NodeNames[0]", "expected a string, got a number"),
        (b'{"Pod":{},"Nodes":null,"NodeNames":["a","a"]}', "$.NodeNames[1]", "duplicate node name 'a'"),
        (b'{"Pod":{},"Nodes":null,"NodeNames":[""]}', "$.NodeNames[0]", "empty node name"),
        (
            b'{"Pod":{"metadata":{"name":NaN}},"Nodes":null,"NodeNames":[]}',
            "$",
            "malformed JSON at byte 27 (line 1, column 28): NaN is not a JSON number",
        ),
        (b'{"Pod":{"spec":{"priority":1e400}},"NodeNames":[]}', "$", ""),
        (b'{"Pod":{"metadata":{"name":"\xff"}},"NodeNames":[]}', "$", "invalid UTF-8 at byte 28 (line 1, column 29)"),
        (
            b'{"Pod":{"metadata":{"name":"\\ud800"}},"NodeNames":[]}',
            "$",
            "malformed JSON at byte 28 (line 1, column 29): unpaired UTF-16 surrogate escape \\ud800 in a string",
        ),
        (
            b"[" * 100_000 + b"]" * 100_000,
            "$",
            "JSON nested too deeply: 100000 levels of arrays and objects, "
            "the deepest opening at byte 99999 (line 1, column 100000)",
        ),
        (
            b'{"Pod":{"x":' + b"[" * 100_000 + b"]" * 100_000 + b'},"NodeNames":[]}',
            "$",
            "JSON nested too deeply: 100002 levels of arrays and objects, "
            "the deepest opening at byte 100011 (line 1, column 100012)",
        ),
        (
            b'{"Pod":{},"Nodes":{"items":[{"metadata":{"name":7}}]},"NodeNames":null}',
            "$.Nodes.items[0].metadata.name",
            "expected a string, got a number",
        ),
    ],
    ids=[
        "empty",
        "blank",
        "not-json",
        "pod-int",
        "no-pod",
        "both-null",
        "both-set",
        "name-int",
        "duplicate",
        "empty-name",
        "nan",
        "huge-number-ignored-field",
        "invalid-utf8",
        "lone-surrogate",
        "deep-array",
        "deep-inside-pod",
        "node-item-type",
    ],
)
def test_bad_filter_bodies_are_refused_with_400_naming_the_json_path(body: bytes, path: str, message: str):
    result = extender().filter("default", body)
    if message == "" and result.status == 200:
        return  # an unknown field the decoder skips may hold anything; it must simply not crash
    assert result.status == 400
    error = json.loads(result.body)
    assert error == {"error": message, "path": path}
    assert result.event.http_status == 400, "a refused call is recorded too"


def test_an_unknown_profile_is_a_404_naming_the_known_ones():
    result = extender().filter("nope", b"{}")
    assert result.status == 404
    assert json.loads(result.body)["error"] == "unknown profile 'nope' (known: default)"


def test_bind_error_text_never_carries_a_percent_sign():
    class FullBinder:
        def bind(self, **_: str):
            from scheduler_core.extender.protocol.binding import BindOutcome

            return BindOutcome(error="disk 90% full", detail="x")

    ext = Extender(load_profiles(None), cluster=StaticCluster(), traffic=traffic_store({}), binder=FullBinder())
    body = b'{"PodName":"p","PodNamespace":"n","PodUID":"u","Node":"a"}'
    assert json.loads(ext.bind("default", body).body) == {"Error": "disk 90 percent full"}
