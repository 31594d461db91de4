"""Recorded cycles for the explanation property tests: what Hypothesis generates, and how it is recorded and read.

Not a test module: ``test_explanations_add_up`` and ``test_explanations_exported`` draw their cycles from here.
Hypothesis generates cycles (:func:`scenarios`: 2–12 candidates; traffic with ties, zeros, missing series and stale
snapshots; recent binds weighing on some nodes; profiles mixing NetworkTraffic with NodeResourceFitByCR and
ImageLocality at weights 1..5; the ``fixed`` or ``spread`` answer scale; ``missingPolicy`` neutral or fail), with
fixed examples beside them (:data:`ALL_ZERO`, :data:`STALE_FAIL`, :data:`HERD_TIE`…). :func:`record_cycle` drives each
through the real extender verbs (``scheduler_core.extender.verbs.Extender``: herd binds, filter, prioritize, and bind
for some); :func:`ingest_and_fetch` folds them with the real ingester and reads them back through ``/api/v1/why/`` and
``/api/v1/cycles/<id>/``.

:func:`assert_figures_are_the_inputs` ties an explanation's figures to what the test fed the verbs, so a
self-consistent but wrong explanation cannot pass the recomputation (``tests.support.explanation_checks``).
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import timedelta
from pathlib import Path
from typing import Any

import msgspec
import pytest
from django.conf import settings as django_settings
from django.db import transaction
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st

from dashboard.ingest.cycles import cycles_ingest_events
from scheduler_core.extender.protocol.binding import SimulatedBinder
from scheduler_core.extender.protocol.cluster import NodeInfo, NodeResourcesSpec, StaticCluster, normalize_image
from scheduler_core.extender.record.structs import VerbEvent
from scheduler_core.extender.scoring.herd import InMemoryBindLog
from scheduler_core.extender.scoring.profiles import load_profiles
from scheduler_core.extender.verbs import Extender
from scheduler_core.traffic import TrafficSnapshot
from scheduler_core.traffic.store import TrafficStore
from tests.support.explanation_checks import IMAGES, NEUTRAL, RESOURCES, TRAFFIC, terms_of
from tests.support.inputs import Inputs
from tests.support.kube_scheduler import T0
from tests.support.profile_versions import store_served_versions

# --- the generated cycles ----------------------------------------------------------------------------------------

PROFILE = "audit-prop"
NAMESPACE = "audit"
WINDOW_SECONDS = 300
THRESHOLD_BYTES_PER_SECOND = 125e6
BUSY = 40e9
"""Above TrafficThreshold's 125 MB/s over 5 minutes: the node is excluded."""
POOL = (0.0, 1.0e6, 1.0e6, 2.0e6, 2.5e6, 4.0e6, 3.2e7, 1.2e8, 3.0e8)
"""Few distinct values, so equal traffic (ties) and zeros come up often."""
NODE_RESOURCES = ("example.com/gpu", "example.com/nic")
POD_IMAGES = ("nginx:1.25.4", "redis:7", "busybox", "ghcr.io/acme/app:v1")
LOG_DEFAULT_DECAY = 15.0
"""The bind log's default decay (one traffic refresh), used when the profile sets no ``herdDecaySeconds``."""
NOW = (T0 + timedelta(hours=1)).timestamp()
DEFAULT_MAX_STALENESS_SECONDS = 120.0
"""Older snapshots are stale: NetworkTraffic scores every node as missing."""


@dataclass(frozen=True)
class NodeCase:
    name: str
    traffic: float | None
    """Bytes over the window in the snapshot; None: no series for the node."""
    bind_ages: tuple[float, ...]
    """Seconds before the cycle at which other pods were bound to the node (the herd)."""
    cr: NodeResourcesSpec | None
    images: frozenset[str]


