"""Every verb's 400 is written by schedlens: the exact text and JSON path for each kind of malformed body.

Nothing here reads a dependency's wording: the texts are schedlens's
(``scheduler_core.extender.protocol.decode_errors``), made of facts (a byte offset, a JSON path, the expected type from
our own types), so a new msgspec cannot change them.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Callable
from typing import Any

import pytest

from scheduler_core.extender.protocol import wire
from scheduler_core.extender.protocol.binding import SimulatedBinder
from scheduler_core.extender.protocol.cluster import StaticCluster
from scheduler_core.extender.scoring.profiles import load_profiles
from scheduler_core.extender.verbs import Extender
from tests.support.inputs import traffic_store

# ImageLocality reads the nodes' images: a prioritize in full-Nodes mode decodes each node whole (decode_node), a
# filter only its metadata (decode_node_meta); both are covered.
CONFIG = """
profiles:
- name: default
  plugins:
    score: {enabled: [{name: ImageLocality, weight: 1}]}
"""
POD = {"metadata": {"name": "web-1", "namespace": "shop", "uid": "uid-1"}}
INT64_MAX = 2**63 - 1


def node(name: str) -> dict[str, Any]:
    return {"metadata": {"name": name}, "status": {"images": [{"names": ["busybox"], "sizeBytes": 1}]}}


def names_args() -> dict[str, Any]:
    return {"Pod": copy.deepcopy(POD), "Nodes": None, "NodeNames": ["node-1", "node-2"]}


def nodes_args() -> dict[str, Any]:
    return {
        "Pod": copy.deepcopy(POD),
        "Nodes": {"metadata": {}, "items": [node("node-1"), node("node-2")]},
        "NodeNames": None,
    }


def bind_args() -> dict[str, Any]:
    return {"PodName": "web-1", "PodNamespace": "shop", "PodUID": "uid-1", "Node": "node-1"}


def preempt_args() -> dict[str, Any]:
    victims = {"node-1": {"Pods": [{"UID": "victim-1"}], "NumPDBViolations": 0}}
    return {"Pod": copy.deepcopy(POD), "NodeNameToVictims": None, "NodeNameToMetaVictims": victims}


VERBS: dict[str, tuple[str, Callable[[], dict[str, Any]]]] = {
    "filter-names": ("filter", names_args),
    "filter-nodes": ("filter", nodes_args),
    "prioritize-names": ("prioritize", names_args),
    "prioritize-nodes": ("prioritize", nodes_args),
    "bind": ("bind", bind_args),
    "preempt": ("preempt", preempt_args),
}


def compact(document: object) -> bytes:
    return json.dumps(document, separators=(",", ":")).encode()


def refusal(call: str, body: bytes) -> tuple[str, str]:
    verb = VERBS[call][0]
    ext = Extender(load_profiles(CONFIG), cluster=StaticCluster(), traffic=traffic_store({}), binder=SimulatedBinder())
    result = getattr(ext, verb)("default", body)
    assert result.status == 400, result.body
    answer = json.loads(result.body)
    assert (result.event.error, result.event.error_path) == (answer["error"], answer["path"]), "recorded as answered"
    assert list(answer) == ["error", "path"]
    return answer["error"], answer["path"]


def at(offset: int) -> str:
    """Where a problem is in a one-line body."""
    return f"byte {offset} (line 1, column {offset + 1})"


def test_every_verb_is_covered():
    assert sorted({verb for verb, _ in VERBS.values()}) == ["bind", "filter", "preempt", "prioritize"]


# --- bodies that are not JSON: the same texts for every verb ----------------------------------------------------


@pytest.mark.parametrize("call", VERBS)
def test_an_empty_body(call):
    assert refusal(call, b"") == ("empty request body", "$")
    assert refusal(call, b" \r\n\t") == ("empty request body", "$")


@pytest.mark.parametrize("call", VERBS)
def test_a_body_that_is_not_json(call):
    assert refusal(call, b"not json") == (
        "malformed JSON at byte 0 (line 1, column 1): unexpected character 'n' where a value was expected",
        "$",
    )


@pytest.mark.parametrize("call", VERBS)
def test_a_truncated_body(call):
    body = compact(VERBS[call][1]())[:-1]
    assert refusal(call, body) == (f"truncated JSON: it ends at byte {len(body)}, inside an unfinished object", "$")


@pytest.mark.parametrize("call", VERBS)
def test_a_body_cut_inside_a_string(call):
    body = compact(VERBS[call][1]())
    body = body[: body.index(b"web-1") + 2]
    assert refusal(call, body) == (f"truncated JSON: it ends at byte {len(body)}, inside an unfinished string", "$")


@pytest.mark.parametrize("call", VERBS)
def test_trailing_data_after_the_body(call):
    body = compact(VERBS[call][1]())
    assert refusal(call, body + b" x") == (f"trailing data after the JSON value at {at(len(body) + 1)}", "$")


@pytest.mark.parametrize("call", VERBS)
def test_invalid_utf8_outside_a_string(call):
    body = compact(VERBS[call][1]())
    assert refusal(call, body[:1] + b"\xff" + body[1:]) == (f"invalid UTF-8 at {at(1)}", "$")


@pytest.mark.parametrize("call", VERBS)
def test_invalid_utf8_inside_a_string_the_verb_reads(call):
    body = compact(VERBS[call][1]()).replace(b'"web-1"', b'"web-\xff"')
    assert refusal(call, body) == (f"invalid UTF-8 at {at(body.index(b'web-') + 4)}", "$")


@pytest.mark.parametrize("call", VERBS)
def test_json_nested_too_deeply(call):
    body = b'{"x":' + b"[" * 100_000 + b"]" * 100_000 + b"," + compact(VERBS[call][1]())[1:]
    expected = f"JSON nested too deeply: 100001 levels of arrays and objects, the deepest opening at {at(100_004)}"
    assert refusal(call, body) == (expected, "$")


@pytest.mark.parametrize("call", VERBS)
@pytest.mark.parametrize(
    ("replaced", "by", "what"),
    [
        (b'"web-1"', b"NaN", "NaN is not a JSON number"),
        (b'"web-1"', b"-Infinity", "-Infinity is not a JSON number"),
        (b'"web-1"', b'"web-\\ud800"', "unpaired UTF-16 surrogate escape \\ud800 in a string"),
        (b'"web-1"', b'"web-\x01"', "control character U+0001 in a string (it must be written as an escape)"),
        (b'"web-1"', b'"web-\\q"', "invalid escape \\q in a string"),
        (b'"web-1"', b'"web-1",', "unexpected character '\"' where ',' or '}' was expected"),
        (b'"web-1"', b"'web-1'", "unexpected character ''' where a value was expected"),
    ],
    ids=["nan", "infinity", "lone-surrogate", "control-character", "bad-escape", "missing-comma", "single-quotes"],
)
def test_malformed_json_names_the_byte_and_what_is_wrong_there(call, replaced, by, what):
    body = compact(VERBS[call][1]())
    if by.endswith(b","):  # a member too many: the comma's place is where a key comes instead
        body = body.replace(b'"web-1",', b'"web-1" "extra":1,', 1)
        offset = body.index(b' "extra"') + 1
    else:
        offset = body.index(replaced)
        body = body.replace(replaced, by, 1)
        offset += {b'"web-\\ud800"': 5, b'"web-\x01"': 5, b'"web-\\q"': 5}.get(by, 0)
    assert refusal(call, body) == (f"malformed JSON at {at(offset)}: {what}", "$")


def test_line_and_column_count_characters_on_their_line():
    body = b'{"NodeNames":["a"],\n "Pod": {"metadata": {"name": "\xc3\xa9t\xc3\xa9" 1}}}'
    assert refusal("filter-names", body) == (
        "malformed JSON at byte 58 (line 2, column 37): unexpected character '1' where ',' or '}' was expected",
        "$",
    )


# --- well-formed JSON whose values do not fit ------------------------------------------------------------------


def change(call: str, edit: Callable[[dict[str, Any]], object]) -> bytes:
    document = VERBS[call][1]()
    edit(document)
    return compact(document)


def setitem(path: tuple[str | int, ...], value: object) -> Callable[[Any], None]:
    def edit(document: Any) -> None:
        for key in path[:-1]:
            document = document[key]
        document[path[-1]] = value

    return edit


def delitem(key: str) -> Callable[[dict[str, Any]], object]:
    return lambda document: document.pop(key)


TYPE_CASES = [
    # (verb, edit, message, path)
    ("filter-names", setitem(("NodeNames", 1), 7), "expected a string, got a number", "$.NodeNames[1]"),
    ("filter-names", setitem(("NodeNames",), "node-1"), "expected an array or null, got a string", "$.NodeNames"),
    ("filter-nodes", setitem(("Nodes", "items"), "x"), "expected an array or null, got a string", "$.Nodes.items"),
    ("filter-nodes", setitem(("Nodes",), []), "expected an object or null, got an array", "$.Nodes"),
    (
        "prioritize-names",
        setitem(("Pod", "metadata", "labels"), []),
        "expected an object or null, got an array",
        "$.Pod.metadata.labels",
    ),
    (
        "prioritize-nodes",
        setitem(("Pod", "metadata", "labels"), {"app": 1}),
        "expected a string, got a number",
        "$.Pod.metadata.labels.app",
    ),
    ("bind", setitem(("PodUID",), 1), "expected a string, got a number", "$.PodUID"),
    ("bind", setitem(("Node",), True), "expected a string, got a boolean", "$.Node"),
    (
        "preempt",
        setitem(("NodeNameToMetaVictims", "node-1", "Pods"), {}),
        "expected an array, got an object",
        "$.NodeNameToMetaVictims.node-1.Pods",
    ),
    (
        "preempt",
        setitem(("NodeNameToMetaVictims", "node-1", "Pods", 0, "UID"), 5),
        "expected a string, got a number",
        "$.NodeNameToMetaVictims.node-1.Pods[0].UID",
    ),
]
MISSING_CASES = [
    ("filter-names", delitem("Pod"), "missing required field `Pod`", "$"),
    ("filter-nodes", delitem("Pod"), "missing required field `Pod`", "$"),
    ("prioritize-names", delitem("Pod"), "missing required field `Pod`", "$"),
    ("prioritize-nodes", delitem("Pod"), "missing required field `Pod`", "$"),
    ("bind", delitem("PodUID"), "missing required field `PodUID`", "$"),
    ("preempt", delitem("Pod"), "missing required field `Pod`", "$"),
    (
        "preempt",
        lambda d: d["NodeNameToMetaVictims"]["node-1"].pop("Pods"),
        "missing required field `Pods`",
        "$.NodeNameToMetaVictims.node-1",
    ),
    (
        "preempt",
        setitem(("NodeNameToMetaVictims", "node-1", "Pods", 0), {}),
        "missing required field `UID`",
        "$.NodeNameToMetaVictims.node-1.Pods[0]",
    ),
]
NULL_CASES = [
    ("filter-names", setitem(("Pod",), None), "expected an object, got null", "$.Pod"),
    ("filter-nodes", setitem(("Pod",), None), "expected an object, got null", "$.Pod"),
    ("prioritize-names", setitem(("Pod", "metadata"), None), "expected an object, got null", "$.Pod.metadata"),
    ("prioritize-nodes", setitem(("Pod",), None), "expected an object, got null", "$.Pod"),
    ("preempt", setitem(("Pod",), None), "expected an object, got null", "$.Pod"),
    (
        "preempt",
        setitem(("NodeNameToMetaVictims", "node-1", "Pods", 0), None),
        "expected an object, got null",
        "$.NodeNameToMetaVictims.node-1.Pods[0]",
    ),
]
RANGE_CASES = [
    ("prioritize-nodes", setitem(("Nodes", "items", 1, "status", "images", 0, "sizeBytes"), INT64_MAX + 1),
     f"expected an integer from -9223372036854775808 to 9223372036854775807, got {INT64_MAX + 1}",
     "$.Nodes.items[1].status.images[0].sizeBytes"),
    ("prioritize-nodes", setitem(("Nodes", "items", 0, "status", "images", 0, "sizeBytes"), 1.5),
     "expected an integer from -9223372036854775808 to 9223372036854775807, got 1.5",
     "$.Nodes.items[0].status.images[0].sizeBytes"),
    ("preempt", setitem(("NodeNameToMetaVictims", "node-1", "NumPDBViolations"), INT64_MAX + 1),
     "NumPDBViolations out of int64 range", "$.NodeNameToMetaVictims.node-1.NumPDBViolations"),
    ("preempt", setitem(("NodeNameToMetaVictims", "node-1", "NumPDBViolations"), 2.5),
     "expected an integer, got 2.5", "$.NodeNameToMetaVictims.node-1.NumPDBViolations"),
]  # fmt: skip


@pytest.mark.parametrize(
    ("call", "edit", "message", "path"),
    TYPE_CASES + MISSING_CASES + NULL_CASES + RANGE_CASES,
    ids=[f"{c[0]}-{c[3]}-{kind}" for kind, cases in (("type", TYPE_CASES), ("missing", MISSING_CASES),
         ("null", NULL_CASES), ("range", RANGE_CASES)) for c in cases],
)  # fmt: skip
def test_a_value_that_does_not_fit_is_named_at_its_path(call, edit, message, path):
    assert refusal(call, change(call, edit)) == (message, path)


def test_a_whole_body_of_null_or_an_array():
    assert refusal("bind", b"null") == ("expected an object, got null", "$")
    assert refusal("filter-names", b"[]") == ("expected an object, got an array", "$")
    assert refusal("preempt", b'"x"') == ("expected an object, got a string", "$")


def test_the_first_of_two_bad_map_entries_is_named_by_its_key():
    document = preempt_args()
    document["NodeNameToMetaVictims"] = {
        "node-1": {"Pods": [{"UID": "ok"}], "NumPDBViolations": 0},
        "node-2": {"Pods": [{"UID": 2}], "NumPDBViolations": 0},
        "node-3": {"Pods": "no", "NumPDBViolations": 0},
    }
    assert refusal("preempt", compact(document)) == (
        "expected a string, got a number",
        "$.NodeNameToMetaVictims.node-2.Pods[0].UID",
    )


# --- a bad node in full-Nodes mode -------------------------------------------------------------------------------


@pytest.mark.parametrize("call", ["filter-nodes", "prioritize-nodes"])
@pytest.mark.parametrize(
    ("item", "message", "path"),
    [
        (7, "expected an object, got a number", "$.Nodes.items[1]"),
        (None, "expected an object, got null", "$.Nodes.items[1]"),
        ({"metadata": {"name": 7}}, "expected a string, got a number", "$.Nodes.items[1].metadata.name"),
        ({"metadata": []}, "expected an object, got an array", "$.Nodes.items[1].metadata"),
        ({"metadata": {"name": "b", "labels": {"x": None}}}, "expected a string, got null",
         "$.Nodes.items[1].metadata.labels.x"),
    ],
    ids=["number", "null", "name-number", "metadata-array", "label-null"],
)  # fmt: skip
def test_a_bad_node_is_named_by_its_index(call, item, message, path):
    assert refusal(call, change(call, setitem(("Nodes", "items", 1), item))) == (message, path)


@pytest.mark.parametrize("call", ["filter-nodes", "prioritize-nodes"])
def test_invalid_utf8_in_a_node_says_where_in_the_node(call):
    body = compact(nodes_args()).replace(b'"node-2"', b'"node-\xff"')
    assert refusal(call, body) == ("invalid UTF-8 at byte 26 of the node", "$.Nodes.items[1]")


def test_the_images_of_a_node_are_only_checked_where_a_plugin_reads_them():
    # The filter decodes only each node's metadata: a size it never reads is not refused (prioritize reads it).
    body = change("filter-nodes", setitem(("Nodes", "items", 1, "status", "images", 0, "sizeBytes"), "x"))
    ext = Extender(load_profiles(CONFIG), cluster=StaticCluster(), traffic=traffic_store({}), binder=SimulatedBinder())
    assert ext.filter("default", body).status == 200
    assert refusal("prioritize-nodes", body) == (
        "expected an integer from -9223372036854775808 to 9223372036854775807, got a string",
        "$.Nodes.items[1].status.images[0].sizeBytes",
    )


# --- the decoder on its own ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("decode", "body", "message", "path"),
    [
        (wire.decode_extender_args, b'{"Pod":{},"NodeNames":["a",1]}', "expected a string, got a number",
         "$.NodeNames[1]"),
        (wire.decode_binding_args, b'{"PodName":"p"}', "missing required field `PodNamespace`", "$"),
        (wire.decode_preemption_args, b'{"Pod":{},"NodeNameToVictims":{"n":{"Pods":[{"metadata":1}]}}}',
         "expected an object, got a number", "$.NodeNameToVictims.n.Pods[0].metadata"),
    ],
)  # fmt: skip
def test_wire_errors_carry_our_text_and_path(decode, body, message, path):
    with pytest.raises(wire.WireError) as caught:
        decode(body)
    assert (caught.value.message, caught.value.path) == (message, path)
