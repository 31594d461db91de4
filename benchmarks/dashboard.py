"""Dashboard server time at 1,000,000 recorded cycles: history (first, filtered, deep keyset page) and decision.

Creates (and afterwards drops, unless ``--keep``) a PostgreSQL database, records a few dozen real cycles
through the verbs and the ingester (the templates), then bulk-loads ``--cycles`` cycles with their verb calls
by ``COPY``: each generated row is a template row with a new id, pod, UID and time, so the JSON records,
answers and summaries are real ones. The hash chain of generated calls is not valid (they reuse their
template's ``chain_hash``); nothing here reads it.

Server time is the Django handler's wall time for one GET through the test client (middleware, view,
queries, template rendering), measured ``--repeat`` times per page after one warm-up.

    .venv/bin/python benchmarks/dashboard.py --cycles 1000000 --out benchmarks/results-dashboard.md
"""

from __future__ import annotations

import argparse
import io
import json
import os
import platform
import random
import statistics
import sys
import time
import uuid
from collections import Counter
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

ADMIN_URL = os.environ.get("BENCH_ADMIN_DATABASE_URL", "postgres://postgres@127.0.0.1:5432/postgres")
CHUNK = 20_000
POSTING_BITS = 256
"""Cycles per NodePosting row (``dashboard.services.cycles``)."""


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q / 100 * (len(ordered) - 1)))]


def recreate_database(name: str, *, drop_only: bool = False) -> None:
    import psycopg

    with psycopg.connect(ADMIN_URL, autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        if not drop_only:
            conn.execute(f'CREATE DATABASE "{name}"')


def setup_django(name: str) -> None:
    base = ADMIN_URL.rsplit("/", 1)[0]
    os.environ["DATABASE_URL"] = f"{base}/{name}"
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "dashboard.settings")
    os.environ.setdefault("SCHEDLENS_CONFIG", str(REPO / "deploy" / "profiles.demo.yaml"))
    os.environ.setdefault("SCHEDLENS_INGEST_IN_PROCESS", "false")
    os.environ.setdefault("SCHEDLENS_API_USER_RATE", "1000000/minute")  # measure the API, not its throttle
    import django

    django.setup()


def traffic_and_inputs(node_names: list[str], rng: random.Random) -> tuple[Any, Any]:
    """A traffic store holding one snapshot (every node but the last has a series), and the verbs' inputs with the
    herd estimate on, as in production: each bind raises its node's estimate for the pods after it."""
    from scheduler_core.herd import InMemoryBindLog
    from scheduler_core.traffic import TrafficQuery, TrafficSnapshot
    from scheduler_core.traffic.store import TrafficStore

    store = TrafficStore()
    traffic = {name: rng.uniform(1e5, 4e10) for name in node_names[:-1]}  # the last node: no series
    store.put(TrafficSnapshot(TrafficQuery(), traffic, time.time(), "bench"))
    binds = InMemoryBindLog(300.0)

    class Inputs:
        def for_call(self, profile: object, now: float) -> tuple[object, object]:
            return store, binds.recent_binds(now)

        def record_bind(self, *, node: str, pod: str, at: float) -> None:
            binds.record_bind(node=node, pod=pod, at=at)

    return store, Inputs()


def record_templates(nodes: int, count: int, *, herd: bool = False) -> None:
    """Real cycles through the verbs and the ingester, in both profiles, some unschedulable.

    ``herd``: with the herd estimate on, as in production: each bind raises its node's estimate for the pods after
    it, so the prioritize records carry herd bytes (the history replay benchmark wants them)."""
    import msgspec

    from dashboard.services.cycles import cycles_ingest_events
    from scheduler_core.binding import SimulatedBinder
    from scheduler_core.cluster import StaticCluster
    from scheduler_core.profiles import load_profiles
    from scheduler_core.simulator import make_cluster, make_pod
    from scheduler_core.spool_codec import decode_event, encode_event
    from scheduler_core.verbs import Extender
    from scheduler_core.wire import encode

    rng = random.Random(4)
    synthetic = make_cluster(nodes, seed=11)
    store, inputs = traffic_and_inputs(synthetic.node_names, rng)
    extender = Extender(
        load_profiles((REPO / "deploy" / "profiles.demo.yaml").read_text()),
        cluster=StaticCluster.from_document(synthetic.document()),
        traffic=store,
        binder=SimulatedBinder(),
        inputs=inputs if herd else None,
    )
    for index in range(count):
        profile = "gpu-aware" if index % 4 == 3 else "default"
        pod = make_pod(rng)
        body = encode({"Pod": pod, "Nodes": None, "NodeNames": synthetic.node_names})
        filtered = extender.filter(profile, body)
        events = [filtered.event]
        passed = msgspec.json.decode(filtered.body)["NodeNames"]
        if len(passed) > 1:
            scored = extender.prioritize(profile, encode({"Pod": pod, "Nodes": None, "NodeNames": passed}))
            events.append(scored.event)
            best = max(msgspec.json.decode(scored.body), key=lambda h: h["Score"])["Host"]
        else:
            best = passed[0] if passed else None
        if best is not None:
            meta = pod["metadata"]
            binding = {"PodName": meta["name"], "PodNamespace": meta["namespace"], "PodUID": meta["uid"]}
            events.append(extender.bind(profile, encode({**binding, "Node": best})).event)
        cycles_ingest_events(events=[decode_event(encode_event(e)) for e in events])