@dataclass(frozen=True)
class Scenario:
    nodes: tuple[NodeCase, ...]
    metric_age: float
    missing_policy: str
    threshold_policy: str
    assumed_bytes_per_pod: float | None
    """None: the default (300 MB)."""
    herd_decay_seconds: float
    """0: the bind log's default decay."""
    scorers: tuple[tuple[str, int], ...]
    filter_by_resources: bool
    pod_resources: tuple[str, ...]
    pod_images: tuple[str, ...]
    answer_scale: str
    extender_weight: int | None
    bind: bool
    serial: int = field(default=0, compare=False)

    @property
    def stale(self) -> bool:
        return self.metric_age > DEFAULT_MAX_STALENESS_SECONDS

    @property
    def missing_score(self) -> float:
        """What the profile scores a node without a usable measurement: the neutral 50, or 0 under ``fail``."""
        return 0.0 if self.missing_policy == "fail" else NEUTRAL

    @property
    def decay(self) -> float:
        return self.herd_decay_seconds or LOG_DEFAULT_DECAY

    @property
    def bytes_per_pod(self) -> float:
        return 300e6 if self.assumed_bytes_per_pod is None else self.assumed_bytes_per_pod

    def profile_yaml(self) -> str:
        traffic_args: dict[str, Any] = {"missingPolicy": self.missing_policy}
        if self.assumed_bytes_per_pod is not None:
            traffic_args["assumedBytesPerPod"] = self.assumed_bytes_per_pod
        if self.herd_decay_seconds:
            traffic_args["herdDecaySeconds"] = self.herd_decay_seconds
        filters = [{"name": "TrafficThreshold"}] + ([{"name": RESOURCES}] if self.filter_by_resources else [])
        answer: dict[str, Any] = {"scale": self.answer_scale}
        if self.extender_weight is not None:
            answer["extenderWeight"] = self.extender_weight
        document = {
            "profiles": [
                {
                    "name": PROFILE,
                    "plugins": {
                        "filter": {"enabled": filters, "disabled": [{"name": "*"}]},
                        "score": {
                            "enabled": [{"name": name, "weight": weight} for name, weight in self.scorers],
                            "disabled": [{"name": "*"}],
                        },
                    },
                    "pluginConfig": [
                        {"name": TRAFFIC, "args": traffic_args},
                        {"name": "TrafficThreshold", "args": {"missingPolicy": self.threshold_policy}},
                    ],
                    "answer": answer,
                }
            ]
        }
        return json.dumps(document)  # YAML is a superset of JSON

    def passes_filters(self, node: NodeCase) -> bool:
        """What the profile's filters should let through (the test's own expectation)."""
        if self.stale or node.traffic is None:
            if self.threshold_policy == "fail":
                return False
        elif node.traffic / WINDOW_SECONDS > THRESHOLD_BYTES_PER_SECOND:
            return False
        if self.filter_by_resources:
            if node.cr is None:
                return False
            if not all(node.cr.resources_filter.get(r, False) for r in self.pod_resources):
                return False
        return True


@st.composite
def traffic_values(draw: st.DrawFn) -> float | None:
    kind = draw(st.integers(0, 19))
    if kind < 2:
        return None  # no series for the node
    if kind < 3:
        return BUSY
    if kind < 10:
        return draw(st.sampled_from(POOL))
    if kind < 15:
        return float(draw(st.integers(0, 5 * 10**9)))
    return draw(st.floats(0.0, 5e9, allow_nan=False, allow_infinity=False))  # Prometheus' increase() is fractional


@st.composite
def node_cases(draw: st.DrawFn, name: str, decay: float) -> NodeCase:
    traffic = draw(traffic_values())
    # Ages in whole milliseconds, some past the decay (they must not count).
    ages = draw(st.lists(st.integers(0, int(decay * 1200)).map(lambda ms: ms / 1000), max_size=3))
    cr = None
    if draw(st.integers(0, 4)):
        enabled = {r: draw(st.integers(0, 5)) > 0 for r in NODE_RESOURCES}
        scores = {r: draw(st.integers(-20, 130)) for r in NODE_RESOURCES if draw(st.integers(0, 4))}
        cr = NodeResourcesSpec(enabled, scores)
    images = frozenset(normalize_image(i) for i in POD_IMAGES if draw(st.booleans()))
    return NodeCase(name, traffic, tuple(ages), cr, images)


_serials = itertools.count(1)


