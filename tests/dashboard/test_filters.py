"""Each cycle filter returns exactly the matching cycles; bad values are a 400 naming the parameter."""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta

import pytest
from django.db import connection

from dashboard import filters as filters_module
from dashboard.filters import CycleFilterSet, NodeFilterSet
from dashboard.models import NodeTally, SchedulingCycle
from tests.support.kube_scheduler import NODES, T0
from tests.support.stored_calls import stored_record

MINUTE = timedelta(minutes=1)
# Reads through the audit API or its explanations: its profiles and throttle counters at zero, as tests/dashboard/api/.
pytestmark = pytest.mark.usefixtures("api_settings")


@pytest.fixture
def history(kube_scheduler) -> dict[str, SchedulingCycle]:
    s = kube_scheduler
    return {
        "web-1": s.schedule(at=T0, name="web-1"),
        "web-2": s.schedule(at=T0 + MINUTE, name="web-2", nodes=["node-1", "node-3"]),
        "api-1": s.schedule(at=T0 + 2 * MINUTE, name="api-1", namespace="billing"),
        "gpu-1": s.schedule(
            at=T0 + 3 * MINUTE,
            name="gpu-1",
            namespace="billing",
            gpu=True,
            profile="gpu-aware",
            nodes=[*NODES, "node-6"],
        ),
        "web-3": s.schedule(at=T0 + 4 * MINUTE, name="web-3", gpu=True, nodes=["node-2", "node-4"]),
        "web-1-retry": s.schedule(at=T0 + 5 * MINUTE, name="web-1", nodes=["node-4"], bind=False),
        "batch-1": s.schedule(at=T0 + 6 * MINUTE, name="batch-1", namespace="jobs", nodes=["node-10"]),
        "refused": s.refused(at=T0 + 7 * MINUTE),
    }


def candidates(cycle: SchedulingCycle) -> list[str]:
    return stored_record(cycle.calls.get(verb="filter")).get("nodes", [])


def cycle_ids(api, params: dict) -> list[int]:
    response = api.get("/api/v1/cycles/", {**params, "page_size": 500})
    assert response.status_code == 200, response.content
    return [row["id"] for row in response.json()["results"]]


Predicate = Callable[[SchedulingCycle], bool]
CASES: list[tuple[dict, Predicate]] = [
    ({}, lambda c: True),
    ({"started_after": (T0 + 2 * MINUTE).isoformat()}, lambda c: c.started_at >= T0 + 2 * MINUTE),
    ({"started_before": (T0 + 2 * MINUTE).isoformat()}, lambda c: c.started_at < T0 + 2 * MINUTE),
    (
        {"started_after": (T0 + MINUTE).isoformat(), "started_before": (T0 + 4 * MINUTE).isoformat()},
        lambda c: T0 + MINUTE <= c.started_at < T0 + 4 * MINUTE,
    ),
    ({"namespace": "billing"}, lambda c: c.pod_namespace == "billing"),
    ({"pod": "WEB-"}, lambda c: "web-" in c.pod_name),
    ({"pod": "web-1"}, lambda c: c.pod_name == "web-1"),
    ({"profile": "gpu-aware"}, lambda c: c.profile == "gpu-aware"),
    ({"outcome": "bound"}, lambda c: c.outcome == "bound"),
    ({"outcome": ["unschedulable", "pending"]}, lambda c: c.outcome in {"unschedulable", "pending"}),
    ({"outcome": "error"}, lambda c: c.outcome == "error"),
    ({"node_mode": "names"}, lambda c: c.node_mode == "names"),
    ({"chosen_node": "node-3"}, lambda c: c.chosen_node == "node-3"),
    ({"preferred_node": "node-4"}, lambda c: c.preferred_node == "node-4"),
    ({"node_considered": "node-3"}, lambda c: "node-3" in candidates(c)),
    ({"node_considered": "node-6"}, lambda c: "node-6" in candidates(c)),
    ({"node_considered": "node-1"}, lambda c: "node-1" in candidates(c)),
    ({"node_considered": "node-10"}, lambda c: "node-10" in candidates(c)),
    ({"min_metric_age": "0"}, lambda c: c.metric_age_seconds is not None),
    (
        {"namespace": "shop", "outcome": "bound", "node_considered": "node-2"},
        lambda c: c.pod_namespace == "shop" and c.outcome == "bound" and "node-2" in candidates(c),
    ),
]


@pytest.mark.django_db
@pytest.mark.parametrize(("params", "matches"), CASES, ids=[str(p) for p, _ in CASES])
def test_each_filter_returns_exactly_the_matching_cycles_newest_first(api, history, params, matches):
    every = sorted(history.values(), key=lambda c: (c.started_at, c.id), reverse=True)
    expected = [c.id for c in every if matches(c)]
    assert expected, "each case should match something"
    assert cycle_ids(api, params) == expected


@pytest.mark.django_db
def test_the_pod_uid_filter_returns_that_pods_cycles_only(api, history):
    uid = history["web-2"].pod_uid
    assert cycle_ids(api, {"pod_uid": uid}) == [history["web-2"].id]


@pytest.mark.django_db
def test_a_node_name_that_only_prefixes_a_candidate_does_not_match(api, history):
    assert history["batch-1"].id not in cycle_ids(api, {"node_considered": "node-1"})
    assert cycle_ids(api, {"node_considered": "node-1"}) != [], "node-1 itself matches"
    assert cycle_ids(api, {"node_considered": "node"}) == []


