"""The measurements on a loaded history: every page and endpoint's server time through the test client, the NDJSON
export's rate and memory, dropping the oldest day and verifying the next, and the tables' sizes."""

from __future__ import annotations

import functools
import gc
import random
import statistics
import time
import tracemalloc
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from benchmarks.common import percentile
from benchmarks.dashboard import history as bench_dashboard


def timed_get(client: Any, url: str) -> float:
    started = time.perf_counter()
    response = client.get(url)
    elapsed = (time.perf_counter() - started) * 1000
    assert response.status_code == 200, (url, response.status_code, response.content[:300])
    return elapsed


def measure_page(client: Any, urls: list[str], repeat: int, budget: float) -> list[float]:
    """``repeat`` timings over ``urls`` in turn; a page far over the target stops after ``budget`` seconds (with at
    least one round of its variants), so that one slow page does not hold the run: its n says how many."""
    for url in urls:  # warm-up, and a check
        timed_get(client, url)
    timings: list[float] = []
    for i in range(repeat):
        timings.append(timed_get(client, urls[i % len(urls)]))
        if sum(timings) / 1000 > budget and i + 1 >= min(repeat, max(len(urls), 20)):
            break
    return timings


def rss_mb() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def export(client: Any, start: datetime, hours: float, *, calls: bool = False, trace: bool = False) -> dict[str, Any]:
    from urllib.parse import urlencode

    query = {"started_after": start.isoformat(), "started_before": (start + timedelta(hours=hours)).isoformat()}
    if calls:
        query["include"] = "calls"
    gc.collect()
    before = rss_mb()
    if trace:
        tracemalloc.start()
    began = time.perf_counter()
    response = client.get(f"/api/v1/cycles/export.ndjson?{urlencode(query)}")
    assert response.status_code == 200, response.status_code
    lines = size = 0
    peak_rss = before
    for chunk in response.streaming_content:
        lines += chunk.count(b"\n")
        size += len(chunk)
        if lines % 1000 < chunk.count(b"\n") + 1:
            peak_rss = max(peak_rss, rss_mb())
    seconds = time.perf_counter() - began
    traced = tracemalloc.get_traced_memory()[1] / 1e6 if trace else None
    if trace:
        tracemalloc.stop()
    return {
        "hours": hours,
        "calls": calls,
        "cycles": lines,
        "bytes": size,
        "seconds": seconds,
        "rate": lines / seconds if seconds else 0.0,
        "rss_before": before,
        "rss_peak": max(peak_rss, rss_mb()),
        "traced_peak": traced,
    }


def sizes_report() -> tuple[list[tuple[str, int, int, int, int]], int]:
    """(table, partitions, rows, table bytes, index bytes) per table of the record, and the database's size."""
    from django.db import connection

    out = []
    with connection.cursor() as cursor:
        for parent in (
            "dashboard_schedulingcycle",
            "dashboard_verbcall",
            "dashboard_nodeposting",
            "dashboard_sharedpart",
            "dashboard_nodetally",
            "dashboard_nodereasontally",
            "dashboard_auditcheckpoint",
        ):
            cursor.execute(
                "SELECT count(*) FILTER (WHERE isleaf), coalesce(sum(c.reltuples) FILTER (WHERE isleaf), 0), "
                "coalesce(sum(pg_table_size(relid)) FILTER (WHERE isleaf), 0), "
                "coalesce(sum(pg_indexes_size(relid)) FILTER (WHERE isleaf), 0) "
                "FROM (SELECT relid, isleaf FROM pg_partition_tree(%s) UNION ALL "
                "SELECT %s::regclass, true WHERE NOT EXISTS (SELECT FROM pg_partition_tree(%s))) t "
                "JOIN pg_class c ON c.oid = t.relid",
                [parent, parent, parent],
            )
            leaves, rows, table_bytes, index_bytes = cursor.fetchone()
            out.append((parent, int(leaves), int(max(rows, 0)), int(table_bytes), int(index_bytes)))
        cursor.execute("SELECT pg_database_size(current_database())")
        (database,) = cursor.fetchone()
    return out, int(database)


@functools.cache
def bench_client() -> Any:
    """The one logged-in client of every measurement: the test environment is set up, and the heap frozen, once."""
    return bench_dashboard.superuser_client()