@st.composite
def scenarios(draw: st.DrawFn) -> Scenario:
    count = draw(st.integers(2, 12))
    herd_decay_seconds = draw(st.sampled_from([0.0, 0.0, 60.0]))
    decay = herd_decay_seconds or LOG_DEFAULT_DECAY
    nodes = tuple(draw(node_cases(f"node-{i:02d}", decay)) for i in range(count))
    stale = draw(st.integers(0, 5)) == 0
    metric_age = draw(st.floats(121.0, 900.0) if stale else st.floats(0.0, 110.0))
    extra = draw(st.lists(st.sampled_from([RESOURCES, IMAGES]), unique=True))
    plugins = draw(st.permutations([TRAFFIC, *extra]))
    scorers = tuple((name, draw(st.integers(1, 5))) for name in plugins)
    return Scenario(
        nodes=nodes,
        metric_age=metric_age,
        missing_policy=draw(st.sampled_from(["neutral", "fail"])),
        threshold_policy="fail" if draw(st.integers(0, 5)) == 0 else "neutral",
        assumed_bytes_per_pod=draw(st.sampled_from([None, 0.0, 1e8, 1_234_567.0, 5e9])),
        herd_decay_seconds=herd_decay_seconds,
        scorers=scorers,
        filter_by_resources=draw(st.integers(0, 4)) == 0,
        pod_resources=tuple(sorted(draw(st.sets(st.sampled_from(NODE_RESOURCES))))),
        pod_images=tuple(draw(st.lists(st.sampled_from(POD_IMAGES), unique=True, max_size=3))),
        answer_scale="fixed" if draw(st.integers(0, 1)) else "spread",
        extender_weight=draw(st.none() | st.integers(1, 100)),
        bind=draw(st.booleans()),
        serial=next(_serials),
    )


def _plain(name: str, traffic: float | None, *, binds: tuple[float, ...] = (), images: Sequence[str] = ()) -> NodeCase:
    return NodeCase(name, traffic, binds, None, frozenset(map(normalize_image, images)))


_BASE = Scenario(
    nodes=(),
    metric_age=5.0,
    missing_policy="neutral",
    threshold_policy="neutral",
    assumed_bytes_per_pod=None,
    herd_decay_seconds=0.0,
    scorers=((TRAFFIC, 1),),
    filter_by_resources=False,
    pod_resources=(),
    pod_images=(),
    answer_scale="spread",
    extender_weight=None,
    bind=True,
)
ALL_ZERO = replace(_BASE, nodes=tuple(_plain(f"z-{i}", 0.0) for i in range(3)), serial=-1)
"""Every candidate measured 0 bytes: each scores 100."""
STALE_FAIL = replace(
    _BASE,
    nodes=(_plain("s-0", 1e6), _plain("s-1", None), _plain("s-2", 3e6)),
    metric_age=300.0,
    missing_policy="fail",
    answer_scale="fixed",
    extender_weight=3,
    serial=-2,
)
"""A stale snapshot under missingPolicy fail: every node scores 0."""
HERD_TIE = replace(
    _BASE,
    nodes=(
        _plain("h-0", 1e6, binds=(0.0, 3.5), images=POD_IMAGES[:1]),
        _plain("h-1", 1e6),
        _plain("h-2", None, binds=(1.0,)),
        _plain("h-3", 4e6, images=POD_IMAGES[:2]),
    ),
    assumed_bytes_per_pod=1e6,
    scorers=((IMAGES, 2), (TRAFFIC, 3)),
    pod_images=POD_IMAGES[:2],
    serial=-3,
)
"""Equal measured traffic, broken by recent binds on h-0; a missing series with a bind on it (no herd bytes)."""
HALF_UP_FIXED = replace(
    _BASE, nodes=(_plain("f-0", 1e6), _plain("f-1", 4e6), _plain("f-2", 3e6)), answer_scale="fixed", serial=-4
)
"""Finals 75, 0 and 25: 7.5 and 2.5 must answer 8 and 3 (half up), not 7 and 2."""
HALF_UP_SPREAD = replace(
    _BASE, nodes=(_plain("p-0", 0.0), _plain("p-1", 4e6), _plain("p-2", 3e6)), extender_weight=2, serial=-5
)
"""Finals 100, 0 and 25: 10 × 25 / 100 = 2.5 must answer 3."""
NEAR_TIE_FIXED = replace(
    _BASE, nodes=(_plain("t-0", 4e6), _plain("t-1", 1.12e6), _plain("t-2", 1.14e6)), answer_scale="fixed", serial=-6
)
"""Finals 0, 72 and 71.5: t-1 and t-2 both answer 7, half a point apart (answer_tie)."""
TINY_MAXIMUM = replace(
    _BASE, nodes=(_plain("m-0", 1e-320), _plain("m-1", 0.0), _plain("m-2", 5e-321)), answer_scale="fixed", serial=-7
)
"""The largest estimate is the smallest positive float (``increase()`` is fractional): ``100 / max`` overflows, yet
the scores are 0, 100 and 50 like any other estimates in that ratio (once, a 500 for a NaN score)."""


