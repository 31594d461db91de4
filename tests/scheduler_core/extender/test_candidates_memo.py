"""A NodeNames list seen before is answered from memory exactly as a fresh extender answers it."""

from __future__ import annotations

import json
import random
import time

import msgspec
import pytest

from scheduler_core.cli.simulator import make_cluster, make_pod
from scheduler_core.extender.candidates import MAX_LISTS
from scheduler_core.extender.protocol.binding import SimulatedBinder
from scheduler_core.extender.protocol.cluster import StaticCluster
from scheduler_core.extender.scoring.profiles import load_profiles
from scheduler_core.extender.verbs import Extender
from scheduler_core.traffic import TrafficSnapshot
from scheduler_core.traffic.store import TrafficStore
from tests.support.inputs import traffic_store

CLUSTER = make_cluster(60, seed=3)
PROFILES = load_profiles(
    (__import__("pathlib").Path(__file__).parents[3] / "deploy" / "profiles.demo.yaml").read_text()
)


[QUERY] = PROFILES["default"].traffic_queries()
LIMIT_BYTES = 125e6 * 300  # the demo profile's TrafficThreshold: 125 MB/s over 5 minutes


def fresh_extender(bytes_by_node: dict[str, float] | None = None) -> Extender:
    view = StaticCluster.from_document(CLUSTER.document())
    # Every seventh node over the threshold, so the filter fails some nodes for traffic and some for resources.
    default = {name: LIMIT_BYTES * (i % 7) / 5.5 for i, name in enumerate(CLUSTER.node_names)}
    traffic = traffic_store(default if bytes_by_node is None else bytes_by_node, query=QUERY)
    return Extender(PROFILES, cluster=view, traffic=traffic, binder=SimulatedBinder())


class PlainView:
    """A cluster view with only the protocol's two lookups: it cannot list its nodes, so every filter judges its
    own candidates (``run_filter``), never a window of the cluster's (``run_filter_window``)."""

    def __init__(self, view: StaticCluster) -> None:
        self.node = view.node
        self.node_resources = view.node_resources


def plain_extender(bytes_by_node: dict[str, float] | None = None) -> Extender:
    fresh = fresh_extender(bytes_by_node)
    view = PlainView(fresh.cluster)  # type: ignore[arg-type]
    return Extender(PROFILES, cluster=view, traffic=fresh.traffic, binder=SimulatedBinder())


def body(pod: dict, names: list[str]) -> bytes:
    return msgspec.json.encode({"Pod": pod, "Nodes": None, "NodeNames": names})


def answers(extender: Extender, verb: str, bodies: list[bytes]) -> list[tuple[int, bytes]]:
    return [(r.status, r.body) for r in (getattr(extender, verb)("default", b) for b in bodies)]


@pytest.mark.parametrize("verb", ["filter", "prioritize"])
def test_repeated_and_many_distinct_lists_get_the_answers_a_fresh_extender_gives(verb: str) -> None:
    rng = random.Random(5)
    lists = [rng.sample(CLUSTER.node_names, rng.randint(2, 40)) for _ in range(MAX_LISTS + 8)]
    pods = [make_pod(rng) for _ in range(3 * len(lists))]
    # Each list three times, spread out, and more distinct lists than the memo keeps.
    bodies = [body(pod, lists[i % len(lists)]) for i, pod in enumerate(pods)]
    remembering = fresh_extender()

    got = answers(remembering, verb, bodies)

    expected = [answers(fresh_extender(), verb, [b])[0] for b in bodies]
    assert got == expected
    assert all(status == 200 for status, _ in got)
    if verb == "filter":
        assert any(b"receive rate above" in answer for _, answer in got), "traffic fails some nodes"


def test_a_refused_list_is_refused_again_with_the_same_path_after_a_good_one() -> None:
    extender = fresh_extender()
    pod = make_pod(random.Random(1))
    good, bad = ["node-001", "node-002"], ["node-001", "node-002", "node-001"]
    for names in (good, bad, good, bad):
        result = extender.filter("default", body(pod, names))
        if names is bad:
            assert result.status == 400
            assert json.loads(result.body)["path"] == "$.NodeNames[2]"
        else:
            assert result.status == 200


