"""A hypothesis fuzz of every verb: arbitrary JSON, bodies shaped like the protocol with arbitrary values, and
mutations (structural and byte-level) of the real kube-scheduler captures and the protocol examples.

Every case must be answered 200, 400 or 404 (never an exception, never a 5xx), with JSON kube-scheduler can
read, an answer consistent with the request, and a record the ingester stores (through the real spool and
``spool_ingest``, on PostgreSQL). ``make test`` runs a few hundred cases (``SCHEDLENS_FUZZ_EXAMPLES`` per test,
derandomized); ``python -m benchmarks.reliability.fuzz`` runs thousands and writes the counts to
``benchmarks/results-reliability.md``.
"""

from __future__ import annotations

import json
import os
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dashboard.ingest.spool_ingest import spool_ingest
from dashboard.models import VerbCall
from dashboard.spool import Spool
from scheduler_core.extender.protocol.binding import SimulatedBinder
from scheduler_core.extender.protocol.cluster import NodeInfo, NodeResourcesSpec, StaticCluster
from scheduler_core.extender.record.spool_codec import encode_event
from scheduler_core.extender.scoring.profiles import load_profiles
from scheduler_core.extender.verbs import Extender, VerbResult
from tests.support.inputs import traffic_store
from tests.support.paths import CAPTURES, EXAMPLES

pytestmark = pytest.mark.django_db

EXAMPLES_PER_TEST = int(os.environ.get("SCHEDLENS_FUZZ_EXAMPLES", "120"))
REPORT = os.environ.get("SCHEDLENS_FUZZ_REPORT", "")
FUZZ = settings(
    max_examples=EXAMPLES_PER_TEST,
    deadline=None,
    database=None,
    derandomize=not REPORT,
    suppress_health_check=list(HealthCheck),
)
VERBS = ("filter", "prioritize", "bind", "preempt")
PROFILES = """
profiles:
- name: default
- name: gpu
  plugins:
    filter: {enabled: [{name: NodeResourceFitByCR}]}
    score: {enabled: [{name: NodeResourceFitByCR, weight: 3}, {name: ImageLocality, weight: 1}]}
"""
NODES = ["node-1", "node-2", "node-3", "worker-a", "worker-b", "worker-c"]
CLUSTER = StaticCluster(
    [NodeInfo(name, images=frozenset({"docker.io/library/nginx:1.25.4"})) for name in NODES],
    {"node-1": NodeResourcesSpec({"example.com/gpu": True}, {"example.com/gpu": 80})},
)
SEEDS = sorted([*CAPTURES.glob("*/*.body.json"), *EXAMPLES.glob("*-req.json")])

COUNTS: Counter[str] = Counter()
"""Cases run per test and answers per status, for benchmarks.reliability.fuzz."""


@pytest.fixture(scope="module", autouse=True)
def _report() -> Iterator[None]:
    yield
    if REPORT:
        path = Path(REPORT)
        previous = json.loads(path.read_text()) if path.exists() else {}
        path.write_text(json.dumps({**previous, "verbs": dict(COUNTS)}, indent=2))


@pytest.fixture
def extender() -> Extender:
    traffic = traffic_store({"node-1": 1.0e6, "node-2": 9.0e6, "worker-a": 4e10, "worker-b": 0.0})
    return Extender(load_profiles(PROFILES), cluster=CLUSTER, traffic=traffic, binder=SimulatedBinder())


@pytest.fixture
def spool(tmp_path: Path) -> Iterator[Spool]:
    spool = Spool(tmp_path / "spool")
    yield spool
    spool.close()


# --- strategies ------------------------------------------------------------------------------------------

names = st.one_of(st.sampled_from(NODES), st.text(max_size=40), st.text(st.characters(codec="utf-8"), max_size=300))
scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(allow_nan=False, allow_infinity=False),
    st.text(max_size=50),
)
json_values = st.recursive(
    scalars,
    lambda inner: st.lists(inner, max_size=5) | st.dictionaries(st.text(max_size=12), inner, max_size=5),
    max_leaves=30,
)