# --- driving the real verbs --------------------------------------------------------------------------------------


def _pod(scenario: Scenario, name: str, uid: str) -> dict[str, Any]:
    images = list(scenario.pod_images) or ["nginx:1.25.4"]
    containers: list[dict[str, Any]] = [{"name": f"c{i}", "image": image} for i, image in enumerate(images)]
    if not scenario.pod_images:
        containers = [{"name": "c0"}]  # no image at all: ImageLocality does not apply
    if scenario.pod_resources:
        containers[0]["resources"] = {"requests": dict.fromkeys(scenario.pod_resources, "1")}
    return {
        "metadata": {"name": name, "namespace": NAMESPACE, "uid": uid, "resourceVersion": "1"},
        "spec": {"containers": containers},
    }


@dataclass
class Recorded:
    pod_name: str
    events: list[VerbEvent]
    scored: list[str]
    """The names prioritize was called with (what passed the filters)."""
    chosen: str


def record_cycle(scenario: Scenario) -> Recorded:
    """Herd binds, then filter, prioritize and (for some) bind, as kube-scheduler calls them."""
    profiles = load_profiles(scenario.profile_yaml())
    store = TrafficStore()
    measured = {n.name: n.traffic for n in scenario.nodes if n.traffic is not None}
    for query in profiles[PROFILE].traffic_queries():
        store.put(TrafficSnapshot(query, dict(measured), NOW - scenario.metric_age, "test"))
    cluster = StaticCluster(
        [NodeInfo(n.name, images=n.images) for n in scenario.nodes],
        {n.name: n.cr for n in scenario.nodes if n.cr is not None},
    )
    log = InMemoryBindLog(600.0, default_decay_seconds=LOG_DEFAULT_DECAY)
    extender = Extender(
        profiles, cluster=cluster, traffic=store, binder=SimulatedBinder(), clock=lambda: NOW, inputs=Inputs(store, log)
    )
    for node in scenario.nodes:
        for k, age in enumerate(node.bind_ages):
            extender.clock = lambda at=NOW - age: at
            body = {"PodName": f"herd-{node.name}-{k}", "PodNamespace": NAMESPACE, "PodUID": f"herd-{node.name}-{k}"}
            result = extender.bind(PROFILE, msgspec.json.encode({**body, "Node": node.name}))
            assert result.status == 200
            assert msgspec.json.decode(result.body).get("Error", "") == "", result.body
    extender.clock = lambda: NOW

    name = f"prop-{scenario.serial}"
    pod = _pod(scenario, name, f"uid-{name}")
    names = [n.name for n in scenario.nodes]
    filtered = extender.filter(PROFILE, msgspec.json.encode({"Pod": pod, "Nodes": None, "NodeNames": names}))
    assert filtered.status == 200, filtered.body
    events = [filtered.event]
    passed: list[str] = msgspec.json.decode(filtered.body)["NodeNames"] or []
    chosen = ""
    if passed:
        scored = extender.prioritize(PROFILE, msgspec.json.encode({"Pod": pod, "Nodes": None, "NodeNames": passed}))
        assert scored.status == 200, scored.body
        events.append(scored.event)
        if scenario.bind:
            hosts = msgspec.json.decode(scored.body)
            chosen = max(hosts, key=lambda h: h["Score"])["Host"]
            extender.clock = lambda: NOW + 0.01
            binding = {"PodName": name, "PodNamespace": NAMESPACE, "PodUID": f"uid-{name}", "Node": chosen}
            events.append(extender.bind(PROFILE, msgspec.json.encode(binding)).event)
    return Recorded(name, events, passed, chosen)


@dataclass
class Fetched:
    cycle_id: int
    why: dict[str, Any]
    detail: dict[str, Any]