def _copy_text(value: Any) -> str:
    if value is None:
        return "\\N"
    if isinstance(value, bool):
        return "t" if value else "f"
    if isinstance(value, bytes | memoryview):  # bytea in COPY's text form: \x and hex, its backslash escaped
        return "\\\\x" + bytes(value).hex()
    if isinstance(value, (dict, list)):
        value = json.dumps(value, separators=(",", ":"))
    elif isinstance(value, datetime):
        value = value.isoformat()
    text = str(value)
    return text.replace("\\", "\\\\").replace("\t", "\\t").replace("\n", "\\n").replace("\r", "\\r")


def template_tallies() -> Iterator[tuple[Any, list[str], dict[str, Any]]]:
    """Each recorded cycle, the nodes its filter record (else its prioritize record) names, and what it adds to the
    node counts, from its calls as every reader gets them and its outcome."""
    from dashboard.models import SchedulingCycle
    from dashboard.selectors.cycles import cycle_read
    from dashboard.services.node_tallies import NodeCounts, tally_call, tally_cycles

    for cycle in SchedulingCycle.objects.prefetch_related("calls"):
        calls = list(cycle.calls.all())
        records = cycle_read(cycle=cycle, calls=calls).records
        recorded = records.filter or records.prioritize
        nodes = recorded.nodes if recorded is not None else []
        counts: dict[str, NodeCounts] = {}
        for call in calls:
            tally_call(counts, vars(call))
        tally_cycles(counts, [(cycle.preferred_node, cycle.outcome, cycle.chosen_node)])
        yield cycle, nodes, counts