def mostly(strategy: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    """``strategy`` three times in four, else any JSON value (most bodies should decode; some must not)."""
    return st.one_of(strategy, strategy, strategy, json_values)


pods = st.fixed_dictionaries(
    {},
    optional={
        "metadata": mostly(
            st.fixed_dictionaries(
                {},
                optional={
                    "name": names,
                    "namespace": names,
                    "uid": names,
                    "resourceVersion": names,
                    "labels": mostly(st.dictionaries(names, names, max_size=3)),
                },
            )
        ),
        "spec": mostly(
            st.fixed_dictionaries(
                {},
                optional={
                    "containers": mostly(
                        st.lists(
                            st.fixed_dictionaries(
                                {},
                                optional={
                                    "image": names,
                                    "resources": st.fixed_dictionaries(
                                        {}, optional={"requests": mostly(st.dictionaries(names, names, max_size=3))}
                                    ),
                                },
                            ),
                            max_size=3,
                        )
                    ),
                },
            )
        ),
    },
)
node_objects = mostly(st.fixed_dictionaries({"metadata": st.fixed_dictionaries({"name": names})}))
node_lists = st.lists(names, max_size=8, unique=True)
# Branches are repeated to weight them: most bodies should get past decoding, so plugins and records see them.
extender_args = st.fixed_dictionaries(
    {"Pod": mostly(pods)},
    optional={
        "Nodes": st.none() | st.fixed_dictionaries({}, optional={"items": st.lists(node_objects, max_size=6)}),
        "NodeNames": st.one_of(node_lists, node_lists, st.none(), json_values),
    },
)
binding_args = st.one_of(
    st.fixed_dictionaries({"PodName": names, "PodNamespace": names, "PodUID": names, "Node": names}),
    st.fixed_dictionaries(
        {},
        optional={"PodName": names | json_values, "PodNamespace": names, "PodUID": names, "Node": names | json_values},
    ),
)
victims = st.fixed_dictionaries(
    {"Pods": st.lists(st.fixed_dictionaries({"UID": names}), max_size=3)},
    optional={"NumPDBViolations": st.integers() | json_values},
)
preemption_args = st.fixed_dictionaries(
    {"Pod": pods},
    optional={
        "NodeNameToMetaVictims": st.none() | st.dictionaries(names, st.none() | victims, max_size=4),
        "NodeNameToVictims": st.none() | json_values,
    },
)
matched = st.one_of(
    st.tuples(st.sampled_from(["filter", "prioritize"]), extender_args),
    st.tuples(st.just("bind"), binding_args),
    st.tuples(st.just("preempt"), preemption_args),
)
shaped = st.one_of(
    matched, matched, matched, st.tuples(st.sampled_from(VERBS), extender_args | binding_args | preemption_args)
)


# Always well-formed, with arbitrary strings wherever kube-scheduler puts a name, a label or a resource.
hostile_names = st.text(min_size=1, max_size=60) | st.text(st.characters(codec="utf-8"), min_size=1, max_size=300)
valid_pods = st.fixed_dictionaries(
    {
        "metadata": st.fixed_dictionaries(
            {"name": hostile_names, "namespace": hostile_names, "uid": hostile_names},
            optional={"labels": st.dictionaries(hostile_names, st.text(max_size=40), max_size=3)},
        ),
        "spec": st.fixed_dictionaries(
            {
                "containers": st.lists(
                    st.fixed_dictionaries(
                        {
                            "image": hostile_names
                            | st.sampled_from(["nginx:1.25.4", "docker.io/library/nginx:1.25.4"]),
                            "resources": st.fixed_dictionaries(
                                {"requests": st.dictionaries(hostile_names | st.just("example.com/gpu"), st.just("1"))}
                            ),
                        }
                    ),
                    max_size=3,
                )
            }
        ),
    }
)
valid_names = st.lists(hostile_names | st.sampled_from(NODES), min_size=1, max_size=8, unique=True)
valid = st.one_of(
    st.tuples(
        st.sampled_from(["filter", "prioritize"]),
        st.builds(lambda pod, names: {"Pod": pod, "Nodes": None, "NodeNames": names}, valid_pods, valid_names),
    ),
    st.tuples(
        st.sampled_from(["filter", "prioritize"]),
        st.builds(
            lambda pod, names: {"Pod": pod, "Nodes": {"items": [{"metadata": {"name": n}} for n in names]}},
            valid_pods,
            valid_names,
        ),
    ),
    st.tuples(
        st.just("bind"),
        st.fixed_dictionaries(
            {"PodName": hostile_names, "PodNamespace": hostile_names, "PodUID": hostile_names, "Node": hostile_names}
        ),
    ),
    st.tuples(
        st.just("preempt"),
        st.builds(
            lambda pod, nodes: {"Pod": pod, "NodeNameToMetaVictims": nodes},
            valid_pods,
            st.dictionaries(
                hostile_names | st.sampled_from(NODES),
                st.fixed_dictionaries({"Pods": st.lists(st.fixed_dictionaries({"UID": hostile_names}), max_size=3)}),
                max_size=5,
            ),
        ),
    ),
)


def _encode(value: Any) -> bytes:
    # ensure_ascii: a lone surrogate hypothesis draws goes out as "\ud800", as a hostile client could send it.
    return json.dumps(value).encode()


def _verb_of(seed: Path) -> str:
    return next(verb for verb in VERBS if verb in seed.name)


@st.composite
def mutated_seeds(draw: st.DrawFn) -> tuple[str, bytes]:
    """(verb, body): a capture or example mutated, sent to its own verb (now and then to another)."""
    path = draw(st.sampled_from(SEEDS))
    verb = _verb_of(path) if draw(st.integers(0, 4)) else draw(st.sampled_from(VERBS))
    seed = json.loads(path.read_bytes())
    for _ in range(draw(st.integers(1, 3))):
        seed = _mutate(draw, seed)
    body = _encode(seed)
    if draw(st.integers(0, 3)):
        return verb, body
    data = bytearray(body)  # byte-level damage: flip, cut, insert
    for _ in range(draw(st.integers(1, 4))):
        at = draw(st.integers(0, max(0, len(data) - 1)))
        operation = draw(st.sampled_from(["flip", "cut", "insert"]))
        if operation == "flip" and data:
            data[at] = draw(st.integers(0, 255))
        elif operation == "cut":
            del data[at:]
        else:
            data[at:at] = draw(st.binary(min_size=1, max_size=8))
    return verb, bytes(data)


def _mutate(draw: st.DrawFn, value: Any) -> Any:
    if isinstance(value, dict) and value and draw(st.booleans()):
        key = draw(st.sampled_from(sorted(value)))
        action = draw(st.sampled_from(["descend", "replace", "delete", "duplicate-into"]))
        changed = dict(value)
        if action == "descend":
            changed[key] = _mutate(draw, value[key])
        elif action == "replace":
            changed[key] = draw(json_values | names)
        elif action == "delete":
            del changed[key]
        else:
            changed[draw(names)] = value[key]
        return changed
    if isinstance(value, list) and value and draw(st.booleans()):
        index = draw(st.integers(0, len(value) - 1))
        changed = list(value)
        action = draw(st.sampled_from(["descend", "replace", "duplicate", "delete"]))
        if action == "descend":
            changed[index] = _mutate(draw, value[index])
        elif action == "replace":
            changed[index] = draw(json_values | names)
        elif action == "duplicate":
            changed.insert(index, value[index])
        else:
            del changed[index]
        return changed
    return draw(json_values | names | st.just(value))


known_profiles = st.sampled_from(["default", "gpu"])
profiles = st.one_of(known_profiles, known_profiles, known_profiles, st.text(max_size=80))


# --- the oracle ------------------------------------------------------------------------------------------


def check(verb: str, body: bytes, result: VerbResult, spool: Spool, test: str) -> None:
    COUNTS[f"{test}:cases"] += 1
    COUNTS[f"status:{result.status}"] += 1
    COUNTS[f"{test}:status:{result.status}"] += 1
    assert result.status in (200, 400, 404), result.status
    answer = _go_json(result.body)
    assert result.event.http_status == result.status
    if result.status != 200:
        assert answer["error"]
        assert result.event.error == answer["error"]
    else:
        _answer_matches_request(verb, _go_json(body), answer)
    # The record goes through the real spool and ingester into PostgreSQL, and nothing is set aside.
    spool.append(encode_event(result.event))
    assert spool_ingest(spool=spool) == 1
    assert spool.rejected() == []
    assert VerbCall.objects.filter(event_id=result.event.event_id).exists()


def _go_json(data: bytes) -> Any:
    """Decode like Go's encoding/json, which replaces invalid UTF-8 (msgspec skips the fields it ignores unread,
    and full-Nodes answers echo node bytes as they came)."""
    return json.loads(data.decode("utf-8", "replace"))


def _name(node: Any) -> str:
    return str(((node or {}).get("metadata") or {}).get("name") or "")


def _answer_matches_request(verb: str, request: dict[str, Any], answer: Any) -> None:
    if verb in ("filter", "prioritize"):
        if request.get("NodeNames") is not None:
            candidates = request["NodeNames"]
        else:
            candidates = [_name(item) for item in request["Nodes"]["items"]]
        if verb == "filter":
            if answer["NodeNames"] is not None:
                kept = answer["NodeNames"]
            else:
                kept = [_name(item) for item in answer["Nodes"]["items"]]
            failed = {**(answer["FailedNodes"] or {}), **(answer["FailedAndUnresolvableNodes"] or {})}
            assert set(kept) | set(failed) == set(candidates), "every candidate is kept or failed with a reason"
            assert not set(kept) & set(failed)
            assert all(reason for reason in failed.values())
        else:
            assert [host["Host"] for host in answer] == candidates
            assert all(0 <= host["Score"] <= 10 for host in answer)
    elif verb == "bind":
        assert "%" not in answer["Error"]
    else:
        if request.get("NodeNameToMetaVictims") is not None:
            given_victims = {n: v["Pods"] for n, v in request["NodeNameToMetaVictims"].items()}
        else:
            given_victims = {
                n: [{"UID": (p.get("metadata") or {}).get("uid", "")} for p in v["Pods"]]
                for n, v in (request.get("NodeNameToVictims") or {}).items()
            }
        for node, victims in answer["NodeNameToMetaVictims"].items():
            assert node in given_victims
            assert victims["Pods"] == given_victims[node], "victims only from the input, unchanged"


# --- the fuzz --------------------------------------------------------------------------------------------


@FUZZ
@given(verb=st.sampled_from(VERBS), profile=profiles, value=json_values)
def test_arbitrary_json_never_breaks_a_verb(extender, spool, verb, profile, value) -> None:
    body = _encode(value)
    check(verb, body, getattr(extender, verb)(profile, body), spool, "arbitrary-json")


@FUZZ
@given(profile=profiles, verb_and_value=shaped)
def test_protocol_shaped_bodies_with_arbitrary_values_never_break_a_verb(
    extender, spool, profile, verb_and_value
) -> None:
    verb, value = verb_and_value
    body = _encode(value)
    check(verb, body, getattr(extender, verb)(profile, body), spool, "protocol-shaped")


@FUZZ
@given(profile=known_profiles, verb_and_value=valid)
def test_well_formed_requests_with_hostile_strings_are_answered_and_stored(
    extender, spool, profile, verb_and_value
) -> None:
    verb, value = verb_and_value
    body = _encode(value)
    result = getattr(extender, verb)(profile, body)
    assert result.status == 200, result.body
    check(verb, body, result, spool, "well-formed-hostile")


@FUZZ
@given(verb_and_body=mutated_seeds())
def test_mutated_captures_never_break_a_verb(extender, spool, verb_and_body) -> None:
    verb, body = verb_and_body
    check(verb, body, getattr(extender, verb)("default", body), spool, "mutated-captures")


@FUZZ
@given(
    verb=st.sampled_from(VERBS),
    content_type=st.sampled_from(["application/json", "text/plain", "application/json; charset=utf-8", ""]),
    body=st.binary(max_size=200) | mutated_seeds().map(lambda pair: pair[1]),
)
def test_the_views_answer_any_body_and_content_type_with_a_4xx_or_a_200(
    client, runtime_for_fuzz, verb, content_type, body
) -> None:
    COUNTS["views:cases"] += 1
    response = client.post(f"/extender/default/{verb}", data=body, content_type=content_type)
    COUNTS[f"status:{response.status_code}"] += 1
    COUNTS[f"views:status:{response.status_code}"] += 1
    assert response.status_code in (200, 400, 415), response.status_code
    assert json.loads(response.content)
    assert spool_ingest(spool=runtime_for_fuzz.spool) == 1
    assert runtime_for_fuzz.spool.rejected() == []


@pytest.fixture
def runtime_for_fuzz(settings, tmp_path, monkeypatch):
    from dashboard import runtime as runtime_module

    settings.SCHEDLENS_SPOOL_DIR = tmp_path / "view-spool"
    settings.SCHEDLENS_INGEST_IN_PROCESS = False
    settings.SCHEDLENS_BIND_MODE = "simulated"
    settings.SCHEDLENS_CONFIG = ""
    settings.SCHEDLENS_CLUSTER_FILE = ""
    runtime = runtime_module.Runtime()
    monkeypatch.setattr(runtime_module, "_runtime", runtime)
    yield runtime
    runtime.spool.close()