def measure_pages(repeat: int, budget: float) -> list[tuple[str, list[float], int]]:
    from django.db.models import Max, Min

    from dashboard.models import SchedulingCycle
    from dashboard.selectors.cycles import Cursor

    client = bench_client()
    rng = random.Random(5)
    bounds = SchedulingCycle.objects.aggregate(low=Min("id"), high=Max("id"), first=Min("started_at"))
    low, high = bounds["low"], bounds["high"]
    span = (datetime.now(tz=UTC) - bounds["first"]).total_seconds()

    def cycle_at(fraction: float) -> Any:
        target = low + int((high - low) * fraction)
        return SchedulingCycle.objects.filter(id__gte=target).order_by("id").first()

    later = []
    for fraction in (0.99, 0.9, 0.75, 0.5, 0.25, 0.1, 0.01):
        cycle = cycle_at(fraction)
        later.append(Cursor(cycle.started_at, cycle.id).encode())
    sampled = [cycle_at(rng.random()) for _ in range(40)]
    decided = [c for c in sampled if c.prioritize_ms is not None][:24]
    by_size: dict[int, Any] = {}
    for cycle in sampled:
        by_size.setdefault(cycle.candidate_count, cycle)
    chosen = sorted({c.chosen_node for c in sampled if c.chosen_node})[:12]
    considered = [*sorted({c.chosen_node for c in sampled if c.chosen_node})[:6], "node-001", "node-0999"]
    pods = [f"{c.pod_namespace}&pod={c.pod_name}" for c in sampled[:12]]
    apps = ["web-", "api-", "worker-", "cache-", "batch-"]
    namespaces = sorted({c.pod_namespace for c in sampled})
    hours = []
    for _ in range(12):
        start = bounds["first"] + timedelta(seconds=rng.uniform(0, span - 7200))
        hours.append(f"started_after={start.isoformat()}&started_before={(start + timedelta(hours=1)).isoformat()}")
    hours = [h.replace("+", "%2B") for h in hours]
    poll = [f"/history/new/?after={high - k}" for k in (1, 3, 10)]
    pages: list[tuple[str, list[str]]] = [
        ("history, first page", ["/"]),
        ("history, later pages (1 % to 99 % down, keyset)", [f"/?before={c}" for c in later]),
        ("history, poll for new rows", poll),
        ("history, chosen_node (varied nodes)", [f"/?chosen_node={n}" for n in chosen]),
        ("history, pod name contains (app prefixes)", [f"/?pod={a}" for a in apps]),
        ("history, one pod by namespace and full name", [f"/?namespace={p}" for p in pods]),
        ("history, namespace", [f"/?namespace={n}" for n in namespaces]),
        ("history, outcome=bound", ["/?outcome=bound"]),
        ("history, outcome=unschedulable", ["/?outcome=unschedulable"]),
        ("history, outcome=error", ["/?outcome=error"]),
        ("history, profile (default, gpu-aware)", ["/?profile=default", "/?profile=gpu-aware"]),
        ("history, time range (one hour, varied days)", [f"/?{h}" for h in hours]),
        ("history, answer_tie=true", ["/?answer_tie=true"]),
        ("decision page (varied cycles and sizes)", [f"/cycles/{c.id}/" for c in decided]),
        (
            "decision, why not (htmx partial)",
            [
                f"/cycles/{c.id}/why-not/?why_not={c.candidate_nodes or n}"
                for c, n in zip(decided, chosen * 4, strict=False)
            ],
        ),
        ("what-if replay", [f"/cycles/{c.id}/what-if/?mode=profile&profile=gpu-aware" for c in decided[:8]]),
        ("nodes page", ["/nodes/"]),
        ("health page", ["/health/"]),
        ("API: cycles list, first page", ["/api/v1/cycles/"]),
        ("API: cycles list, oldest first", ["/api/v1/cycles/?ordering=started_at"]),
        ("API: cycles list, namespace", [f"/api/v1/cycles/?namespace={n}" for n in namespaces]),
        ("API: cycles list, outcome=unschedulable", ["/api/v1/cycles/?outcome=unschedulable"]),
        ("API: cycles list, profile=gpu-aware", ["/api/v1/cycles/?profile=gpu-aware"]),
        ("API: cycles list, chosen_node", [f"/api/v1/cycles/?chosen_node={n}" for n in chosen]),
        ("API: cycles list, node_considered", [f"/api/v1/cycles/?node_considered={n}" for n in considered]),
        ("API: cycles list, pod_uid", [f"/api/v1/cycles/?pod_uid={c.pod_uid}" for c in sampled[:12]]),
        ("API: cycles list, time range (one hour)", [f"/api/v1/cycles/?{h}" for h in hours]),
        ("API: one cycle with its calls", [f"/api/v1/cycles/{c.id}/" for c in decided]),
        ("API: why (by pod UID)", [f"/api/v1/why/?pod_uid={c.pod_uid}" for c in decided]),
        (
            "API: why (by namespace and name)",
            [f"/api/v1/why/?namespace={c.pod_namespace}&name={c.pod_name}" for c in decided],
        ),
        ("API: nodes list", ["/api/v1/nodes/"]),
        ("API: one node", [f"/api/v1/nodes/{n}/" for n in chosen]),
    ]
    rows = []
    for label, urls in pages:
        timings = measure_page(client, urls, repeat, budget)
        rows.append((label, timings, len(urls)))
        print(
            f"{label:55s} p50 {statistics.median(timings):8.1f} ms  p99 {percentile(timings, 99):8.1f} ms",
            flush=True,
        )
    return rows


