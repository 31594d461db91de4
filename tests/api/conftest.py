"""The audit API's fixtures: personas with tokens, and cycles recorded the way production records them.

Cycles come from the real extender (``scheduler_core.verbs.Extender``) driven like kube-scheduler and are
folded by the real ingest service, so the API reads exactly what production writes.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

import msgspec
import pytest
from django.contrib.auth.models import Group, User
from django.core.cache import cache
from rest_framework.test import APIClient

from dashboard.audit.auditors import AUDITOR_GROUP, auditor_token_issue
from dashboard.ingest.cycles import cycles_ingest_events
from dashboard.models import SchedulingCycle
from scheduler_core.binding import SimulatedBinder
from scheduler_core.cluster import NodeInfo, NodeResourcesSpec, StaticCluster
from scheduler_core.profiles import load_profiles
from scheduler_core.record import VerbEvent
from scheduler_core.traffic import TrafficSnapshot
from scheduler_core.traffic.store import TrafficStore
from scheduler_core.verbs import Extender

T0 = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)
"""Recorded cycles start from here; tests place them by offsets, never by the wall clock."""
NODES = ["node-1", "node-2", "node-3", "node-4", "node-5"]
PROFILES = """
profiles:
- name: default
  plugins:
    filter: {enabled: [{name: TrafficThreshold}, {name: NodeResourceFitByCR}]}
    score: {enabled: [{name: NetworkTraffic, weight: 1}]}
- name: gpu-aware
  plugins:
    filter: {enabled: [{name: NodeResourceFitByCR}], disabled: [{name: "*"}]}
    score:
      enabled: [{name: NodeResourceFitByCR, weight: 4}, {name: NetworkTraffic, weight: 1}]
      disabled: [{name: "*"}]
"""
WINDOW_SECONDS = 300
TRAFFIC = {
    "node-1": 4.0e6,
    "node-2": 1.0e6,
    "node-3": 1.2e6,
    "node-4": 1.4e6,
    "node-5": 130e6 * WINDOW_SECONDS,  # above TrafficThreshold's 125 MB/s
}
GPU = "example.com/gpu"
CLUSTER = StaticCluster(
    [NodeInfo(name) for name in [*NODES, "node-6"]],
    {
        "node-1": NodeResourcesSpec({GPU: True}, {GPU: 90}),
        "node-2": NodeResourcesSpec({GPU: False}, {}),
        "node-3": NodeResourcesSpec({GPU: True}, {GPU: 40}),
        "node-4": NodeResourcesSpec({}, {}),
        "node-5": NodeResourcesSpec({GPU: True}, {GPU: 10}),
        # node-6 has no NodeResources object
    },
)


@dataclass
class KubeScheduler:
    """Calls the extender's verbs the way kube-scheduler does, at the times a test chooses."""

    traffic: dict[str, float]

    def __post_init__(self) -> None:
        self.profiles = load_profiles(PROFILES)
        self._serial = 0

    def _extender(self, at: datetime) -> Extender:
        # A fresh extender per cycle: no bind remembered in process (herd estimates) carries over.
        store = TrafficStore()
        for profile in self.profiles.values():
            for query in profile.traffic_queries():
                store.put(TrafficSnapshot(query, dict(self.traffic), at.timestamp(), "test"))
        return Extender(self.profiles, cluster=CLUSTER, traffic=store, binder=SimulatedBinder(), clock=at.timestamp)

    def events(
        self,
        *,
        at: datetime,
        name: str,
        namespace: str = "shop",
        uid: str | None = None,
        nodes: Sequence[str] = NODES,
        profile: str = "default",
        gpu: bool = False,
        bind: bool = True,
    ) -> list[VerbEvent]:
        """One attempt: filter, prioritize (when a node is left) and bind to our best node."""
        self._serial += 1
        uid = uid or f"uid-{name}-{self._serial}"
        container: dict[str, object] = {"name": "app", "image": "nginx:1.25.4"}
        if gpu:
            container["resources"] = {"requests": {GPU: "1"}}
        pod = {
            "metadata": {"name": name, "namespace": namespace, "uid": uid, "resourceVersion": "1"},
            "spec": {"containers": [container]},
        }
        args = msgspec.json.encode({"Pod": pod, "Nodes": None, "NodeNames": list(nodes)})
        extender = self._extender(at)
        filtered = extender.filter(profile, args)
        events = [filtered.event]
        passed = msgspec.json.decode(filtered.body)["NodeNames"] or []
        if passed:
            extender.clock = (at + timedelta(milliseconds=5)).timestamp
            scored = extender.prioritize(profile, msgspec.json.encode({"Pod": pod, "Nodes": None, "NodeNames": passed}))
            events.append(scored.event)
            if bind:
                hosts = msgspec.json.decode(scored.body)
                best = max(hosts, key=lambda h: h["Score"])["Host"]
                extender.clock = (at + timedelta(milliseconds=10)).timestamp
                binding = {"PodName": name, "PodNamespace": namespace, "PodUID": uid, "Node": best}
                events.append(extender.bind(profile, msgspec.json.encode(binding)).event)
        return events

    def refused(self, *, at: datetime, body: bytes = b"{") -> SchedulingCycle:
        """A call kube-scheduler's request could not be decoded for: an error cycle without a pod."""
        event = self._extender(at).filter("default", body).event
        cycles_ingest_events(events=[event])
        return SchedulingCycle.objects.get(calls__event_id=event.event_id)

    def schedule(self, **kwargs: object) -> SchedulingCycle:
        """Record one attempt through the ingest service and return its cycle."""
        events = self.events(**kwargs)  # type: ignore[arg-type]
        cycles_ingest_events(events=events)
        return SchedulingCycle.objects.get(calls__event_id=events[0].event_id)


