"""The record path at 1000 nodes: spool append cost, bytes stored per cycle, ingest rate, backlog drain.

Real records: one cycle (filter, prioritize, bind) per backlog cycle, made by the verbs over the simulator's
1000-node cluster as a cluster would make them (a new traffic snapshot every 15 s, the herd estimate on, 200
pods/s: see ``templates``), then given a new event id, pod UID and time. Everything in process; PostgreSQL on the same
machine, a scratch database.

- append: ``Spool.append`` of each encoded record (what a verb adds after answering is built), p50/p99/max;
- bytes stored per cycle: ``pg_column_size`` of every column of the cycle's calls, of the cycle row, of its share
  of the node postings and of the shared parts (a filter's lists, stored once per kind of pod and snapshot), and
  the tables' total size (heap, TOAST, indexes) per cycle;
- ingest: ``spool_ingest`` draining the backlog (read, decode, fold into cycles, chain, commit, delete), with
  ``SCHEDLENS_INGEST_PREPARERS`` preparing processes as ``ingest_spool --follow`` runs it (0: a thread);
- drain of a 10-minute outage: the backlog a 10-minute database outage leaves at the sustained rate, divided
  by the measured ingest rate (the backlog measured here is smaller; both figures are given).

    .venv/bin/python -m benchmarks.record --cycles 3000
    DATABASE_URL=postgres://user@host:5432/scratch .venv/bin/python -m benchmarks.record  # that database
    .venv/bin/python -m benchmarks.record --cycles 2000 --json out.json  # the result as JSON (make bench)

The scratch database (``schedlens_bench_record`` on ``BENCH_ADMIN_DATABASE_URL``'s server unless
``--database-url`` or ``DATABASE_URL`` names one) is dropped and created again: never point it at real data.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import random
import tempfile
import time
import uuid
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import msgspec
from psycopg import sql

from benchmarks.common import PY, REPO, database_url, migrate, percentile, recreate_database, run_child

DATABASE = "schedlens_bench_record"


@dataclass
class RecordPathResult:
    cycles: int
    record_bytes: dict[str, int]
    append_ms: list[float]
    stored: dict[str, float]
    """label → bytes per cycle"""
    ingest_seconds: float
    spool_bytes: int


SNAPSHOT_SECONDS = 15.0


def templates(
    count: int,
    nodes: int = 1000,
    *,
    windows: bool = False,
    fixed_window: bool = False,
    meter: AbstractContextManager[object] | None = None,
) -> list[list[bytes]]:
    """``count`` real cycles as encoded spool records (filter, prioritize when 2+ nodes pass, bind).

    ``meter``: entered around each cycle's filter and prioritize calls and the encoding of their records (what the
    web process spends per pod before the bind; ``benchmarks.cost.verb_parts``), not around the rest.

    ``windows``: each filter is sent the names kube-scheduler would send it (``benchmarks.cost.driver.Candidates``:
    a window of the node list, new for every pod) instead of every node; with ``fixed_window``, the window's size
    but the same names for every pod (what a memo of the candidates' columns saves, at its best).

    As in a cluster: a traffic snapshot every ``SNAPSHOT_SECONDS`` (the prefetch's default refresh), and the herd
    estimate on (each bind raises its node's traffic for the pods after it, 5 ms apart: 200 pods/s), so
    NetworkTraffic's scores and the final scores differ from cycle to cycle while the candidate list and the
    snapshot's figures repeat until the next snapshot. ``backlog`` cycles through them: ask
    for as many as the backlog has cycles, or the ingester sees the same few records again and again.
    """
    from django.conf import settings

    from benchmarks.cost.driver import Candidates
    from dashboard.traffic.view import LocalInputs
    from scheduler_core.cli.simulator import make_cluster, make_pod
    from scheduler_core.extender.protocol.binding import SimulatedBinder
    from scheduler_core.extender.protocol.cluster import StaticCluster
    from scheduler_core.extender.record.spool_codec import encode_event
    from scheduler_core.extender.scoring.herd import InMemoryBindLog
    from scheduler_core.extender.scoring.profiles import load_profiles
    from scheduler_core.extender.verbs import Extender
    from scheduler_core.traffic.store import TrafficStore
    from scheduler_core.traffic.synthetic import SyntheticTrafficSource

    deriving = settings.SCHEDLENS_SPOOL_FORM == "deriving"  # the spool form the verbs are set to write

    cluster = make_cluster(nodes)
    view = StaticCluster.from_document(cluster.document())
    profiles = load_profiles((REPO / "deploy" / "profiles.demo.yaml").read_text())
    store = TrafficStore()
    clock = [time.time()]
    source = SyntheticTrafficSource(view.node_names, clock=lambda: clock[0])
    queries = {q for p in profiles.values() for q in p.traffic_queries()}
    fetched = -SNAPSHOT_SECONDS
    inputs = LocalInputs(lambda: store, InMemoryBindLog(300.0, default_decay_seconds=15.0))
    extender = Extender(
        profiles, cluster=view, traffic=store, binder=SimulatedBinder(), inputs=inputs, clock=lambda: clock[0]
    )
    rng = random.Random(3)
    candidates = Candidates(cluster.node_names, random.Random(5), fixed=fixed_window) if windows else None
    out = []
    for index in range(count):
        clock[0] += 0.005
        if clock[0] - fetched >= SNAPSHOT_SECONDS:
            fetched = clock[0]
            for query in queries:
                store.put(source.fetch(query))
        profile = "gpu-aware" if index % 4 == 3 else "default"
        pod = make_pod(rng)
        names = candidates.next() if candidates else cluster.node_names
        body = msgspec.json.encode({"Pod": pod, "Nodes": None, "NodeNames": names})
        with meter or nullcontext():
            filtered = extender.filter(profile, body)
            encoded = [encode_event(filtered.event, deriving=deriving)]
        passed = msgspec.json.decode(filtered.body)["NodeNames"]
        best = passed[0] if passed else None
        if len(passed) > 1:
            body = msgspec.json.encode({"Pod": pod, "Nodes": None, "NodeNames": passed})
            with meter or nullcontext():
                scored = extender.prioritize(profile, body)
                encoded.append(encode_event(scored.event, deriving=deriving))
            best = max(msgspec.json.decode(scored.body), key=lambda h: h["Score"])["Host"]
        if best is not None:
            meta = pod["metadata"]
            bind = {"PodName": meta["name"], "PodNamespace": meta["namespace"], "PodUID": meta["uid"], "Node": best}
            encoded.append(encode_event(extender.bind(profile, msgspec.json.encode(bind)).event, deriving=deriving))
        out.append(encoded)
    return out


def backlog(
    cycle_templates: list[list[bytes]], cycles: int, spool_dir: Path, *, first_pod: int = 0
) -> tuple[list[float], int]:
    """Append ``cycles`` cycles to a fresh spool; returns each append's time (ms) and the bytes appended.

    Pod ``first_pod + n`` gets cycle ``n``: a backlog after another into the same database takes new pods, or the
    ingester would join its calls to the earlier backlog's cycles of the same pods (no cluster sends those)."""
    from django.conf import settings

    from dashboard.spool import Spool
    from scheduler_core.extender.record.spool_codec import decode_event, encode_event

    deriving = settings.SCHEDLENS_SPOOL_FORM == "deriving"

    spool = Spool(spool_dir)
    decoded = [[decode_event(raw) for raw in cycle] for cycle in cycle_templates]
    origin = time.time() - cycles * 0.005 - 60
    timings: list[float] = []
    total = 0
    for n in range(cycles):
        uid = str(uuid.UUID(int=first_pod + n + 1))
        shift = origin + n * 0.005 - decoded[n % len(decoded)][0].started_at
        for event in decoded[n % len(decoded)]:
            copy = msgspec.structs.replace(
                event, event_id=uuid.uuid4().hex, pod_uid=uid, started_at=event.started_at + shift
            )
            data = encode_event(copy, deriving=deriving)
            started = time.perf_counter()
            spool.append(data)
            timings.append((time.perf_counter() - started) * 1000)
            total += len(data)
    return timings, total


def stored_sizes(cycles: int) -> dict[str, float]:
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT coalesce(sum(pg_column_size(record)), 0), coalesce(sum(pg_column_size(response)), 0), "
            "coalesce(sum(pg_column_size(body)), 0), sum(pg_column_size(v.*) - coalesce(pg_column_size(record), 0) "
            "- coalesce(pg_column_size(response), 0) - coalesce(pg_column_size(body), 0)) FROM dashboard_verbcall v"
        )
        record, response, body, other = cursor.fetchone()
        cursor.execute(
            "SELECT sum(pg_column_size(c.*)), sum(pg_column_size(candidate_nodes)) FROM dashboard_schedulingcycle c"
        )
        cycle_row, candidates = cursor.fetchone()
        cursor.execute("SELECT coalesce(sum(pg_column_size(p.*)), 0) FROM dashboard_nodeposting p")
        (postings,) = cursor.fetchone()
        cursor.execute("SELECT coalesce(sum(pg_column_size(s.*)), 0) FROM dashboard_sharedpart s")
        (parts,) = cursor.fetchone()
        cursor.execute(
            # pg_partition_tree: the day partitions of cycles and calls too (a partitioned parent holds no rows).
            "SELECT sum(pg_total_relation_size(relid)) FROM unnest(ARRAY['dashboard_verbcall', "
            "'dashboard_schedulingcycle', 'dashboard_nodeposting', 'dashboard_sharedpart']::regclass[]) t, "
            "pg_partition_tree(t)"
        )
        (on_disk,) = cursor.fetchone()
    # PostgreSQL's sum() of bigint sizes is numeric (a Decimal here): floats, so the result serializes as JSON.
    record, response, body, other, cycle_row, candidates, postings, parts, on_disk = (
        float(value or 0) for value in (record, response, body, other, cycle_row, candidates, postings, parts, on_disk)
    )
    return {
        "calls: record (jsonb)": record / cycles,
        "calls: response (jsonb)": response / cycles,
        "calls: body (bytea)": body / cycles,
        "calls: other columns": other / cycles,
        "cycle row (incl. candidate_nodes)": cycle_row / cycles,
        "of which candidate_nodes": candidates / cycles,
        "node postings (share of a cycle)": postings / cycles,
        "shared parts (share of a cycle)": parts / cycles,
        "stored per cycle (columns)": (record + response + body + other + cycle_row + postings + parts) / cycles,
        "on disk per cycle (heap + TOAST + indexes)": on_disk / cycles,
    }


def scratch_database(database_url: str | None) -> str:
    """Drop and create the scratch database (``database_url``'s, else ``DATABASE``); returns its URL."""
    if not database_url:
        return recreate_database(DATABASE)
    import psycopg

    parts = urlsplit(database_url)
    name = parts.path.lstrip("/")
    admin = urlunsplit(parts._replace(path="/postgres"))
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name)))
        conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
    return database_url


