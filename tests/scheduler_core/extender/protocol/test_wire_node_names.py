"""Node names are checked alike in both node modes; Go's int64 fields refuse what Go could not hold."""

from __future__ import annotations

import json

import msgspec
import pytest

from scheduler_core.extender.protocol import wire
from scheduler_core.extender.protocol.binding import SimulatedBinder
from scheduler_core.extender.protocol.cluster import StaticCluster
from scheduler_core.extender.scoring.profiles import load_profiles
from scheduler_core.extender.verbs import Extender
from tests.support.inputs import traffic_store

INT64_MAX = 2**63 - 1
INT64_MIN = -(2**63)
# ImageLocality reads the nodes' images, so full-Nodes items are decoded whole (decode_node), not only metadata.
IMAGES_CONFIG = """
profiles:
- name: default
  plugins:
    score: {enabled: [{name: ImageLocality, weight: 1}]}
"""


def extender(config: str | None = None) -> Extender:
    return Extender(load_profiles(config), cluster=StaticCluster(), traffic=traffic_store({}), binder=SimulatedBinder())


def nodes_body(*items: object) -> bytes:
    return json.dumps({"Pod": {}, "Nodes": {"metadata": {}, "items": list(items)}, "NodeNames": None}).encode()


def node(name: str | None, **metadata: object) -> dict[str, object]:
    meta = dict(metadata) if name is None else {"name": name, **metadata}
    return {"metadata": meta, "spec": {}, "status": {"images": [{"names": ["busybox"], "sizeBytes": 1}]}}


def refusal(result) -> tuple[str, str]:
    assert result.status == 400, result.body
    error = json.loads(result.body)
    assert result.event.http_status == 400, "a refused call is recorded too"
    return error["error"], error["path"]


@pytest.mark.parametrize("verb", ["filter", "prioritize"])
@pytest.mark.parametrize("config", [None, IMAGES_CONFIG], ids=["metadata-only", "whole-node"])
@pytest.mark.parametrize(
    ("items", "message", "path"),
    [
        ([node("a"), node("b"), node("c"), node("")], "empty node name", "$.Nodes.items[3].metadata.name"),
        ([node("a"), node(None, labels={"x": "y"})], "empty node name", "$.Nodes.items[1].metadata.name"),
        ([node("a"), {"spec": {}}], "empty node name", "$.Nodes.items[1].metadata.name"),
        ([node("a"), node("b"), node("a")], "duplicate node name 'a'", "$.Nodes.items[2].metadata.name"),
    ],
    ids=["empty", "missing", "no-metadata", "duplicate"],
)
def test_full_nodes_mode_refuses_empty_and_duplicate_names_like_node_names_mode(verb, config, items, message, path):
    assert refusal(getattr(extender(config), verb)("default", nodes_body(*items))) == (message, path)


def test_a_name_given_twice_in_one_node_counts_as_the_last_one_as_the_plugins_read_it():
    # msgspec keeps the last of duplicate keys; the check must see the name the plugins see, not the first one.
    body = nodes_body(node("a"), node("b")).replace(b'"name": "b"', b'"name": "b", "name": "a"')
    assert refusal(extender().filter("default", body)) == ("duplicate node name 'a'", "$.Nodes.items[1].metadata.name")


def test_distinct_full_nodes_still_pass_and_are_echoed():
    result = extender().filter("default", nodes_body(node("a"), node("b")))
    assert result.status == 200
    assert [item["metadata"]["name"] for item in json.loads(result.body)["Nodes"]["items"]] == ["a", "b"]


@pytest.mark.parametrize(
    ("names", "message", "path"),
    [
        (["a", "b", "a"], "duplicate node name 'a'", "$.NodeNames[2]"),
        (["a", ""], "empty node name", "$.NodeNames[1]"),
    ],
)
def test_node_names_mode_keeps_refusing_empty_and_duplicate_names(names, message, path):
    body = json.dumps({"Pod": {}, "Nodes": None, "NodeNames": names}).encode()
    assert refusal(extender().filter("default", body)) == (message, path)