def test_the_same_list_with_other_whitespace_or_a_wrong_shape_is_still_checked() -> None:
    extender = fresh_extender()
    pod = msgspec.json.encode(make_pod(random.Random(2)))
    spaced = b'{"Pod":' + pod + b',"Nodes":null,"NodeNames":[ "node-001" , "node-002" ]}'
    packed = b'{"Pod":' + pod + b',"Nodes":null,"NodeNames":["node-001","node-002"]}'
    numbers = b'{"Pod":' + pod + b',"Nodes":null,"NodeNames":["node-001",2]}'
    assert extender.filter("default", packed).body == extender.filter("default", spaced).body
    refused = extender.filter("default", numbers)
    assert refused.status == 400
    assert json.loads(refused.body)["path"] == "$.NodeNames[1]"


def test_a_new_traffic_snapshot_changes_the_next_answer_for_the_same_list() -> None:
    names = CLUSTER.node_names[:12]
    quiet = dict.fromkeys(CLUSTER.node_names, 1e6)
    extender = fresh_extender(quiet)
    request = body(make_pod(random.Random(4)), names)
    before = json.loads(extender.filter("default", request).body)
    assert "receive rate" not in json.dumps(before)

    busy = {**quiet, names[0]: 2 * LIMIT_BYTES}
    extender.traffic.put(TrafficSnapshot(QUERY, busy, time.time(), "test"))  # type: ignore[attr-defined]
    after = json.loads(extender.filter("default", request).body)

    assert names[0] not in (after["NodeNames"] or [])
    assert (
        "receive rate above"
        in {**(after["FailedNodes"] or {}), **(after["FailedAndUnresolvableNodes"] or {})}[names[0]]
    )
    assert json.loads(fresh_extender(busy).filter("default", request).body) == after


def test_pods_asking_for_different_resources_in_turn_reuse_each_filter_outcome(monkeypatch) -> None:
    """One outcome per combination of verdicts, kept side by side: alternating pods do not work it out again."""
    from scheduler_core.extender.scoring import engine

    worked_out: list[int] = []
    original = engine._outcome

    def counting(names, judged):  # type: ignore[no-untyped-def]
        worked_out.append(len(names))
        return original(names, judged)

    monkeypatch.setattr(engine, "_outcome", counting)
    names = CLUSTER.node_names[:40]
    kinds = []  # a pod asking for no extended resource, one for a GPU, one for NIC bandwidth
    for resource in (None, "example.com/gpu", "example.com/nic-bandwidth"):
        pod = make_pod(random.Random(9))
        requests = pod["spec"]["containers"][0]["resources"]["requests"]
        requests.pop("example.com/gpu", None)
        requests.pop("example.com/nic-bandwidth", None)
        if resource:
            requests[resource] = "1"
        kinds.append(body(pod, names))
    extender = fresh_extender()

    got = [extender.filter("default", kinds[i % 3]).body for i in range(30)]

    assert len(worked_out) == 3, "each combination of verdicts worked out once"
    assert len(set(got)) == 3, "the three pods get three different answers"
    assert got == [answers(fresh_extender(), "filter", [kinds[i % 3]])[0][1] for i in range(30)]


class CountingCluster(StaticCluster):
    """A view whose nodes can be swapped for another document's, counting the candidates it is asked to look up."""

    def __init__(self, document: dict) -> None:
        self._swap(document)
        self.looked_up = 0

    def _swap(self, document: dict) -> None:
        fresh = StaticCluster.from_document(document)
        self.__dict__.update({k: v for k, v in fresh.__dict__.items() if k != "looked_up"})

    def node_lookup(self):  # type: ignore[no-untyped-def]
        found = super().node_lookup()

        def counted(name: str):  # type: ignore[no-untyped-def]
            self.looked_up += 1
            return found(name)

        return counted


def kube_scheduler_cycle(extender: Extender, pod: dict, names: list[str]) -> tuple[bytes, bytes | None]:
    """Filter, then prioritize with exactly the names filter passed, in its order, as kube-scheduler sends them."""
    filtered = extender.filter("default", body(pod, names))
    passed = json.loads(filtered.body)["NodeNames"] or []
    if len(passed) < 2:
        return filtered.body, None
    return filtered.body, extender.prioritize("default", body(pod, passed)).body


def test_a_prioritize_sent_what_its_filter_passed_is_not_looked_up_again_and_answers_as_a_fresh_extender() -> None:
    rng = random.Random(11)
    view = CountingCluster(CLUSTER.document())
    extender = Extender(PROFILES, cluster=view, traffic=fresh_extender().traffic, binder=SimulatedBinder())
    windows = [rng.sample(CLUSTER.node_names, 25) for _ in range(12)]  # a new list for every pod, as at 1000 nodes
    pods = [make_pod(rng) for _ in windows]

    got = [kube_scheduler_cycle(extender, pod, names) for pod, names in zip(pods, windows, strict=True)]

    assert view.looked_up == len(CLUSTER.node_names), "each node looked up once, for every window and prioritize"
    assert sum(scored is not None for _, scored in got) >= 10
    assert got == [kube_scheduler_cycle(plain_extender(), p, n) for p, n in zip(pods, windows, strict=True)]