def drop_scratch_database(database_url: str | None) -> None:
    if not database_url:
        recreate_database(DATABASE, drop_only=True)
        return
    import psycopg

    parts = urlsplit(database_url)
    admin = urlunsplit(parts._replace(path="/postgres"))
    with psycopg.connect(admin, autocommit=True) as conn:
        name = sql.Identifier(parts.path.lstrip("/"))
        conn.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(name))


def run(cycles: int, database_url: str | None = None) -> RecordPathResult:
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
    os.environ["SCHEDLENS_INGEST_IN_PROCESS"] = "false"
    url = scratch_database(database_url)
    migrate(url)
    os.environ["DATABASE_URL"] = url
    import django

    django.setup()
    from django.conf import settings
    from django.db import connection

    from dashboard.ingest.call_builders import start_call_builders
    from dashboard.ingest.spool_ingest import spool_ingest
    from dashboard.spool import Spool

    workdir = Path(tempfile.mkdtemp(prefix="schedlens-record-"))
    cycle_templates = templates(cycles)  # every cycle its own, as a real backlog
    sizes = {"filter": 0, "prioritize": 0, "bind": 0}
    for cycle in cycle_templates:
        for raw, verb in zip(cycle, ("filter", "prioritize", "bind"), strict=False):
            sizes[verb] = max(sizes[verb], len(raw))

    appends, spool_bytes = backlog(cycle_templates, cycles, workdir / "spool")
    spool = Spool(workdir / "spool")
    # As ``ingest_spool --follow`` drains a backlog: its builder processes are started (and set up) beforehand.
    processes = settings.SCHEDLENS_INGEST_PREPARERS
    builders = start_call_builders(processes) if processes else None
    try:
        started = time.perf_counter()
        moved = spool_ingest(spool=spool, confirm_grace_seconds=0, builders=builders, ahead=max(2, processes))
        ingest_seconds = time.perf_counter() - started
    finally:
        if builders is not None:
            builders.shutdown()
    assert moved == sum(len(cycle_templates[n % len(cycle_templates)]) for n in range(cycles)), moved
    stored = stored_sizes(cycles)
    connection.close()
    drop_scratch_database(database_url)
    return RecordPathResult(cycles, sizes, appends, stored, ingest_seconds, spool_bytes)


