"""History at scale (issue 20): ten million cycles over a month, day-partitioned, every page's p50/p99, the NDJSON
export, retention of one day and verification of one day of the audit chain, table sizes.

Checks free disk space first, then creates (and afterwards drops, unless ``--keep``) its own PostgreSQL database,
migrates it, and records real template cycles through the verbs and the ingester at three cluster sizes (100, 300
and 1000 nodes, each with the candidates kube-scheduler's adaptive ``percentageOfNodesToScore`` hands an extender):
mostly bound, some unschedulable (every candidate filtered out), a few errors (a bind to a node gone from the
cluster). The templates are read back, their rows removed, the day partitions covering the span created, and
``--cycles`` copies bulk-loaded by ``COPY`` in id order over ``--days`` days, each a template with a new id, pod, UID
and time (``benchmarks/dashboard.py``'s approach). Unlike that benchmark the audit chain is valid: each call's
``chain_hash`` is linked in id order from the genesis, with the content ``dashboard.services.audit_chain`` hashes,
and each call's ``recorded_at`` is its cycle's end plus an ingest lag, growing with the id. The node postings (a bit
per cycle), the shared parts the bodies refer to and the per-node tallies are loaded too, the tallies computed from
the templates times their copies. The cluster size changes every posting block (256 cycles), so every page sees the
sizes mixed while each block's postings are those of one cluster.

Server time is the Django handler's wall time for one GET through the test client, as in
``benchmarks/dashboard.py``, over ``--repeat`` requests per page spread over varied parameters.

    flock /tmp/bench.lock .venv/bin/python benchmarks/history_scale.py --out benchmarks/results-scale.md
"""

from __future__ import annotations

import argparse
import gc
import hashlib
import importlib.util
import io
import queue
import random
import shutil
import statistics
import sys
import threading
import time
import tracemalloc
import uuid
from collections import Counter
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, timedelta
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from benchmarks.common import database_url, machine, now, percentile, recreate_database, table

_spec = importlib.util.spec_from_file_location("bench_dashboard", REPO / "benchmarks" / "dashboard.py")
bench_dashboard = importlib.util.module_from_spec(_spec)  # type: ignore[arg-type]
_spec.loader.exec_module(bench_dashboard)  # type: ignore[union-attr]
copy_text = bench_dashboard._copy_text

POSTING_BITS = 256
SIZES = (100, 300, 1000)
SIZE_WEIGHTS = (3, 4, 3)
"""How often each cluster size owns a posting block."""
DECKS = 4
"""Arrangements of templates over a block's 256 cycles, per size."""
BLOCKS_PER_CHUNK = 80
INGEST_LAG = timedelta(milliseconds=400)
"""Between a cycle's last call and the ingester storing its calls (the spool's batching)."""
BYTES_PER_CYCLE = 4000
"""The disk estimate per cycle before anything is loaded (tables, indexes, postings, WAL): generous on purpose."""
DISK_MARGIN = 1.5