@pytest.mark.django_db
def test_the_filterset_works_on_a_plain_queryset_for_the_dashboard(history):
    filterset = CycleFilterSet({"namespace": "billing", "outcome": ["bound"]}, queryset=SchedulingCycle.objects.all())
    assert filterset.is_valid()
    assert set(filterset.qs) == {history["api-1"], history["gpu-1"]}
    # A page of one outcome is read newest first up to its LIMIT: a DISTINCT would sort all of that outcome first.
    assert "DISTINCT" not in str(filterset.qs.query)


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("params", "field"),
    [
        ({"started_after": "yesterday"}, "started_after"),
        ({"started_before": "2026-13-01"}, "started_before"),
        ({"outcome": "lost"}, "outcome"),
        ({"node_mode": "both"}, "node_mode"),
        ({"node_considered": "node-1|node-2"}, "node_considered"),
        ({"node_considered": "%"}, "node_considered"),
        ({"min_metric_age": "-1"}, "min_metric_age"),
        ({"min_metric_age": "NaN"}, "min_metric_age"),
        ({"page_size": "0"}, "page_size"),
        ({"page_size": "501"}, "page_size"),
        ({"ordering": "pod_name"}, "ordering"),
        ({"cursor": "not-a-cursor"}, "cursor"),
    ],
)
def test_a_bad_value_is_a_400_naming_the_parameter(api, params, field):
    response = api.get("/api/v1/cycles/", params)
    assert response.status_code == 400
    assert response.json()["field"] == field
    assert response.json()["error"]


@pytest.mark.django_db
def test_unknown_parameters_are_ignored_not_turned_into_queries(api, history):
    assert cycle_ids(api, {"pod_name__startswith": "zzz", "id__gt": "100000"}) == cycle_ids(api, {})


@pytest.mark.django_db
@pytest.mark.parametrize(("share", "index"), [(2.0, "cycle_candidate_slot"), (0.0, "nodeposting_node_block")])
def test_node_considered_is_answered_by_the_node_postings_on_postgresql(history, monkeypatch, share, index):
    if connection.vendor != "postgresql":
        pytest.skip("the node postings exist on PostgreSQL only")
    monkeypatch.setattr(filters_module, "LISTED_BELOW_SHARE", share)  # 2.0: a rare node (listed); 0.0: a common one
    queryset = CycleFilterSet({"node_considered": "node-3"}, queryset=SchedulingCycle.objects.all()).qs
    with connection.cursor() as cursor:
        cursor.execute("SET LOCAL enable_seqscan = off")  # a handful of rows: make the planner show its index
    plan = queryset.explain()
    assert "nodeposting_node_block" in plan, "the node's postings are read by their index"
    assert index in plan


@pytest.mark.django_db
@pytest.mark.parametrize("node", ["node-1", "node-3", "node-6", "node-10"])
def test_node_considered_gives_the_same_cycles_listed_or_walked(history, monkeypatch, node):
    if connection.vendor != "postgresql":
        pytest.skip("the node postings exist on PostgreSQL only")
    monkeypatch.setattr(filters_module, "LISTED_BELOW_SHARE", 2.0)
    listed = cycle_ids_where(node)
    monkeypatch.setattr(filters_module, "LISTED_BELOW_SHARE", 0.0)
    expected = [c.id for c in SchedulingCycle.objects.all() if node in candidates(c)]
    assert cycle_ids_where(node) == listed == expected


def cycle_ids_where(node: str) -> list[int]:
    queryset = CycleFilterSet({"node_considered": node}, queryset=SchedulingCycle.objects.all()).qs
    return list(queryset.values_list("id", flat=True))


# --- every filterable field has a filter (NetBox style) ---------------------------------------------

EXEMPT: dict[type, dict[str, str]] = {
    SchedulingCycle: {
        "id": "read one cycle at /cycles/{id}/",
        "finished_at": "time ranges filter on started_at (the cursor's key)",
        "candidate_count": "a count, not something audited for",
        "feasible_count": "a count, not something audited for",
        "filter_ms": "a timing: read it, export it",
        "prioritize_ms": "a timing: read it, export it",
        "bind_ms": "a timing: read it, export it",
        "preempt_ms": "a timing: read it, export it",
        "error": "free text: filter by outcome=error",
        "candidate_slot": "node_considered reads it (the cycle's bit in NodePosting)",
    },
    NodeTally: {"id": "nodes are read by name at /nodes/{node}/"},
}


@pytest.mark.parametrize("filterset", [CycleFilterSet, NodeFilterSet])
def test_every_filterable_model_field_has_a_filter(filterset):
    model = filterset._meta.model
    filtered = {f.field_name for f in filterset.base_filters.values()}
    fields = {f.name for f in model._meta.concrete_fields}
    missing = fields - filtered - set(EXEMPT[model])
    assert not missing, f"{model.__name__} fields without a filter in {filterset.__name__}: {sorted(missing)}"
    assert filtered <= fields, f"filters on fields that do not exist: {sorted(filtered - fields)}"
    assert not set(EXEMPT[model]) & filtered, "a filtered field is still listed as exempt"
    assert set(EXEMPT[model]) <= fields, "an exemption names a field that no longer exists"