def measure_exports() -> list[dict[str, Any]]:
    from django.db.models import Max, Min

    from dashboard.models import SchedulingCycle

    client = bench_client()
    bounds = SchedulingCycle.objects.aggregate(first=Min("started_at"), last=Max("started_at"))
    rng = random.Random(6)
    span = (bounds["last"] - bounds["first"]).total_seconds() - 7 * 3600
    starts = [bounds["first"] + timedelta(seconds=rng.uniform(3600, span)) for _ in range(3)]
    runs = [export(client, start, 1) for start in starts]
    runs.append(export(client, starts[0], 1, calls=True))
    runs += [export(client, starts[0], hours, trace=True) for hours in (1, 2, 6)]
    for run in runs:
        print(
            f"export {run['hours']} h{' +calls' if run['calls'] else ''}: {run['cycles']:,} cycles in "
            f"{run['seconds']:.2f} s = {run['rate']:,.0f}/s, RSS {run['rss_before']:.0f} → {run['rss_peak']:.0f} MB, "
            f"traced peak {run['traced_peak']}",
            flush=True,
        )
    return runs


def measure_retention() -> dict[str, Any]:
    from django.db import connection

    from dashboard.audit.chain import ChainWalk, chain_walk
    from dashboard.models import AuditCheckpoint, VerbCall
    from dashboard.services.partitions import day_partitions
    from dashboard.services.retention import cycles_prune

    days = day_partitions(VerbCall)
    oldest, second = days[0], days[1]
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT min(id), max(id) FROM {second.table}")  # noqa: S608
        low, high = cursor.fetchone()
    began = time.perf_counter()
    result = cycles_prune(older_than=oldest.end)
    drop_seconds = time.perf_counter() - began
    checkpoint = AuditCheckpoint.objects.order_by("-last_call_id").first()
    assert checkpoint is not None, "retention left no checkpoint"
    # The last cycles before midnight have calls recorded after it: retention deletes those row by row after dropping
    # their day, so the checkpoint may lie a few calls into the next day. Verification resumes there.
    assert low - 1 <= checkpoint.last_call_id < high, (checkpoint.last_call_id, low, high)
    walk = ChainWalk(previous=checkpoint.chain_hash)
    began = time.perf_counter()
    chain_walk(walk, after_id=checkpoint.last_call_id, before_id=high + 1)
    verify_seconds = time.perf_counter() - began
    count = high - checkpoint.last_call_id
    out = {
        "day": oldest.day,
        "drop_seconds": drop_seconds,
        "verified_seconds": result.verified_seconds,
        "locked_seconds": result.locked_seconds,
        "cycles_deleted": result.cycles_deleted,
        "calls_deleted": result.calls_deleted,
        "partitions": result.partitions_dropped,
        "held_back": result.partitions_held_back,
        "verify_day": second.day,
        "verify_calls": walk.checked,
        "verify_ok": walk.broken_id is None and walk.last_id == high and walk.checked == count,
        "checkpoint": checkpoint.last_call_id,
        "checkpoint_first_day": low - 1,
        "verify_seconds": verify_seconds,
    }
    print(out, flush=True)
    return out
