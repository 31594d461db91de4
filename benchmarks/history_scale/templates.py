"""The template cycles: real cycles recorded through the verbs and the ingester at each cluster size, read back with
the COPY text of their rows and the content their calls' chain hashes cover, ready to be copied."""

from __future__ import annotations

import hashlib
import random
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from benchmarks.common import REPO
from benchmarks.dashboard import history as bench_dashboard
from benchmarks.dashboard.history import copy_text

SIZES = (100, 300, 1000)


def candidates_scored(nodes: int) -> int:
    """How many feasible nodes kube-scheduler looks for before scoring (``numFeasibleNodesToFind`` with the default
    adaptive ``percentageOfNodesToScore``): every node below 100, else 50 % less 1 % per 125 nodes, at least 5 %
    and at least 100 nodes."""
    if nodes < 100:
        return nodes
    percentage = max(5, 50 - nodes // 125)
    return min(nodes, max(100, nodes * percentage // 100))


def record_templates(nodes: int, count: int, seed: int) -> None:
    """Real cycles through the verbs and the ingester at one cluster size, with the herd estimate on as in
    production: ``count`` pods, one in 12 unschedulable, one in 24 bound to a node the cluster no longer has."""
    import msgspec
    from django.conf import settings

    from dashboard.ingest.cycles import cycles_ingest_records
    from scheduler_core.cli.simulator import make_cluster, make_pod
    from scheduler_core.extender.protocol.binding import SimulatedBinder
    from scheduler_core.extender.protocol.cluster import StaticCluster
    from scheduler_core.extender.protocol.wire import encode
    from scheduler_core.extender.record.spool_codec import encode_event
    from scheduler_core.extender.scoring.profiles import load_profiles
    from scheduler_core.extender.verbs import Extender

    deriving = settings.SCHEDLENS_SPOOL_FORM == "deriving"  # bodies as the ingester stores that form

    rng = random.Random(seed)
    synthetic = make_cluster(nodes, seed=seed)
    names = synthetic.node_names
    store, inputs = bench_dashboard.traffic_and_inputs(names, rng)
    cluster = StaticCluster.from_document(synthetic.document())
    extender = Extender(
        load_profiles((REPO / "deploy" / "profiles.demo.yaml").read_text()),
        cluster=cluster,
        traffic=store,
        binder=SimulatedBinder(cluster),
        inputs=inputs,
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
        cycles_ingest_records(records=[encode_event(e, deriving=deriving) for e in events])


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
    from dashboard.audit.chain import call_content

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

    from dashboard.audit.chain import CALL_COLUMNS
    from dashboard.models import VerbCall
    from dashboard.services.node_tallies import NodeCounts
    from dashboard.storage.call_body_read import body_referring_to

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
    for cycle, nodes, cycle_counts in bench_dashboard.template_tallies():
        counts[cycle.id] = cycle_counts
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
