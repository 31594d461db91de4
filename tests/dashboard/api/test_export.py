"""CSV and NDJSON exports: the filtered cycles, oldest first, streamed in constant memory."""

from __future__ import annotations

import copy
import csv
import gc
import io
import json
import re
import tracemalloc
from datetime import timedelta

import pytest

from dashboard.api import exports
from dashboard.models import Outcome, SchedulingCycle, VerbCall
from tests.support.kube_scheduler import T0

MINUTE = timedelta(minutes=1)


@pytest.fixture
def history(kube_scheduler) -> list[SchedulingCycle]:
    return [kube_scheduler.schedule(at=T0 + i * MINUTE, name=f"web-{i}") for i in range(6)]


def body(response) -> str:
    assert response.status_code == 200, response.content
    assert response.streaming
    return b"".join(response.streaming_content).decode()


@pytest.mark.django_db
def test_csv_export_streams_the_cycles_of_the_time_range_oldest_first(api, history):
    response = api.get(
        "/api/v1/cycles/export.csv",
        {"started_after": (T0 + MINUTE).isoformat(), "started_before": (T0 + 4 * MINUTE).isoformat()},
    )
    assert response["Content-Type"] == "text/csv; charset=utf-8"
    assert re.fullmatch(r'attachment; filename="schedlens-cycles-\d{8}T\d{6}Z\.csv"', response["Content-Disposition"])
    rows = list(csv.DictReader(io.StringIO(body(response))))
    assert [int(r["id"]) for r in rows] == [c.id for c in history[1:4]]
    first, cycle = rows[0], history[1]
    assert first["pod_name"] == "web-1"
    assert first["outcome"] == "bound"
    assert first["chosen_node"] == cycle.chosen_node
    assert first["started_at"] == cycle.started_at.isoformat()
    assert first["preempt_ms"] == "", "a missing value is an empty cell"
    assert float(first["filter_ms"]) == cycle.filter_ms


@pytest.mark.django_db
def test_csv_export_answers_csv_whatever_the_client_accepts(api, history):
    response = api.get("/api/v1/cycles/export.csv", HTTP_ACCEPT="text/csv")
    assert len(body(response).splitlines()) == 1 + len(history)


@pytest.mark.django_db
def test_a_pod_name_shaped_like_a_formula_is_neutralized_in_csv(api, kube_scheduler):
    kube_scheduler.schedule(at=T0, name='=HYPERLINK("http://evil")')
    [row] = list(csv.DictReader(io.StringIO(body(api.get("/api/v1/cycles/export.csv")))))
    assert row["pod_name"] == '\'=HYPERLINK("http://evil")'


@pytest.mark.django_db
def test_ndjson_export_writes_one_cycle_object_a_line(api, history):
    lines = body(api.get("/api/v1/cycles/export.ndjson", {"outcome": "bound"})).splitlines()
    objects = [json.loads(line) for line in lines]
    assert [o["id"] for o in objects] == [c.id for c in history]
    assert objects[0]["pod_namespace"] == "shop"
    assert "calls" not in objects[0]


@pytest.mark.django_db
def test_ndjson_export_can_carry_each_cycles_calls_with_their_chain_hashes(api, history):
    response = api.get("/api/v1/cycles/export.ndjson", {"include": "calls"})
    assert response["Content-Type"] == "application/x-ndjson"
    assert response["Content-Disposition"].endswith('.ndjson"')
    first = json.loads(body(response).splitlines()[0])
    assert [c["verb"] for c in first["calls"]] == ["filter", "prioritize", "bind"]
    assert all(len(c["chain_hash"]) == 64 for c in first["calls"])
    assert first["calls"][0]["record"]["nodes"] == ["node-1", "node-2", "node-3", "node-4", "node-5"]


@pytest.mark.django_db
def test_ndjson_export_can_carry_each_cycles_explanation_as_the_why_api_gives_it(api, history):
    lines = body(api.get("/api/v1/cycles/export.ndjson", {"include": "explanation,calls"})).splitlines()
    exported = json.loads(lines[-1])
    why = api.get("/api/v1/why/", {"namespace": "shop", "name": history[-1].pod_name}).json()
    assert exported["explanation"] == why["explanation"]
    assert [c["verb"] for c in exported["calls"]] == ["filter", "prioritize", "bind"]