@pytest.fixture
def kube_scheduler() -> KubeScheduler:
    return KubeScheduler(dict(TRAFFIC))


@pytest.fixture(autouse=True)
def _api_settings(settings, tmp_path) -> Iterator[None]:
    """The test profiles, and throttle counters that start at zero in every test."""
    config = tmp_path / "profiles.yaml"
    config.write_text(PROFILES, encoding="utf-8")
    settings.SCHEDLENS_CONFIG = str(config)
    cache.clear()
    yield
    cache.clear()


# --- personas -----------------------------------------------------------------------------------------


@pytest.fixture
def auditor(db) -> User:
    user = User.objects.create_user("ada-auditor")
    user.groups.add(Group.objects.get_or_create(name=AUDITOR_GROUP)[0])
    return user


@pytest.fixture
def outsider(db) -> User:
    """Authenticated, active, not an auditor."""
    return User.objects.create_user("oscar-outsider")


@pytest.fixture
def superuser(db) -> User:
    return User.objects.create_superuser("sam-super", password="not-used")


def token_client(user: User | None) -> APIClient:
    client = APIClient()
    if user is not None:
        key = auditor_token_issue(username=user.username).key if user.groups.exists() else _plain_token(user)
        client.credentials(HTTP_AUTHORIZATION=f"Token {key}")
    return client


def _plain_token(user: User) -> str:
    from rest_framework.authtoken.models import Token

    return Token.objects.get_or_create(user=user)[0].key


@pytest.fixture
def api(auditor) -> APIClient:
    """An auditor's token client: what most tests read through."""
    return token_client(auditor)


# --- the explanation property tests (test_explanations_add_up, test_explanations_exported) ---------------------------

# Their shared helpers are plain modules: have pytest rewrite their asserts too, so a failure shows the values compared.
pytest.register_assert_rewrite("tests.api.explained_cycles", "tests.api.explanation_checks")


@pytest.fixture
def fast_api(api: APIClient, settings) -> APIClient:
    """The auditor's client, with throttles out of the way (a hundred-odd requests in one test)."""
    rates = {"anon": "100000/second", "user": "100000/second", "audit-verify": "100000/second"}
    settings.REST_FRAMEWORK = {**settings.REST_FRAMEWORK, "DEFAULT_THROTTLE_RATES": rates}
    return api