def candidates_scored(nodes: int) -> int:
    """How many feasible nodes kube-scheduler looks for before scoring (``numFeasibleNodesToFind`` with the default
    adaptive ``percentageOfNodesToScore``): every node below 100, else 50 % less 1 % per 125 nodes, at least 5 %
    and at least 100 nodes."""
    if nodes < 100:
        return nodes
    percentage = max(5, 50 - nodes // 125)
    return min(nodes, max(100, nodes * percentage // 100))


def data_directory() -> Path:
    import psycopg

    from benchmarks.common import ADMIN_URL

    with psycopg.connect(ADMIN_URL, autocommit=True) as conn:
        (directory,) = conn.execute("SHOW data_directory").fetchone()  # type: ignore[misc]
    return Path(directory)


def check_disk(cycles: int, bytes_per_cycle: int) -> str:
    try:
        where = data_directory()
        free = shutil.disk_usage(where).free
    except Exception:
        where = Path("/")
        free = shutil.disk_usage(where).free
    need = int(cycles * bytes_per_cycle * DISK_MARGIN)
    text = (
        f"disk: {cycles:,} cycles × {bytes_per_cycle:,} B × {DISK_MARGIN} margin = {need / 1e9:.1f} GB needed, "
        f"{free / 1e9:.1f} GB free at {where}"
    )
    if free < need:
        raise SystemExit(f"refusing to load: {text} (fewer --cycles, or free some space)")
    return text


# --- templates ---------------------------------------------------------------------------------------


def record_templates(nodes: int, count: int, seed: int) -> None:
    """Real cycles through the verbs and the ingester at one cluster size, with the herd estimate on as in
    production: ``count`` pods, one in 12 unschedulable, one in 24 bound to a node the cluster no longer has."""
    import msgspec

    from dashboard.services.cycles import cycles_ingest_events
    from scheduler_core.binding import SimulatedBinder
    from scheduler_core.cluster import StaticCluster
    from scheduler_core.herd import InMemoryBindLog
    from scheduler_core.profiles import load_profiles
    from scheduler_core.simulator import make_cluster, make_pod
    from scheduler_core.spool_codec import decode_event, encode_event
    from scheduler_core.traffic import TrafficQuery, TrafficSnapshot
    from scheduler_core.traffic.store import TrafficStore
    from scheduler_core.verbs import Extender
    from scheduler_core.wire import encode

    rng = random.Random(seed)
    synthetic = make_cluster(nodes, seed=seed)
    names = synthetic.node_names
    store = TrafficStore()
    traffic = {name: rng.uniform(1e5, 4e10) for name in names[:-1]}  # the last node: no series
    store.put(TrafficSnapshot(TrafficQuery(), traffic, time.time(), "bench"))
    binds = InMemoryBindLog(300.0)

    class Inputs:
        def for_call(self, profile: object, now: float) -> tuple[object, object]:
            return store, binds.recent_binds(now)

        def record_bind(self, *, node: str, pod: str, at: float) -> None:
            binds.record_bind(node=node, pod=pod, at=at)

    cluster = StaticCluster.from_document(synthetic.document())
    extender = Extender(
        load_profiles((REPO / "deploy" / "profiles.demo.yaml").read_text()),
        cluster=cluster,
        traffic=store,
        binder=SimulatedBinder(cluster),
        inputs=Inputs(),  # type: ignore[arg-type]
    )
    scored = candidates_scored(nodes)
    for index in range(count):
        profile = "gpu-aware" if index % 4 == 3 else "default"
        pod = make_pod(rng)
        unschedulable = index % 12 == 5
        if unschedulable:  # a device no node enables
            pod["spec"]["containers"][0]["resources"]["requests"]["example.com/fpga"] = "1"
        # kube-scheduler hands the extender the feasible nodes it found from a rotating start index
        start = rng.randrange(nodes)
        offered = [names[(start + i) % nodes] for i in range(scored)]
        filtered = extender.filter(profile, encode({"Pod": pod, "Nodes": None, "NodeNames": offered}))
        events = [filtered.event]
        passed = msgspec.json.decode(filtered.body)["NodeNames"] or []
        best = None
        if len(passed) > 1:
            answer = extender.prioritize(profile, encode({"Pod": pod, "Nodes": None, "NodeNames": passed}))
            events.append(answer.event)
            best = max(msgspec.json.decode(answer.body), key=lambda h: h["Score"])["Host"]
        elif passed:
            best = passed[0]
        if best is not None:
            if index % 24 == 7:
                best = "node-drained-meanwhile"
            meta = pod["metadata"]
            binding = {"PodName": meta["name"], "PodNamespace": meta["namespace"], "PodUID": meta["uid"]}
            events.append(extender.bind(profile, encode({**binding, "Node": best})).event)
        cycles_ingest_events(events=[decode_event(encode_event(e)) for e in events])


@dataclass
class Template:
    size: int
    cycle: list[str]
    """The cycle's COPY fields, pre-rendered."""
    started_at: datetime
    finished_at: datetime
    pod_name: str
    outcome: str
    candidates: list[str]
    calls: list[TemplateCall] = field(default_factory=list)


@dataclass
class TemplateCall:
    fields: list[str]
    started_at: datetime
    event_id: str
    verb: str
    body: bytes | None
    values: dict[str, Any]
    """What ``call_content`` hashes, as the verifier reads it."""
    content: list[str]
    """``call_content`` split around the cycle id, event id, start and (prioritize) body digest."""
    rewrites_body: bool


_MARK_CYCLE = 987654321987654
_MARK_EVENT = "e" * 31 + "f"
_MARK_TIME = datetime(2001, 2, 3, 4, 5, 6, 789012, tzinfo=UTC)


def _split_content(values: dict[str, Any], rewrites_body: bool) -> list[str]:
    """The call's canonical content with markers where copies differ, cut there: [a, cycle, b, event, c, time, d]
    (and a leading digest slot when the body is rewritten)."""
    from dashboard.services.audit_chain import call_content

    marked = {**values, "cycle_id": _MARK_CYCLE, "event_id": _MARK_EVENT, "started_at": _MARK_TIME}
    text = call_content(marked).decode("ascii")
    pieces: list[str] = []
    if rewrites_body:
        digest = hashlib.sha256(bytes(values["body"])).hexdigest()
        head, rest = text.split(digest, 1)
        pieces += [head]
        text = rest
    for mark in (repr(float(_MARK_CYCLE)), f'"{_MARK_EVENT}"', str(int(_MARK_TIME.timestamp() * 1_000_000))):
        head, text = text.split(mark, 1)
        pieces.append(head)
    pieces.append(text)
    return pieces


def read_templates() -> tuple[list[Template], list[str], list[str], dict[int, Any]]:
    """The recorded templates, the columns of cycles and calls, and each template's per-node counts."""
    from django.db import connection

    from dashboard.models import SchedulingCycle, VerbCall
    from dashboard.services.audit_chain import CALL_COLUMNS
    from dashboard.services.node_tallies import NodeCounts, tally_call, tally_cycles
    from dashboard.storage.call_body import body_referring_to

    with connection.cursor() as cursor:
        cursor.execute("SELECT * FROM dashboard_schedulingcycle ORDER BY id")
        cycle_columns = [c.name for c in cursor.description]
        cycle_rows = cursor.fetchall()
        cursor.execute("SELECT * FROM dashboard_verbcall ORDER BY id")
        call_columns = [c.name for c in cursor.description]
        call_rows = cursor.fetchall()
    ci = {name: i for i, name in enumerate(cycle_columns)}
    vi = {name: i for i, name in enumerate(call_columns)}
    values = {v["id"]: v for v in VerbCall.objects.order_by("id").values("id", *CALL_COLUMNS)}
    templates: dict[int, Template] = {}
    counts: dict[int, dict[str, NodeCounts]] = {}
    for cycle in SchedulingCycle.objects.prefetch_related("calls"):
        calls = list(cycle.calls.all())
        records = {call.verb: call.record for call in calls}
        nodes = (records.get("filter") or records.get("prioritize") or {}).get("nodes", [])
        counts[cycle.id] = {}
        for call in calls:
            tally_call(counts[cycle.id], {**vars(call), "record": call.record})
        tally_cycles(counts[cycle.id], [(cycle.preferred_node, cycle.outcome, cycle.chosen_node)])
        templates[cycle.id] = Template(
            size=0,
            cycle=[],
            started_at=cycle.started_at,
            finished_at=cycle.finished_at,
            pod_name=cycle.pod_name,
            outcome=cycle.outcome,
            candidates=nodes if cycle.candidate_slot is not None else [],
        )
    for row in cycle_rows:
        templates[row[ci["id"]]].cycle = [copy_text(v) for v in row]
    by_cycle: dict[int, list[tuple[Any, ...]]] = {}
    for row in call_rows:
        by_cycle.setdefault(row[vi["cycle_id"]], []).append(row)
    for cycle_id, rows in by_cycle.items():
        renamed = {row[vi["event_id"]]: "0" * 32 for row in rows}
        for row in rows:
            body = bytes(row[vi["body"]]) if row[vi["body"]] is not None else None
            rewrites = row[vi["verb"]] == "prioritize" and body is not None and body_referring_to(body, renamed) != body
            templates[cycle_id].calls.append(
                TemplateCall(
                    fields=[copy_text(v) for v in row],
                    started_at=row[vi["started_at"]],
                    event_id=row[vi["event_id"]],
                    verb=row[vi["verb"]],
                    body=body,
                    values=values[row[vi["id"]]],
                    content=_split_content(values[row[vi["id"]]], rewrites),
                    rewrites_body=rewrites,
                )
            )
    ordered = [templates[i] for i in sorted(templates)]
    return ordered, cycle_columns, call_columns, {i: counts[k] for i, k in enumerate(sorted(templates))}


# --- the bulk load -----------------------------------------------------------------------------------


@dataclass
class Deck:
    size: int
    slots: list[int]
    """Template index of each of a block's 256 cycles."""
    postings: dict[str, str]
    """Each candidate node's bits over the block."""
    tally: Counter[int]


def make_decks(templates: list[Template], rng: random.Random) -> dict[int, list[Deck]]:
    decks: dict[int, list[Deck]] = {}
    for size in SIZES:
        own = [i for i, t in enumerate(templates) if t.size == size]
        bound = [i for i in own if templates[i].outcome == "bound"]
        unschedulable = [i for i in own if templates[i].outcome == "unschedulable"]
        errors = [i for i in own if templates[i].outcome == "error"]
        decks[size] = []
        for _ in range(DECKS):
            slots = []
            for _slot in range(POSTING_BITS):
                roll = rng.random()
                pool = errors if roll < 0.01 and errors else unschedulable if roll < 0.06 and unschedulable else bound
                slots.append(rng.choice(pool))
            masks: dict[str, int] = {}
            for offset, index in enumerate(slots):
                for name in set(templates[index].candidates):
                    masks[name] = masks.get(name, 0) | 1 << (POSTING_BITS - 1 - offset)
            postings = {name: f"{bits:0{POSTING_BITS}b}" for name, bits in masks.items()}
            decks[size].append(Deck(size, slots, postings, Counter(slots)))
    return decks


_BASE27 = "bcdfghjklmnpqrstvwxz2456789"


def _suffix(n: int) -> str:
    out = []
    for _ in range(5):
        n, digit = divmod(n, 27)
        out.append(_BASE27[digit])
    return "".join(out)


@dataclass
class LoadResult:
    seconds: float
    cycles: int
    calls: int
    postings: int
    first_day: date
    end: datetime
    outcomes: Counter[str]
    sizes: Counter[int]


def bulk_load(
    templates: list[Template],
    cycle_columns: list[str],
    call_columns: list[str],
    counts: dict[int, Any],
    *,
    total: int,
    first_day: date,
    end: datetime,
    url: str,
) -> LoadResult:
    import psycopg
    from django.db import connection, transaction

    from dashboard.services.audit_chain import GENESIS
    from dashboard.services.node_tallies import NodeCounts, tallies_add
    from dashboard.storage.call_body import body_referring_to

    ci = {name: i for i, name in enumerate(cycle_columns)}
    vi = {name: i for i, name in enumerate(call_columns)}
    decks = make_decks(templates, random.Random(20))
    block_rng = random.Random(21)
    origin = datetime.combine(first_day, datetime.min.time(), tzinfo=UTC)
    step = (end - origin).total_seconds() / total
    cycle_copy = f"COPY dashboard_schedulingcycle ({', '.join(cycle_columns)}) FROM STDIN"
    call_copy = f"COPY dashboard_verbcall ({', '.join(call_columns)}) FROM STDIN"
    posting_copy = "COPY dashboard_nodeposting (node, block, bits) FROM STDIN"
    work: queue.Queue[tuple[str, str, str] | None] = queue.Queue(maxsize=2)
    failure: list[BaseException] = []

    def writer() -> None:
        # A connection of its own: COPY waits on the socket without the GIL, while the main thread renders the next
        # chunk.
        try:
            with psycopg.connect(url) as conn:
                while (item := work.get()) is not None:
                    with conn.cursor() as cursor:
                        for statement, text in zip((cycle_copy, call_copy, posting_copy), item, strict=True):
                            with cursor.copy(statement) as copy:
                                copy.write(text)
                    conn.commit()
        except BaseException as exc:
            failure.append(exc)
            while work.get() is not None:
                pass

    thread = threading.Thread(target=writer, daemon=True)
    thread.start()
    started = time.perf_counter()
    head = GENESIS
    sha = hashlib.sha256
    copies: Counter[int] = Counter()
    outcomes: Counter[str] = Counter()
    sizes: Counter[int] = Counter()
    postings = 0
    call_id = 1
    last_recorded = origin
    n = 0  # cycles written; cycle ids are 1..total, so block 0 holds 255 of them
    first_block, last_block = 0, total // POSTING_BITS
    block = first_block
    checked = False
    size_choices = [size for size, weight in zip(SIZES, SIZE_WEIGHTS, strict=True) for _ in range(weight)]
    while block <= last_block:
        cycles_buf, calls_buf, postings_buf = io.StringIO(), io.StringIO(), io.StringIO()
        for block in range(block, min(last_block + 1, block + BLOCKS_PER_CHUNK)):  # noqa: B020
            deck = block_rng.choice(decks[block_rng.choice(size_choices)])
            low = max(1, block * POSTING_BITS)
            high = min(total + 1, (block + 1) * POSTING_BITS)
            if low >= high:
                continue
            for name, bits in deck.postings.items():
                postings_buf.write(f"{copy_text(name)}\t{block}\t{bits}\n")
            postings += len(deck.postings)
            for cycle_id in range(low, high):
                index = deck.slots[cycle_id % POSTING_BITS]
                template = templates[index]
                copies[index] += 1
                outcomes[template.outcome] += 1
                sizes[template.size] += 1
                at = origin + timedelta(seconds=(cycle_id - 1) * step)
                offset = at - template.started_at
                fields = list(template.cycle)
                fields[ci["id"]] = str(cycle_id)
                if template.candidates:
                    fields[ci["candidate_slot"]] = str(cycle_id)
                fields[ci["pod_name"]] = copy_text(f"{template.pod_name[:-5]}{_suffix(cycle_id)}")
                fields[ci["pod_uid"]] = str(uuid.UUID(int=cycle_id))
                fields[ci["started_at"]] = at.isoformat()
                finished = template.finished_at + offset
                fields[ci["finished_at"]] = finished.isoformat()
                cycles_buf.write("\t".join(fields))
                cycles_buf.write("\n")
                recorded = max(finished + INGEST_LAG, last_recorded + timedelta(microseconds=1))
                new_ids = {call.event_id: f"{call_id + i:032x}" for i, call in enumerate(template.calls)}
                for position, call in enumerate(template.calls):
                    out = list(call.fields)
                    event_id = new_ids[call.event_id]
                    call_start = call.started_at + offset
                    out[vi["id"]] = str(call_id)
                    out[vi["cycle_id"]] = str(cycle_id)
                    out[vi["event_id"]] = event_id
                    out[vi["started_at"]] = call_start.isoformat()
                    stamp = recorded + timedelta(microseconds=position)
                    out[vi["recorded_at"]] = stamp.isoformat()
                    pieces = call.content
                    micros = str((call_start - _EPOCH) // _MICROSECOND)
                    if call.rewrites_body:
                        body = body_referring_to(call.body, new_ids)  # type: ignore[arg-type]
                        out[vi["body"]] = copy_text(body)
                        content = "".join(
                            (
                                pieces[0],
                                sha(body).hexdigest(),
                                pieces[1],
                                repr(float(cycle_id)),
                                pieces[2],
                                f'"{event_id}"',
                                pieces[3],
                                micros,
                                pieces[4],
                            )
                        )
                    else:
                        content = "".join(
                            (pieces[0], repr(float(cycle_id)), pieces[1], f'"{event_id}"', pieces[2], micros, pieces[3])
                        )
                    if not checked:
                        expected = _check_content(
                            call, cycle_id, event_id, call_start, body if call.rewrites_body else None
                        )
                        assert content == expected, (content, expected)
                    head = sha(head.encode("ascii") + b"\n" + content.encode("ascii")).hexdigest()
                    out[vi["chain_hash"]] = head
                    calls_buf.write("\t".join(out))
                    calls_buf.write("\n")
                    call_id += 1
                last_recorded = recorded + timedelta(microseconds=len(template.calls))
                n += 1
            checked = True
        block += 1
        if failure:
            break
        work.put((cycles_buf.getvalue(), calls_buf.getvalue(), postings_buf.getvalue()))
        if n // 500_000 != max(0, n - BLOCKS_PER_CHUNK * POSTING_BITS) // 500_000 or n == total:
            print(f"  loaded {n:,} cycles in {time.perf_counter() - started:.0f} s", flush=True)
    work.put(None)
    thread.join()
    if failure:
        raise failure[0]
    added: dict[str, NodeCounts] = {}
    for index, times in copies.items():
        for name, tally in counts[index].items():
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
    with connection.cursor() as cursor:
        cursor.execute("SELECT setval(pg_get_serial_sequence('dashboard_schedulingcycle', 'id'), %s)", [n])
        cursor.execute("SELECT setval('dashboard_verbcall_id_seq', %s)", [call_id - 1])
        cursor.execute("UPDATE dashboard_sharedpart SET last_used_at = %s", [end])
        # What autovacuum did over the month the history took to grow.
        cursor.execute("VACUUM (ANALYZE)")
    return LoadResult(time.perf_counter() - started, n, call_id - 1, postings, first_day, end, outcomes, sizes)


_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_MICROSECOND = timedelta(microseconds=1)


def _check_content(call: TemplateCall, cycle_id: int, event_id: str, start: datetime, body: bytes | None) -> str:
    """The split content put together again is exactly what ``call_content`` gives for the copy."""
    from dashboard.services.audit_chain import call_content

    values = {**call.values, "cycle_id": cycle_id, "event_id": event_id, "started_at": start}
    if body is not None:
        values["body"] = body
    return call_content(values).decode("ascii")


# --- measurements ------------------------------------------------------------------------------------


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


# --- main --------------------------------------------------------------------------------------------


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--cycles", type=int, default=10_000_000)
    parser.add_argument("--days", type=int, default=30, help="the history spans this many days, ending now")
    parser.add_argument("--templates", type=int, default=48, help="template cycles recorded per cluster size")
    parser.add_argument("--repeat", type=int, default=200, help="requests per page (p99 over them)")
    parser.add_argument(
        "--page-budget", type=float, default=60.0, help="seconds of requests per page before it stops early"
    )
    parser.add_argument("--bytes-per-cycle", type=int, default=BYTES_PER_CYCLE, help="disk estimate per cycle")
    parser.add_argument("--database", default="schedlens_h20c")
    parser.add_argument("--keep", action="store_true", help="keep the database (measure it again with --reuse)")
    parser.add_argument("--reuse", action="store_true", help="measure an existing database without loading")
    parser.add_argument("--no-retention", action="store_true", help="skip the retention step (keeps all days)")
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args()
    if not args.database.startswith("schedlens_h20c"):
        raise SystemExit("--database: the name starts with schedlens_h20c")

    disk = check_disk(args.cycles, args.bytes_per_cycle) if not args.reuse else ""
    print(disk, flush=True)
    if not args.reuse:
        recreate_database(args.database)
    url = database_url(args.database)
    bench_dashboard.setup_django(args.database)
    from django.core.management import call_command
    from django.db import connection

    from dashboard.services.partitions import partitions_ensure

    load: LoadResult | None = None
    results: dict[str, Any] = {"disk": disk}
    try:
        if not args.reuse:
            call_command("migrate", verbosity=0)
            began = time.perf_counter()
            for seed, size in enumerate(SIZES, start=11):
                record_templates(size, args.templates, seed)
            templates, cycle_columns, call_columns, counts = read_templates()
            for index, template in enumerate(templates):
                template.size = SIZES[index // args.templates]
            results["templates_seconds"] = time.perf_counter() - began
            print(
                f"recorded {len(templates)} templates in {results['templates_seconds']:.0f} s: "
                f"{Counter((t.size, t.outcome) for t in templates)}",
                flush=True,
            )
            with connection.cursor() as cursor:
                # The copies start the record (and the chain) afresh; the shared parts stay, the bodies refer to them.
                cursor.execute(
                    "TRUNCATE dashboard_schedulingcycle, dashboard_verbcall, dashboard_nodeposting, "
                    "dashboard_nodetally, dashboard_nodereasontally"
                )
            end = datetime.now(tz=UTC).replace(microsecond=0)
            first_day = end.date() - timedelta(days=args.days - 1)
            partitions_ensure(today=first_day, days_ahead=args.days)
            print(f"loading {args.cycles:,} cycles from {first_day} to {end:%Y-%m-%d %H:%M} …", flush=True)
            load = bulk_load(
                templates,
                cycle_columns,
                call_columns,
                counts,
                total=args.cycles,
                first_day=first_day,
                end=end,
                url=url,
            )
            print(f"loaded in {load.seconds:.0f} s", flush=True)
            save_load(load, results["templates_seconds"])
        else:
            load, results["templates_seconds"] = read_load()
        results["sizes"] = sizes_report()
        write(args, load, results)
        results["pages"] = measure_pages(args.repeat, args.page_budget)
        write(args, load, results)
        results["exports"] = measure_exports()
        write(args, load, results)
        if not args.no_retention:
            results["retention"] = measure_retention()
    finally:
        connection.close()
        if not args.keep and not args.reuse:
            recreate_database(args.database, drop_only=True)
    text = report(args, load, results)
    print(text)
    if args.out:
        args.out.write_text(text)


_clients: list[Any] = []


def _client() -> Any:
    if _clients:
        return _clients[0]
    from django.contrib.auth import get_user_model
    from django.test import Client
    from django.test.utils import setup_test_environment

    from dashboard.gunicorn_conf import post_worker_init

    setup_test_environment()
    user, _ = get_user_model().objects.get_or_create(username="bench")
    user.is_superuser = True  # may read the audit API (as a member of "auditor" would)
    user.save(update_fields=["is_superuser"])
    client = Client()
    client.force_login(user)
    # The load's heap frozen out of the collector's way, as a gunicorn worker freezes its boot heap.
    post_worker_init(None)
    _clients.append(client)
    return client


def measure_pages(repeat: int, budget: float) -> list[tuple[str, list[float], int]]:
    from django.db.models import Max, Min

    from dashboard.models import SchedulingCycle
    from dashboard.ui.selectors import Cursor

    client = _client()
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

    client = _client()
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

    from dashboard.models import AuditCheckpoint, VerbCall
    from dashboard.services.audit_chain import ChainWalk, chain_walk
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


def save_load(load: LoadResult, templates_seconds: float) -> None:
    """The load's figures, kept in the database for a later ``--reuse`` to report."""
    import json

    from django.db import connection

    doc = {
        "seconds": load.seconds,
        "cycles": load.cycles,
        "calls": load.calls,
        "postings": load.postings,
        "first_day": load.first_day.isoformat(),
        "end": load.end.isoformat(),
        "outcomes": dict(load.outcomes),
        "sizes": {str(k): v for k, v in load.sizes.items()},
        "templates_seconds": templates_seconds,
    }
    with connection.cursor() as cursor:
        cursor.execute("CREATE TABLE IF NOT EXISTS bench_load (doc jsonb)")
        cursor.execute("INSERT INTO bench_load VALUES (%s)", [json.dumps(doc)])


def read_load() -> tuple[LoadResult | None, float | None]:
    import json

    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute("SELECT to_regclass('bench_load') IS NOT NULL")
        if not cursor.fetchone()[0]:
            return None, None
        cursor.execute("SELECT doc FROM bench_load LIMIT 1")
        found = cursor.fetchone()
    if found is None:
        return None, None
    doc = found[0] if isinstance(found[0], dict) else json.loads(found[0])
    load = LoadResult(
        doc["seconds"],
        doc["cycles"],
        doc["calls"],
        doc["postings"],
        date.fromisoformat(doc["first_day"]),
        datetime.fromisoformat(doc["end"]),
        Counter(doc["outcomes"]),
        Counter({int(k): v for k, v in doc["sizes"].items()}),
    )
    return load, doc["templates_seconds"]


def write(args: argparse.Namespace, load: LoadResult | None, results: dict[str, Any]) -> None:
    """The report so far: a run cut short still leaves what it measured."""
    if args.out:
        args.out.write_text(report(args, load, results))


def _ms(value: float) -> str:
    return f"{value:.1f}"


def report(args: argparse.Namespace, load: LoadResult | None, results: dict[str, Any]) -> str:
    command = f"flock /tmp/bench.lock .venv/bin/python benchmarks/history_scale.py --cycles {args.cycles}"
    if args.days != 30:
        command += f" --days {args.days}"
    command += " --out benchmarks/results-scale.md"
    sizes, database = results["sizes"]
    cycles = next(rows for name, _, rows, _, _ in sizes if name == "dashboard_schedulingcycle")
    lines = [
        "# History at scale (issue 20)",
        "",
        f"Measured {now()} on {machine()}, PostgreSQL 15 on the same machine, with `{command}`"
        + (f" (scale reached: {args.cycles:,} cycles)." if args.cycles != 10_000_000 else "."),
        "",
        f"Disk check before loading: {results['disk']}.",
        "",
    ]
    if load is not None:
        lines += [
            "## Load",
            "",
            "Loaded by this run."
            if not args.reuse
            else "Loaded by the same command before this measurement (`--reuse`).",
            "",
            "",
            *table(
                ["what", "value"],
                [
                    ["cycles", f"{load.cycles:,}"],
                    ["verb calls (chain valid, linked in id order)", f"{load.calls:,}"],
                    ["node posting rows", f"{load.postings:,}"],
                    ["span", f"{load.first_day} 00:00 to {load.end:%Y-%m-%d %H:%M} UTC ({args.days} day partitions)"],
                    [
                        "cluster sizes (cycles)",
                        ", ".join(
                            f"{size} nodes, {candidates_scored(size)} candidates: {load.sizes[size]:,}"
                            for size in SIZES
                        ),
                    ],
                    ["outcomes", ", ".join(f"{k}: {v:,}" for k, v in load.outcomes.most_common())],
                    [
                        "template cycles recorded through the verbs and the ingester",
                        f"{args.templates * len(SIZES)} in {results['templates_seconds']:.0f} s",
                    ],
                    ["load time (COPY, chain, postings, tallies, then VACUUM ANALYZE)", f"{load.seconds:.0f} s"],
                    ["load rate", f"{load.cycles / load.seconds:,.0f} cycles/s"],
                ],
            ),
            "",
        ]
    lines += [
        "## Pages and endpoints",
        "",
        f"Server time of one GET through Django (middleware, view, queries, template or serializer), milliseconds, "
        f"{args.repeat} requests per row spread over its variants (after one warm-up each; a row whose requests "
        f"took over {args.page_budget:.0f} s in all stopped early, its n says where). Target: p99 ≤ 100 ms.",
        "",
        *table(
            ["page", "variants", "p50", "p95", "p99", "max", "n", "p99 ≤ 100 ms"],
            [
                [
                    label,
                    variants,
                    _ms(statistics.median(t)),
                    _ms(percentile(t, 95)),
                    _ms(percentile(t, 99)),
                    _ms(max(t)),
                    len(t),
                    "yes" if percentile(t, 99) <= 100 else "**no**",
                ]
                for label, t, variants in results.get("pages", [])
            ],
        ),
        "",
        "## NDJSON export",
        "",
        "`/api/v1/cycles/export.ndjson?started_after=…&started_before=…` read to the end through the test client. "
        "Target: ≥ 20,000 cycles/s in constant memory. RSS is the process's (sampled every 1,000 lines); the traced "
        "peak is tracemalloc's over the request (those runs are slower by the tracing).",
        "",
        *table(
            ["window", "cycles", "MB", "s", "cycles/s", "RSS before MB", "RSS peak MB", "traced peak MB"],
            [
                [
                    f"{r['hours']} h"
                    + (", include=calls" if r["calls"] else "")
                    + (" (traced)" if r["traced_peak"] else ""),
                    f"{r['cycles']:,}",
                    f"{r['bytes'] / 1e6:.1f}",
                    f"{r['seconds']:.2f}",
                    f"{r['rate']:,.0f}",
                    f"{r['rss_before']:.0f}",
                    f"{r['rss_peak']:.0f}",
                    f"{r['traced_peak']:.1f}" if r["traced_peak"] is not None else "",
                ]
                for r in results.get("exports", [])
            ],
        ),
        "",
    ]
    retention = results.get("retention")
    if retention:
        lines += [
            "## Retention and verification",
            "",
            *table(
                ["what", "value"],
                [
                    [
                        f"`cycles_prune(older_than=<end of {retention['day']}>)` in all: verify that day's calls, "
                        "then under the chain lock checkpoint and drop its partitions",
                        f"{retention['drop_seconds']:.1f} s",
                    ],
                    ["of which verifying, before the chain lock", f"{retention['verified_seconds']:.1f} s"],
                    ["of which holding the chain lock (ingest waits)", f"{retention['locked_seconds']:.1f} s"],
                    ["cycles and calls dropped", f"{retention['cycles_deleted']:,} and {retention['calls_deleted']:,}"],
                    ["partitions dropped", ", ".join(retention["partitions"]) or "none"],
                    ["held back", retention["held_back"] or "nothing"],
                    [
                        f"verify one day ({retention['verify_day']}) from the checkpoint: `chain_walk` over its ids",
                        f"{retention['verify_seconds']:.1f} s, {retention['verify_calls']:,} calls, "
                        + ("chain valid" if retention["verify_ok"] else "**broken**"),
                    ],
                    [
                        "verify rate",
                        f"{retention['verify_calls'] / retention['verify_seconds']:,.0f} calls/s",
                    ],
                ],
            ),
            "",
        ]
    lines += [
        "## Sizes",
        "",
        "Measured after the load and before retention (`pg_partition_tree`: the sum of the leaf partitions; rows as "
        "estimated by ANALYZE).",
        "",
        *table(
            ["table", "partitions", "rows", "table MB", "index MB", "bytes per cycle"],
            [
                [
                    name,
                    leaves,
                    f"{rows:,}",
                    f"{table_bytes / 1e6:,.0f}",
                    f"{index_bytes / 1e6:,.0f}",
                    f"{(table_bytes + index_bytes) / max(1, cycles):,.0f}",
                ]
                for name, leaves, rows, table_bytes, index_bytes in sizes
            ],
        ),
        "",
        f"Database: {database / 1e9:.2f} GB, {database / max(1, cycles):,.0f} bytes per cycle.",
        "",
    ]
    return "\n".join(lines)


if __name__ == "__main__":
    main()