def bulk_load(total: int, *, span_days: int) -> float:
    """COPY ``total`` cycles (and their calls) generated from the recorded templates. Returns seconds taken.

    Each copy gets its own candidate slot (its id) and its bits in the node postings, and a copied prioritize body
    refers to the copied filter call (its new event id), as the ingester would have written them.
    """
    from django.db import connection

    from dashboard.services.node_tallies import NodeCounts
    from dashboard.storage.call_body import body_referring_to

    with connection.cursor() as cursor:
        cursor.execute("SELECT * FROM dashboard_schedulingcycle ORDER BY id")
        cycle_columns = [c.name for c in cursor.description]
        templates = cursor.fetchall()
        cursor.execute("SELECT * FROM dashboard_verbcall ORDER BY cycle_id, id")
        call_columns = [c.name for c in cursor.description]
        calls_by_cycle: dict[int, list[tuple[Any, ...]]] = {}
        for row in cursor.fetchall():
            calls_by_cycle.setdefault(row[call_columns.index("cycle_id")], []).append(row)
        cursor.execute("SELECT max(id) FROM dashboard_schedulingcycle")
        first_cycle = cursor.fetchone()[0] + 1
        cursor.execute("SELECT max(id) FROM dashboard_verbcall")
        first_call = cursor.fetchone()[0] + 1

    ci = {name: i for i, name in enumerate(cycle_columns)}
    vi = {name: i for i, name in enumerate(call_columns)}
    # Each template's candidates (for the postings of its copies) and what it adds to the node counts.
    candidates: dict[int, list[str]] = {}
    counts: dict[int, dict[str, NodeCounts]] = {}
    for cycle, nodes, cycle_counts in template_tallies():
        if cycle.candidate_slot is not None and nodes:
            candidates[cycle.id] = nodes
        counts[cycle.id] = cycle_counts
    copies: Counter[int] = Counter()
    # Pre-render every column of every template once; only the changing ones are formatted per row.
    cycle_text = [[_copy_text(v) for v in row] for row in templates]
    call_text = {cid: [[_copy_text(v) for v in row] for row in rows] for cid, rows in calls_by_cycle.items()}
    origin = datetime.now(tz=UTC) - timedelta(days=span_days)
    step = span_days * 86400 / max(1, total)
    raw = connection.connection  # psycopg 3

    started = time.perf_counter()
    cycle_id, call_id = first_cycle, first_call
    for chunk_start in range(0, total, CHUNK):
        cycles_buf, calls_buf, postings_buf = io.StringIO(), io.StringIO(), io.StringIO()
        bits: dict[tuple[str, int], int] = {}
        for n in range(chunk_start, min(total, chunk_start + CHUNK)):
            template_index = n % len(templates)
            template = templates[template_index]
            copies[template[ci["id"]]] += 1
            fields = list(cycle_text[template_index])
            at = origin + timedelta(seconds=n * step)
            offset = at - template[ci["started_at"]]
            fields[ci["id"]] = str(cycle_id)
            if template[ci["id"]] in candidates:
                fields[ci["candidate_slot"]] = str(cycle_id)
                block, bit = divmod(cycle_id, POSTING_BITS)
                for name in set(candidates[template[ci["id"]]]):
                    bits[(name, block)] = bits.get((name, block), 0) | 1 << (POSTING_BITS - 1 - bit)
            fields[ci["pod_name"]] = _copy_text(f"{template[ci['pod_name']][:40]}-{n:07d}")
            fields[ci["pod_uid"]] = str(uuid.UUID(int=n + 1))
            fields[ci["started_at"]] = at.isoformat()
            fields[ci["finished_at"]] = (template[ci["finished_at"]] + offset).isoformat()
            cycles_buf.write("\t".join(fields) + "\n")
            template_calls = calls_by_cycle.get(template[ci["id"]], [])
            new_event_ids = {row[vi["event_id"]]: f"{call_id + i:032x}" for i, row in enumerate(template_calls)}
            for call_row, call_fields in zip(template_calls, call_text.get(template[ci["id"]], []), strict=True):
                out = list(call_fields)
                out[vi["id"]] = str(call_id)
                out[vi["cycle_id"]] = str(cycle_id)
                out[vi["event_id"]] = new_event_ids[call_row[vi["event_id"]]]
                if call_row[vi["verb"]] == "prioritize" and call_row[vi["body"]] is not None:
                    out[vi["body"]] = _copy_text(body_referring_to(bytes(call_row[vi["body"]]), new_event_ids))
                out[vi["started_at"]] = (call_row[vi["started_at"]] + offset).isoformat()
                calls_buf.write("\t".join(out) + "\n")
                call_id += 1
            cycle_id += 1
        with raw.cursor() as cursor:
            columns = ", ".join(f'"{c}"' for c in cycle_columns)
            with cursor.copy(f"COPY dashboard_schedulingcycle ({columns}) FROM STDIN") as copy:
                copy.write(cycles_buf.getvalue())
            columns = ", ".join(f'"{c}"' for c in call_columns)
            with cursor.copy(f"COPY dashboard_verbcall ({columns}) FROM STDIN") as copy:
                copy.write(calls_buf.getvalue())
            for (name, block), value in bits.items():
                postings_buf.write(f"{_copy_text(name)}\t{block}\t{value:0{POSTING_BITS}b}\n")
            cursor.execute(
                "CREATE TEMPORARY TABLE IF NOT EXISTS bench_postings AS "
                "SELECT node, block, bits FROM dashboard_nodeposting WITH NO DATA"
            )
            with cursor.copy("COPY bench_postings (node, block, bits) FROM STDIN") as copy:
                copy.write(postings_buf.getvalue())
            cursor.execute(
                "INSERT INTO dashboard_nodeposting (node, block, bits) SELECT node, block, bit_or(bits) "
                "FROM bench_postings GROUP BY 1, 2 "
                "ON CONFLICT (node, block) DO UPDATE SET bits = dashboard_nodeposting.bits | excluded.bits"
            )
            cursor.execute("TRUNCATE bench_postings")
        raw.commit()
        done = min(total, chunk_start + CHUNK)
        if done % 100_000 == 0 or done == total:
            print(f"  loaded {done:,} cycles in {time.perf_counter() - started:.0f} s", flush=True)
    tallies_add_copies(counts, copies)
    with connection.cursor() as cursor:
        cursor.execute("SELECT setval(pg_get_serial_sequence('dashboard_schedulingcycle', 'id'), %s)", [cycle_id])
        cursor.execute("SELECT setval(pg_get_serial_sequence('dashboard_verbcall', 'id'), %s)", [call_id])
        # What autovacuum did over the 30 days a real history took to grow: a million rows appended at once would
        # otherwise have their first vacuum start at any moment of the measurements.
        cursor.execute("VACUUM (ANALYZE)")
    return time.perf_counter() - started