def in_subprocess(cycles: int, workdir: Path) -> RecordPathResult:
    """:func:`run` in a fresh process (it configures Django for its own scratch database): this module's command
    line, the result read back from the JSON file it writes; a failure raises ``PhaseFailed`` with its stderr.
    The scratch database is named here because the command's default is ``DATABASE_URL``, which it drops and
    creates again, and that may name a real database in the caller's shell."""
    out = workdir / "record_path.json"
    command = [PY, "-m", "benchmarks.record", "--cycles", str(cycles)]
    run_child([*command, "--database-url", database_url(DATABASE), "--json", str(out)], cwd=REPO)
    return RecordPathResult(**json.loads(out.read_text()))


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.record", description=__doc__.split("\n\n")[0])
    parser.add_argument("--cycles", type=int, default=3000)
    parser.add_argument(
        "--database-url",
        default=os.environ.get("DATABASE_URL", ""),
        help="PostgreSQL scratch database, dropped and created again (default: $DATABASE_URL, else "
        f"{DATABASE} on BENCH_ADMIN_DATABASE_URL's server)",
    )
    parser.add_argument(
        "--json", type=Path, help="also write the whole result to this file as JSON (make bench reads it)"
    )
    args = parser.parse_args()
    result = run(args.cycles, args.database_url or None)
    if args.json:
        args.json.write_text(json.dumps(dataclasses.asdict(result)))
    print(f"append p50 {percentile(result.append_ms, 50):.3f} p99 {percentile(result.append_ms, 99):.3f} ms")
    print(
        f"ingest {result.cycles / result.ingest_seconds:.0f} cycles/s ({result.ingest_seconds:.1f} s, "
        f"SCHEDLENS_INGEST_PREPARERS={os.environ.get('SCHEDLENS_INGEST_PREPARERS', 'default')})"
    )
    for label, value in result.stored.items():
        print(f"{label}: {value / 1024:.1f} KB")


if __name__ == "__main__":
    main()