@pytest.mark.django_db
def test_csv_export_with_the_explanation_has_a_row_per_candidate_named_like_the_api(api, history):
    rows = list(csv.DictReader(io.StringIO(body(api.get("/api/v1/cycles/export.csv", {"include": "explanation"})))))
    cycle = history[0]
    why = api.get("/api/v1/why/", {"namespace": "shop", "name": cycle.pod_name}).json()["explanation"]
    mine = [r for r in rows if int(r["id"]) == cycle.id]
    assert [r["node"] for r in mine] == [n["node"] for n in why["nodes"]]
    scored = [(row, node) for row, node in zip(mine, why["nodes"], strict=True) if node["final_score"] is not None]
    assert scored, "the cycle was prioritized"
    assert all(row["summary"] == why["summary"] for row in mine)
    for row, node in scored:
        assert row["final_arithmetic"] == node["final_arithmetic"]
        assert float(row["final_score"]) == node["final_score"]
        assert int(row["extender_score"]) == node["extender_score"]
        [term] = [t for t in node["terms"] if t["plugin"] == "NetworkTraffic"]
        assert float(row["NetworkTraffic.normalized"]) == term["normalized"]
        assert float(row["NetworkTraffic.traffic.measured_bytes"]) == term["traffic"]["measured_bytes"]
        assert float(row["NetworkTraffic.traffic.estimate_bytes"]) == term["traffic"]["estimate_bytes"]
        assert row["NetworkTraffic.arithmetic"] == term["arithmetic"]


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("fmt", "params", "field"),
    [
        ("csv", {"started_after": "last tuesday"}, "started_after"),
        ("ndjson", {"include": "everything"}, "include"),
        ("csv", {"include": "calls"}, "include"),
    ],
)
def test_an_export_with_a_bad_parameter_is_a_json_400(api, fmt, params, field):
    response = api.get(f"/api/v1/cycles/export.{fmt}", params)
    assert response.status_code == 400
    assert response.json()["field"] == field


def _bulk_cycles(count: int) -> None:
    # Tens of thousands of rows through the extender would take minutes; the export reads summary columns
    # only, so rows written directly measure the same thing.
    SchedulingCycle.objects.bulk_create(
        (
            SchedulingCycle(
                pod_namespace="bulk",
                pod_name=f"pod-{i:06d}",
                pod_uid=f"uid-{i:06d}",
                profile="default",
                node_mode="names",
                started_at=T0 + timedelta(milliseconds=i),
                finished_at=T0 + timedelta(milliseconds=i + 3),
                outcome=Outcome.BOUND,
                chosen_node="node-2",
                preferred_node="node-2",
                candidate_count=40,
                feasible_count=38,
                filter_ms=0.4,
                prioritize_ms=0.3,
                bind_ms=0.1,
                metric_age_seconds=4.2,
            )
            for i in range(count)
        ),
        batch_size=2000,
    )


def _peak_while_streaming(api, fmt: str, params: dict[str, str] | None = None) -> tuple[int, int]:
    """Peak traced memory while consuming the export chunk by chunk, and the bytes it produced."""
    tracemalloc.start()
    try:
        response = api.get(f"/api/v1/cycles/export.{fmt}", params or {})
        size = 0
        for chunk in response.streaming_content:
            size += len(chunk)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    return peak, size


@pytest.mark.django_db
@pytest.mark.parametrize("fmt", ["csv", "ndjson"])
def test_export_memory_does_not_grow_with_the_number_of_rows(api, settings, fmt):
    settings.SCHEDLENS_EXPORT_CHUNK_SIZE = 250
    _bulk_cycles(1_000)
    _peak_while_streaming(api, fmt)  # first use: imports and lazy set-up, not the export
    small_peak, small_size = _peak_while_streaming(api, fmt)
    _bulk_cycles(9_000)
    large_peak, large_size = _peak_while_streaming(api, fmt)
    assert large_size > 9 * small_size
    # Ten times the rows, the same working set: one fetch chunk and one write batch.
    assert large_peak < 1.5 * small_peak, (small_peak, large_peak)


def _copies_of(cycle: SchedulingCycle, count: int) -> None:
    """``count`` copies of a recorded cycle and its calls, written directly (recording each would take minutes)."""
    calls = list(cycle.calls.all())
    copies = []
    for i in range(count):
        twin = copy.copy(cycle)
        twin.pk, twin.started_at = None, cycle.started_at + timedelta(milliseconds=i + 1)
        copies.append(twin)
    SchedulingCycle.objects.bulk_create(copies, batch_size=500)
    twins = []
    for twin in copies:
        for call in calls:
            call_twin = copy.copy(call)
            call_twin.pk, call_twin.cycle = None, twin
            twins.append(call_twin)
    VerbCall.objects.bulk_create(twins, batch_size=500)


@pytest.mark.django_db
@pytest.mark.parametrize(("fmt", "include"), [("ndjson", "calls"), ("ndjson", "explanation"), ("csv", "explanation")])
def test_export_with_calls_does_not_keep_the_cycles_it_wrote(api, settings, monkeypatch, kube_scheduler, fmt, include):
    settings.SCHEDLENS_EXPORT_CHUNK_SIZE = 20
    monkeypatch.setattr(exports, "ROWS_PER_WRITE", 20)
    monkeypatch.setattr(exports, "WRITE_BYTES", 16 * 1024)
    recorded = kube_scheduler.schedule(at=T0, name="web")
    _copies_of(recorded, 99)
    # A worker collects reference cycles rarely (config.gunicorn_conf.post_worker_init): memory the export
    # leaves to the collector grows with the rows until then, so here it is not collected at all.
    gc.collect()
    gc.disable()
    try:
        _peak_while_streaming(api, fmt, {"include": include})  # first use: imports and lazy set-up
        small_peak, small_size = _peak_while_streaming(api, fmt, {"include": include})
        _copies_of(recorded, 300)
        large_peak, large_size = _peak_while_streaming(api, fmt, {"include": include})
    finally:
        gc.enable()
    assert large_size > 3.5 * small_size
    # Four times the cycles, the same working set: one fetch chunk of cycles and calls, one write batch.
    assert large_peak < 1.5 * small_peak, (small_peak, large_peak)
