"""The history the dashboard studies read: real cycles recorded through the verbs and the ingester (the templates),
and bulk-loaded copies of them.

``record_templates`` records a few dozen real cycles; ``bulk_load`` copies them by ``COPY`` into ``--cycles`` cycles
with their verb calls: each generated row is a template row with a new id, pod, UID and time, so the JSON records,
answers and summaries are real ones. The hash chain of generated calls is not valid (they reuse their template's
``chain_hash``); ``benchmarks.history_scale`` writes a valid one. Used by ``benchmarks.dashboard``,
``benchmarks.replay`` and ``benchmarks.history_scale``.
"""

from __future__ import annotations

import io
import json
import os
import random
import time
import uuid
from collections import Counter
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

from benchmarks.common import REPO, database_url

CHUNK = 20_000
POSTING_BITS = 256
"""Cycles per NodePosting row (``dashboard.ingest.cycles``)."""


def setup_django(name: str) -> None:
    os.environ["DATABASE_URL"] = database_url(name)
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
    os.environ.setdefault("SCHEDLENS_CONFIG", str(REPO / "deploy" / "profiles.demo.yaml"))
    os.environ.setdefault("SCHEDLENS_INGEST_IN_PROCESS", "false")
    os.environ.setdefault("SCHEDLENS_API_USER_RATE", "1000000/minute")  # measure the API, not its throttle
    import django

    django.setup()


def traffic_and_inputs(node_names: list[str], rng: random.Random) -> tuple[Any, Any]:
    """A traffic store holding one snapshot (every node but the last has a series), and the verbs' inputs with the
    herd estimate on, as in production: each bind raises its node's estimate for the pods after it."""
    from scheduler_core.extender.scoring.herd import InMemoryBindLog
    from scheduler_core.traffic import TrafficQuery, TrafficSnapshot
    from scheduler_core.traffic.store import TrafficStore

    store = TrafficStore()
    traffic = {name: rng.uniform(1e5, 4e10) for name in node_names[:-1]}  # the last node: no series
    store.put(TrafficSnapshot(TrafficQuery(), traffic, time.time(), "bench"))
    binds = InMemoryBindLog(300.0)

    class Inputs:
        def for_call(self, profile: object, now: float) -> tuple[object, object]:
            return store, binds.recent_binds(now)

        def record_bind(self, *, node: str, pod: str, at: float, bytes: float | None = None, name: str = "") -> None:
            binds.record_bind(node=node, pod=pod, at=at, bytes=bytes, name=name)

    return store, Inputs()


def record_templates(nodes: int, count: int, *, herd: bool = False) -> None:
    """Real cycles through the verbs and the ingester, in both profiles, some unschedulable.

    ``herd``: with the herd estimate on, as in production: each bind raises its node's estimate for the pods after
    it, so the prioritize records carry herd bytes (the history replay benchmark wants them)."""
    import msgspec
    from django.conf import settings

    from dashboard.ingest.cycles import cycles_ingest_records
    from dashboard.services.profile_versions import profile_version_add
    from scheduler_core.cli.simulator import make_cluster, make_pod
    from scheduler_core.extender.protocol.binding import SimulatedBinder
    from scheduler_core.extender.protocol.cluster import StaticCluster
    from scheduler_core.extender.protocol.wire import encode
    from scheduler_core.extender.record.spool_codec import encode_event
    from scheduler_core.extender.scoring.profile_versions import version_notes
    from scheduler_core.extender.scoring.profiles import load_profiles
    from scheduler_core.extender.verbs import Extender

    deriving = settings.SCHEDLENS_SPOOL_FORM == "deriving"  # bodies as the ingester stores that form

    rng = random.Random(4)
    synthetic = make_cluster(nodes, seed=11)
    store, inputs = traffic_and_inputs(synthetic.node_names, rng)
    text = (REPO / "deploy" / "profiles.demo.yaml").read_text()
    profiles = load_profiles(text)
    # The versions the records name, stored as a serving process notes them: a replay's baseline is the version.
    for note in version_notes(profiles, text, server="benchmark", at=time.time()):
        profile_version_add(note=note)
    extender = Extender(
        profiles,
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
        cycles_ingest_records(records=[encode_event(e, deriving=deriving) for e in events])


def copy_text(value: Any) -> str:
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
    from dashboard.storage.call_body_read import body_referring_to

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
    cycle_text = [[copy_text(v) for v in row] for row in templates]
    call_text = {cid: [[copy_text(v) for v in row] for row in rows] for cid, rows in calls_by_cycle.items()}
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
            fields[ci["pod_name"]] = copy_text(f"{template[ci['pod_name']][:40]}-{n:07d}")
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
                    out[vi["body"]] = copy_text(body_referring_to(bytes(call_row[vi["body"]]), new_event_ids))
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
                postings_buf.write(f"{copy_text(name)}\t{block}\t{value:0{POSTING_BITS}b}\n")
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
    (config/gunicorn_conf.py): a full collection of the load's heap mid-request is this process's, not a
    server's."""
    from django.contrib.auth import get_user_model
    from django.test import Client
    from django.test.utils import setup_test_environment

    from config.gunicorn_conf import post_worker_init

    setup_test_environment()
    user, _ = get_user_model().objects.get_or_create(username="bench")
    user.is_superuser = True
    user.save(update_fields=["is_superuser"])
    client = Client()
    client.force_login(user)
    post_worker_init(None)
    return client