def tallies_add_copies(counts: dict[Any, dict[str, Any]], copies: Counter[Any]) -> None:
    """Adds to the node tallies what the ingester would have counted for the copies: ``counts`` holds each template's
    per-node counts, ``copies`` how many copies of it were loaded (the last seen times: the templates')."""
    from django.db import transaction

    from dashboard.services.node_tallies import NodeCounts, tallies_add

    added: dict[str, NodeCounts] = {}
    for template, times in copies.items():
        for name, tally in counts[template].items():
            total_tally = added.setdefault(name, NodeCounts())
            total_tally.considered += tally.considered * times
            total_tally.filtered_out += tally.filtered_out * times
            total_tally.placements += tally.placements * times
            total_tally.preferred += tally.preferred * times
            if tally.reasons:
                total_tally.add_reasons({key: count * times for key, count in tally.reasons.items()})
            total_tally.last_seen_at = max(filter(None, [total_tally.last_seen_at, tally.last_seen_at]), default=None)
    with transaction.atomic():
        tallies_add(added)


def superuser_client() -> Any:
    """A test client logged in as a superuser (who may read the audit API, as a member of "auditor" would), with the
    heap so far frozen out of the collector's way as a gunicorn worker freezes its boot heap
    (dashboard/gunicorn_conf.py): a full collection of the load's heap mid-request is this process's, not a
    server's."""
    from django.contrib.auth import get_user_model
    from django.test import Client
    from django.test.utils import setup_test_environment

    from dashboard.gunicorn_conf import post_worker_init

    setup_test_environment()
    user, _ = get_user_model().objects.get_or_create(username="bench")
    user.is_superuser = True
    user.save(update_fields=["is_superuser"])
    client = Client()
    client.force_login(user)
    post_worker_init(None)
    return client