@pytest.mark.parametrize("config", [None, IMAGES_CONFIG], ids=["metadata-only", "whole-node"])
@pytest.mark.parametrize("verb", ["filter", "prioritize"])
def test_invalid_utf8_in_a_full_node_s_name_is_a_400_naming_the_item(verb, config):
    body = b'{"Pod":{},"Nodes":{"metadata":{},"items":[{"metadata":{"name":"ok"}},{"metadata":{"name":"\xff"}}]},'
    body += b'"NodeNames":null}'
    assert refusal(getattr(extender(config), verb)("default", body)) == (
        "invalid UTF-8 at byte 21 of the node",
        "$.Nodes.items[1]",
    )


def test_the_shared_check_names_the_first_bad_entry_through_the_given_path():
    with pytest.raises(wire.WireError) as caught:
        wire.check_node_names(["x", "y", "y", ""], "$.Somewhere[{}]".format)
    assert (caught.value.message, caught.value.path) == ("duplicate node name 'y'", "$.Somewhere[2]")
    wire.check_node_names(["x", "y"], "$.Somewhere[{}]".format)  # nothing to refuse


# --- int64 ---------------------------------------------------------------------------------------------------


def preempt_body(field: str, count: str) -> bytes:
    pods = '[{"UID":"u1"}]' if field == "NodeNameToMetaVictims" else '[{"metadata":{"uid":"u1"}}]'
    other = "NodeNameToVictims" if field == "NodeNameToMetaVictims" else "NodeNameToMetaVictims"
    victims = {
        "node-1": f'{{"Pods":{pods},"NumPDBViolations":0}}',
        "node-2": f'{{"Pods":{pods},"NumPDBViolations":{count}}}',
    }
    mapping = "{" + ",".join(f'"{node}":{value}' for node, value in victims.items()) + "}"
    return f'{{"Pod":{{}},"{field}":{mapping},"{other}":null}}'.encode()


NO_FILTERS = "profiles: [{name: default, plugins: {filter: {disabled: [{name: '*'}]}}}]"


@pytest.mark.parametrize("field", ["NodeNameToMetaVictims", "NodeNameToVictims"])
@pytest.mark.parametrize("count", [str(INT64_MAX + 1), str(INT64_MIN - 1), "1" + "0" * 400, str(2**64)])
def test_num_pdb_violations_beyond_int64_is_a_400_naming_the_node(field, count):
    assert refusal(extender(NO_FILTERS).preempt("default", preempt_body(field, count))) == (
        "NumPDBViolations out of int64 range",
        f"$.{field}.node-2.NumPDBViolations",
    )


@pytest.mark.parametrize("field", ["NodeNameToMetaVictims", "NodeNameToVictims"])
@pytest.mark.parametrize("count", [INT64_MAX, INT64_MIN, 3])
def test_num_pdb_violations_within_int64_is_echoed_unchanged(field, count):
    result = extender(NO_FILTERS).preempt("default", preempt_body(field, str(count)))
    assert result.status == 200
    answered = json.loads(result.body)["NodeNameToMetaVictims"]["node-2"]
    assert answered == {"Pods": [{"UID": "u1"}], "NumPDBViolations": count}


@pytest.mark.parametrize("size", [INT64_MAX + 1, INT64_MIN - 1])
def test_an_image_size_beyond_int64_is_a_400_at_its_path(size):
    item = node("a")
    item["status"] = {"images": [{"names": ["busybox"], "sizeBytes": 1}, {"names": ["x"], "sizeBytes": size}]}
    assert refusal(extender(IMAGES_CONFIG).prioritize("default", nodes_body(item))) == (
        f"expected an integer from {INT64_MIN} to {INT64_MAX}, got {size}",
        "$.Nodes.items[0].status.images[1].sizeBytes",
    )


def test_an_image_size_at_the_int64_bounds_is_accepted():
    item = node("a")
    item["status"] = {"images": [{"names": ["x"], "sizeBytes": INT64_MAX}, {"names": ["y"], "sizeBytes": INT64_MIN}]}
    assert extender(IMAGES_CONFIG).prioritize("default", nodes_body(item)).status == 200


def test_a_score_beyond_int64_does_not_decode_as_go_would_refuse_it():
    # kube-scheduler decodes HostPriority.Score as int64: our type holds the same bound.
    decoder = msgspec.json.Decoder(list[wire.HostPriority])
    assert decoder.decode(f'[{{"Host":"a","Score":{INT64_MAX}}}]'.encode())[0].score == INT64_MAX
    with pytest.raises(msgspec.ValidationError, match=r"\$\[0\]\.Score"):
        decoder.decode(f'[{{"Host":"a","Score":{INT64_MAX + 1}}}]'.encode())