def test_nodes_that_change_between_a_filter_and_its_prioritize_are_looked_up_again() -> None:
    view = CountingCluster(CLUSTER.document())
    extender = Extender(PROFILES, cluster=view, traffic=fresh_extender().traffic, binder=SimulatedBinder())
    pod = make_pod(random.Random(12))
    names = CLUSTER.node_names[:20]
    passed = json.loads(extender.filter("default", body(pod, names)).body)["NodeNames"]
    relabelled = CLUSTER.document()
    for node in relabelled["nodes"]:
        node["status"]["images"] = []  # the node cache saw every node lose its images (ImageLocality scores them 0)
    view._swap(relabelled)

    scored = json.loads(extender.prioritize("default", body(pod, passed)).body)

    fresh = Extender(
        PROFILES,
        cluster=StaticCluster.from_document(relabelled),
        traffic=fresh_extender().traffic,
        binder=SimulatedBinder(),
    )
    assert scored == json.loads(fresh.prioritize("default", body(pod, passed)).body)
    assert view.looked_up == len(CLUSTER.node_names) + len(passed)


def ageless(record):  # type: ignore[no-untyped-def]
    """The record without the snapshot's age, which the clock of each call sets."""
    return msgspec.structs.replace(record, metric_age_seconds=None)


def resource_pods(rng: random.Random, count: int) -> list[dict]:
    """Pods asking for no extended resource, a GPU or NIC bandwidth, in turn."""
    pods = []
    for i in range(count):
        pod = make_pod(rng)
        requests = pod["spec"]["containers"][0]["resources"]["requests"]
        requests.pop("example.com/gpu", None)
        requests.pop("example.com/nic-bandwidth", None)
        resource = (None, "example.com/gpu", "example.com/nic-bandwidth")[i % 3]
        if resource:
            requests[resource] = "1"
        pods.append(pod)
    return pods


@pytest.mark.parametrize("profile", ["default", "gpu-aware"])
def test_a_filter_judging_a_window_of_the_cluster_answers_and_records_as_judging_the_window_alone(profile) -> None:
    rng = random.Random(21)
    windowed, plain = fresh_extender(), plain_extender()
    windows = [rng.sample(CLUSTER.node_names, rng.randint(1, 60)) for _ in range(40)]

    answers = []
    for pod, names in zip(resource_pods(rng, len(windows)), windows, strict=True):
        got = windowed.filter(profile, body(pod, names))
        expected = plain.filter(profile, body(pod, names))

        assert (got.status, got.body) == (expected.status, expected.body)
        assert ageless(got.event.filter) == ageless(expected.event.filter)
        assert list(got.event.filter.failures) == list(expected.event.filter.failures), "failures in window order"
        answers.append(got.body)
    assert any(b"receive rate above" in answer for answer in answers), "traffic fails some nodes"
    assert any(b"NodeResourceFitByCR" in answer for answer in answers), "resources fail some nodes"


def test_a_window_with_a_name_the_view_does_not_hold_is_judged_as_before() -> None:
    pod = make_pod(random.Random(22))
    names = [*CLUSTER.node_names[:10], "node-not-in-the-file"]

    got = fresh_extender().filter("default", body(pod, names))

    assert got.body == plain_extender().filter("default", body(pod, names)).body
    assert got.event.filter.nodes == names


@pytest.mark.parametrize("profile", ["default", "gpu-aware"])  # gpu-aware fails nodes without traffic figures
def test_windows_without_a_traffic_snapshot_are_judged_as_alone(profile: str) -> None:
    view = StaticCluster.from_document(CLUSTER.document())
    rng = random.Random(23)
    no_snapshot = TrafficStore()
    windowed = Extender(PROFILES, cluster=view, traffic=no_snapshot, binder=SimulatedBinder())
    plain = Extender(PROFILES, cluster=PlainView(view), traffic=no_snapshot, binder=SimulatedBinder())  # type: ignore[arg-type]

    for pod in resource_pods(rng, 6):
        names = rng.sample(CLUSTER.node_names, 30)
        got, expected = windowed.filter(profile, body(pod, names)), plain.filter(profile, body(pod, names))
        assert (got.body, ageless(got.event.filter)) == (expected.body, ageless(expected.event.filter))
        assert (b"traffic metrics unavailable" in got.body) == (profile == "gpu-aware")