def measure(client: Any, url: str, repeat: int) -> list[float]:
    response = client.get(url)  # warm-up (and a check)
    assert response.status_code == 200, (url, response.status_code)
    timings = []
    for _ in range(repeat):
        started = time.perf_counter()
        response = client.get(url)
        timings.append((time.perf_counter() - started) * 1000)
        assert response.status_code == 200
    return timings


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--cycles", type=int, default=1_000_000)
    parser.add_argument("--nodes", type=int, default=40, help="cluster size of the recorded templates")
    parser.add_argument("--templates", type=int, default=48)
    parser.add_argument("--days", type=int, default=30, help="the history spans this many days")
    parser.add_argument("--repeat", type=int, default=30)
    parser.add_argument("--database", default="schedlens_bench")
    parser.add_argument("--keep", action="store_true", help="keep the database (re-use it with --reuse)")
    parser.add_argument("--reuse", action="store_true", help="measure an existing database without loading")
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args()

    if not args.reuse:
        recreate_database(args.database)
    setup_django(args.database)
    from django.core.management import call_command
    from django.db import connection

    from dashboard.models import SchedulingCycle
    from dashboard.selectors.cycles import Cursor

    load_seconds = None
    try:
        if not args.reuse:
            call_command("migrate", verbosity=0)
            record_templates(args.nodes, args.templates)
            print(f"recorded {args.templates} template cycles; loading {args.cycles:,} …", flush=True)
            load_seconds = bulk_load(args.cycles, span_days=args.days)
        client = superuser_client()
        total = SchedulingCycle.objects.order_by("-id").values_list("id", flat=True).first() or 0
        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_size_pretty(pg_database_size(current_database()))")
            size = cursor.fetchone()[0]
        deep_row = SchedulingCycle.objects.order_by("-started_at", "-id").values_list("started_at", "id")[
            int(total * 0.9)
        ]
        deep = Cursor(deep_row[0], deep_row[1]).encode()
        sample = SchedulingCycle.objects.filter(prioritize_ms__isnull=False).order_by("-started_at", "-id")
        decision_ids = list(sample.values_list("id", flat=True)[:2000:97])
        common = SchedulingCycle.objects.order_by("-id").values_list("chosen_node", flat=True)[:500]
        node = next(n for n in common if n)
        pages: list[tuple[str, list[str]]] = [
            ("history, first page", ["/"]),
            ("history, namespace=payments", ["/?namespace=payments"]),
            ("history, outcome=unschedulable (no row matches)", ["/?outcome=unschedulable"]),
            (f"history, chosen_node={node}", [f"/?chosen_node={node}"]),
            ("history, pod name contains 'web-'", ["/?pod=web-"]),
            ("history, deep keyset page (90 % down)", [f"/?before={deep}"]),
            ("history, poll for new rows", [f"/history/new/?after={total - 3}"]),
            ("decision page", [f"/cycles/{i}/" for i in decision_ids]),
            ("decision, why not (htmx partial)", [f"/cycles/{i}/why-not/?why_not={node}" for i in decision_ids]),
            ("what-if replay", [f"/cycles/{i}/what-if/?mode=profile&profile=gpu-aware" for i in decision_ids]),
            ("nodes page (latest 200 cycles)", ["/nodes/"]),
            ("health page", ["/health/"]),
            ("audit API: cycles list, first page", ["/api/v1/cycles/"]),
            ("audit API: cycles list, namespace=payments", ["/api/v1/cycles/?namespace=payments"]),
            ("audit API: cycles list, oldest first", ["/api/v1/cycles/?ordering=started_at"]),
            ("audit API: one cycle with its calls", [f"/api/v1/cycles/{i}/" for i in decision_ids]),
            (
                f"audit API: cycles list, node_considered={node} (every cycle)",
                [f"/api/v1/cycles/?node_considered={node}"],
            ),
            (
                "audit API: cycles list, node_considered=node-none (no cycle)",
                ["/api/v1/cycles/?node_considered=node-none"],
            ),
        ]
        rows = []
        for label, urls in pages:
            timings: list[float] = []
            per_url = max(1, args.repeat // len(urls))
            for url in urls:
                timings += measure(client, url, per_url)
            rows.append(
                (
                    label,
                    statistics.median(timings),
                    percentile(timings, 95),
                    percentile(timings, 99),
                    max(timings),
                    len(timings),
                )
            )
            print(f"{label:45s} p50 {rows[-1][1]:8.1f} ms  p99 {rows[-1][3]:8.1f} ms", flush=True)
    finally:
        connection.close()
        if not args.keep and not args.reuse:
            recreate_database(args.database, drop_only=True)

    when = datetime.now(tz=UTC).strftime("%Y-%m-%d %H:%M UTC")
    lines = [
        "# Dashboard benchmark (issue 4)",
        "",
        f"Measured {when} on {platform.node()} ({os.cpu_count()} cores, Python {platform.python_version()}) with "
        f"`.venv/bin/python benchmarks/dashboard.py --cycles {args.cycles} --nodes {args.nodes}`: "
        f"{total:,} cycles (about {args.days} days of history, 3 verb calls each, {args.nodes}-node candidates; "
        f"database {size}) in PostgreSQL on the same machine.",
        "",
        (
            f"Bulk load (COPY of cycles and calls, indexes in place, then VACUUM (ANALYZE)): {load_seconds:.0f} s."
            if load_seconds
            else "Loaded earlier (--reuse)."
        ),
        "",
        "Server time of one GET through Django (middleware, view, queries, template), milliseconds:",
        "",
        "| page | p50 | p95 | p99 | max | n |",
        "| --- | --- | --- | --- | --- | --- |",
        *(
            f"| {label} | {p50:.1f} | {p95:.1f} | {p99:.1f} | {worst:.1f} | {n} |"
            for label, p50, p95, p99, worst, n in rows
        ),
        "",
        "Every history page is one keyset query on the `cycle_newest` index ((-started_at, -id)) with LIMIT 51 and",
        "no COUNT(*). Outcome and chosen node have their own (value, started_at, id) indexes (migration 0004), so",
        "a value no row has costs one index probe; a filter on a column without one (pod substring) walks the",
        "newest-first index until it has 51 matches. Node considered reads the node's postings (one bit per cycle,",
        "256 cycles per row): a rare node's cycles are listed from them, a common node is checked row by row as the",
        "walk meets its cycles (dashboard.filters).",
        "",
    ]
    text = "\n".join(lines)
    print(text)
    if args.out:
        args.out.write_text(text)


if __name__ == "__main__":
    main()