def ingest_and_fetch(api: Any, scenario: Scenario, recorded: Recorded) -> Fetched:
    """Fold the calls with the real ingester, then read them back through the audit API."""
    Path(django_settings.SCHEDLENS_CONFIG).write_text(scenario.profile_yaml(), encoding="utf-8")
    store_served_versions(load_profiles(scenario.profile_yaml()), scenario.profile_yaml())
    cycles_ingest_events(events=recorded.events)
    why = api.get("/api/v1/why/", {"namespace": NAMESPACE, "name": recorded.pod_name})
    assert why.status_code == 200, why.content
    cycle_id = why.json()["cycle"]["id"]
    detail = api.get(f"/api/v1/cycles/{cycle_id}/")
    assert detail.status_code == 200, detail.content
    return Fetched(cycle_id, why.json(), detail.json())


PROPERTY = settings(
    max_examples=50,
    deadline=None,
    database=None,  # no .hypothesis/ directory in the working tree
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
"""The property tests' settings (the export tests run fewer examples)."""


@transaction.atomic
def in_savepoint(body: Callable[[], None]) -> None:
    """Each example writes inside a savepoint that is rolled back: examples never see each other's cycles."""
    body()
    transaction.set_rollback(True)


# --- the test's own knowledge: the figures are what the verbs were fed ---------------------------------------------


def assert_figures_are_the_inputs(scenario: Scenario, recorded: Recorded, explanation: Mapping[str, Any]) -> None:
    cases = {n.name: n for n in scenario.nodes}
    nodes = {n["node"]: n for n in explanation["nodes"]}
    assert set(nodes) == set(cases)
    expected_scored = [n.name for n in scenario.nodes if scenario.passes_filters(n)]
    assert recorded.scored == expected_scored
    scored = [name for name, n in nodes.items() if n["final_score"] is not None]
    assert sorted(scored) == sorted(expected_scored)
    assert explanation["chosen_node"] == recorded.chosen
    if not scored:
        return
    assert explanation["answer_scale"] == scenario.answer_scale
    assert explanation["extender_weight"] == scenario.extender_weight
    herd_on = scenario.bytes_per_pod > 0 and not scenario.stale
    for name in scored:
        n, case = nodes[name], cases[name]
        assert [(t["plugin"], t["weight"]) for t in n["terms"]] == list(scenario.scorers)
        terms = terms_of(n)
        f = terms[TRAFFIC]["traffic"]
        measured = None if scenario.stale else case.traffic
        assert f["measured_bytes"] == measured, name
        assert f["missing_score"] == scenario.missing_score, f"{name}: missingPolicy {scenario.missing_policy}"
        assert f["metric_age_seconds"] == pytest.approx(scenario.metric_age, abs=1e-3)
        if scenario.stale:
            assert f["missing_reason"] == "metrics stale"
        ages = [NOW - (NOW - age) for age in case.bind_ages]
        weighing = [a for a in ages if a < scenario.decay]
        expected_herd = 0.0
        if herd_on and measured is not None:
            weights = [max(0.0, 1.0 - a / scenario.decay) for a in ages]
            expected_herd = float(round(sum(scenario.bytes_per_pod * w for w in weights)))
        assert f["herd_bytes"] == pytest.approx(expected_herd, abs=1.0), name
        if f["herd_bytes"]:
            assert f["herd_binds"] == len(weighing), name
            assert f["herd_newest_bind_age_seconds"] == pytest.approx(min(weighing), abs=1e-3)
        if RESOURCES in terms:
            t = terms[RESOURCES]
            assert t["applicable"] is bool(scenario.pod_resources)
            if t["applicable"]:
                r = t["resources"]
                assert r["requested"] == list(scenario.pod_resources)
                expected = {
                    res: (None if case.cr is None else float(case.cr.resources_score.get(res, 0)))
                    for res in scenario.pod_resources
                }
                assert r["resource_scores"] == expected, name
        if IMAGES in terms:
            t = terms[IMAGES]
            assert t["applicable"] is bool(scenario.pod_images)
            if t["applicable"]:
                wanted = [normalize_image(i) for i in scenario.pod_images]
                assert t["images"]["images"] == wanted
                assert t["images"]["present"] == sum(image in case.images for image in wanted), name
