"""The inputs of the golden fixtures, written by hand (``make_fixtures.py``): each writer is handed them and each
``<fixture>.json`` holds them as the values expected back, never the writer's output read back."""

from __future__ import annotations

import copy
import json
import math
from typing import Any

WRITERS = {
    "json": "73e21e2",
    "spool-file-v0": "cd27837",
    "binary-first": "d1823d4",
    "binary-last": "7022a8e",
    "body1": "258a538",
    "current": "1173deb",
    "bind-intents": "the commit that added bind intents (issue 20, item 6; parent 56c96b8)",
    "pod-assumed": "the commit that added PluginScores.pod_assumed (issue 32, item 4; parent 97f217b)",
    "herd-reconciled": "the commit that added PluginScores.herd_reconciled (issue 32, item 3; parent 03b93f0)",
    "derived-scores": "the commit that added the SLR\\x04 spool form (issue 30; parent ce2dd48)",
    "body-as-spooled": "the commit that added body format 3 (issue 30; parent 338176d)",
}

# --- inputs, written by hand ---------------------------------------------------------------------------

EVENT_BASE: dict[str, Any] = {
    "profile": "gpu-aware",
    "duration_ms": 0.75,
    "http_status": 200,
    "pod_namespace": "team-a",
    "pod_name": "trainer-0",
    "pod_uid": "3f1c2a9e-0b7d-4c55-9a61-2f0d5e8b7c10",
    "pod_resource_version": "4711",
    "node_mode": "names",
    "error": "",
    "error_path": "",
    "filter": None,
    "prioritize": None,
    "bind": None,
    "preempt": None,
    "server": "web-0:41",
    "answer_derived": False,
}

FILTER: dict[str, Any] = {
    "nodes": ["node-a", "node-b", "node-c", "node-d", "node-e"],
    "passed": ["node-a", "node-c", "node-e"],
    "failures": {
        "node-b": {"NetworkTraffic": "9.5 GB received in 5m, over the threshold of 5 GB"},
        "node-d": {"NodeResourceFitByCR": "no example.com/gpu left"},
    },
    "details": {"node-b": {"NetworkTraffic": "9500000000 bytes"}},
    "unresolvable": ["node-d"],
    "traffic_bytes": [1.2e9, 9.5e9, 3.0e9, None, None],
    "metric_age_seconds": 4.5,
    "metric_note": "",
}
FILTER_ANSWER = (
    '{"Nodes":null,"NodeNames":["node-a","node-c","node-e"],'
    '"FailedNodes":{"node-b":"NetworkTraffic: 9.5 GB received in 5m, over the threshold of 5 GB"},'
    '"FailedAndUnresolvableNodes":{"node-d":"NodeResourceFitByCR: no example.com/gpu left"},"Error":""}'
)


def prioritize(*, scale: str) -> dict[str, Any]:
    """The prioritize of FILTER's passed nodes: NetworkTraffic (weight 2, herd bytes on node-c, node-e unmeasured),
    NodeResourceFitByCR (weight 1), ImageLocality (not applicable). Finals by hand: (2·66.6667 + 100) / 3 = 77.7778,
    (2·0 + 40) / 3 = 13.3333, (2·50 + 70) / 3 = 56.6667; fixed: 8, 1, 6; spread (min-max): 10, 0, 7."""
    return {
        "nodes": ["node-a", "node-c", "node-e"],
        "plugins": [
            {
                "name": "NetworkTraffic",
                "weight": 2,
                "scores": [66.6667, 0.0, 50.0],
                "raw": [1.2e9, 3.0e9, None],
                "herd_bytes": [0.0, 6.0e8, 0.0],
                "notes": {"node-e": "no traffic series for node: the neutral score 50"},
                "applicable": True,
                "note": "",
                "metric_age_seconds": 4.5,
                "herd_binds": [0, 2, 0],
                "herd_newest_age_ms": [None, 1250, None],
                "requested": [],
                "inputs": {},
                "missing_score": 50.0,
                "pod_assumed": None,
                "herd_reconciled": [],
            },
            {
                "name": "NodeResourceFitByCR",
                "weight": 1,
                "scores": [100.0, 40.0, 70.0],
                "raw": [],
                "herd_bytes": [],
                "notes": {},
                "applicable": True,
                "note": "",
                "metric_age_seconds": None,
                "herd_binds": [],
                "herd_newest_age_ms": [],
                "requested": ["example.com/gpu"],
                "inputs": {"example.com/gpu": [1.0, 0.4, 0.7]},
                "missing_score": None,
                "pod_assumed": None,
                "herd_reconciled": [],
            },
            {
                "name": "ImageLocality",
                "weight": 1,
                "scores": [0.0, 0.0, 0.0],
                "raw": [],
                "herd_bytes": [],
                "notes": {},
                "applicable": False,
                "note": "the pod names no image",
                "metric_age_seconds": None,
                "herd_binds": [],
                "herd_newest_age_ms": [],
                "requested": [],
                "inputs": {},
                "missing_score": None,
                "pod_assumed": None,
                "herd_reconciled": [],
            },
        ],
        "final": [77.7778, 13.3333, 56.6667],
        "extender": [10, 0, 7] if scale == "spread" else [8, 1, 6],
        "answer_scale": scale,
        "extender_weight": 5 if scale == "spread" else 0,
    }


POD_ASSUMED_LEARNED: dict[str, Any] = {
    "bytes": 6.0e8,
    "source": "learned",
    "workload": "deployment shop/web",
    "pods": 12,
    "bytes_per_second": 2.0e6,
    "percentile": 0.9,
    "lookback_days": 7,
}
"""NetworkTraffic's ``pod_assumed`` (issue 32, item 4): learned from 12 pods, 2 MB/s over a 5-minute window."""

HERD_RECONCILED: list[dict[str, Any]] = [
    {"node": 0, "pod": "shop/web-7d9f-a", "assumed": 3.0e8, "observed": 1.25e8, "counted": 1.75e8},
    {"node": 0, "pod": "shop/web-7d9f-b", "assumed": 3.0e8, "observed": 3.5e8, "counted": 0.0},
]
"""NetworkTraffic's ``herd_reconciled`` (issue 32, item 3): two binds on node-a counted by their pods' own traffic,
``node`` its position: 300 MB assumed, 125 MB observed, 175 MB counted; 350 MB observed
of 300 MB assumed, 0 counted. node-a's herd bytes are their sum, 175 MB, from its 2 binds."""


def prioritize_answer(extender: list[int]) -> str:
    nodes = ["node-a", "node-c", "node-e"]
    return "[" + ",".join(f'{{"Host":"{n}","Score":{s}}}' for n, s in zip(nodes, extender, strict=True)) + "]"


PREEMPT: dict[str, Any] = {
    "candidates": ["node-a", "node-c"],
    "kept": ["node-a"],
    "dropped": {"node-c": "NetworkTraffic: still over the threshold without the victims"},
}
PREEMPT_ANSWER = '{"NodeNameToMetaVictims":{"node-a":{"Pods":[{"UID":"9d2e7f00-victim"}],"NumPDBViolations":1}}}'
BIND: dict[str, Any] = {"node": "node-a", "detail": "bound through the API", "api_status": 201, "simulated": False}
BIND_ANSWER = '{"Error":""}'


def intent(event_id: str, started_at: float, node: str = "node-a") -> dict[str, Any]:
    """A bind intent (``BindIntent``) of the pod of ``EVENT_BASE``: every field."""
    return {
        "event_id": event_id,
        "profile": EVENT_BASE["profile"],
        "started_at": started_at,
        "pod_namespace": EVENT_BASE["pod_namespace"],
        "pod_name": EVENT_BASE["pod_name"],
        "pod_uid": EVENT_BASE["pod_uid"],
        "node": node,
        "server": EVENT_BASE["server"],
    }


RECONCILED_BIND: dict[str, Any] = {
    "node": "node-c",
    "detail": (
        "reconciled after schedlens stopped mid-bind: spec.nodeName read by web-1:12 at 2026-11-22T12:27:40+00:00: "
        "bound to node-c; kube-scheduler got no answer to this call"
    ),
    "api_status": None,
    "simulated": False,
}
"""The record a reconciliation writes of a bind found done
(``scheduler_core.extender.record.bind_intents.reconciled_event``)."""


def big_filter() -> tuple[dict[str, Any], str]:
    """48 candidates (lists over the 1024 bytes that make a shared part): every 6th fails, every 12th of them
    unresolvable, node-013 has no traffic figure."""
    nodes = [f"node-{i:03d}" for i in range(48)]
    failures: dict[str, dict[str, str]] = {}
    unresolvable: list[str] = []
    for i in range(5, 48, 6):
        failures[nodes[i]] = {"NetworkTraffic": f"{(i + 1) * 125} MB received in 5m, over the threshold of 600 MB"}
        if i % 12 == 11:
            unresolvable.append(nodes[i])
    traffic: list[float | None] = [float((i + 1) * 125_000_000) for i in range(48)]
    traffic[13] = None
    record = {
        "nodes": nodes,
        "passed": [n for n in nodes if n not in failures],
        "failures": failures,
        "details": {},
        "unresolvable": unresolvable,
        "traffic_bytes": traffic,
        "metric_age_seconds": 12.0,
        "metric_note": "snapshot 12 s old",
    }
    failed = {n: f"NetworkTraffic: {r['NetworkTraffic']}" for n, r in failures.items() if n not in unresolvable}
    answer = json.dumps(
        {
            "Nodes": None,
            "NodeNames": record["passed"],
            "FailedNodes": failed,
            "FailedAndUnresolvableNodes": {n: f"NetworkTraffic: {failures[n]['NetworkTraffic']}" for n in unresolvable},
            "Error": "",
        },
        separators=(",", ":"),
    )
    return record, answer


def big_prioritize(filter_record: dict[str, Any]) -> dict[str, Any]:
    """NetworkTraffic alone (weight 1) over the big filter's passed nodes, from its traffic figures: 100 − x·100/max,
    to 4 decimals; the unmeasured node the neutral 50. Final = the scores; fixed scale."""
    failures = filter_record["failures"]
    pairs = [(n, t) for n, t in zip(filter_record["nodes"], filter_record["traffic_bytes"], strict=True)]
    passed = [(n, t) for n, t in pairs if n not in failures]
    highest = max(t for _, t in passed if t is not None)
    scores = [50.0 if t is None else round(100 - t * 100 / highest, 4) for _, t in passed]
    return {
        "nodes": [n for n, _ in passed],
        "plugins": [
            {
                "name": "NetworkTraffic",
                "weight": 1,
                "scores": scores,
                "raw": [t for _, t in passed],
                "herd_bytes": [],
                "notes": {"node-013": "no traffic series for node: the neutral score 50"},
                "applicable": True,
                "note": "",
                "metric_age_seconds": 12.0,
                "herd_binds": [],
                "herd_newest_age_ms": [],
                "requested": [],
                "inputs": {},
                "missing_score": 50.0,
            }
        ],
        "final": list(scores),
        "extender": [min(10, max(0, math.floor(s / 10 + 0.5))) for s in scores],
        "answer_scale": "fixed",
        "extender_weight": 0,
    }


def alone_prioritize() -> dict[str, Any]:
    """A prioritize with no filter to refer to: a raw column with an infinity (kept as it is), a plugin whose raw
    figures are its scores, the spread scale (extenders not derivable from the finals)."""
    record = prioritize(scale="spread")
    record["plugins"][1]["raw"] = [math.inf, 0.4, 0.7]
    record["plugins"][2]["raw"] = [0.0, 0.0, 0.0]
    return record


LATER: dict[str, dict[str, Any]] = {
    "VerbEvent": {"answer_derived": False, "profile_version": ""},
    "FilterRecord": {},
    "PrioritizeRecord": {"answer_scale": "fixed", "extender_weight": 0},
    "PluginScores": {
        "herd_binds": [],
        "herd_newest_age_ms": [],
        "requested": [],
        "inputs": {},
        "missing_score": None,
        "pod_assumed": None,
        "herd_reconciled": [],
    },
    "BindRecord": {},
    "PreemptRecord": {},
}
"""A field added after a writer's version, as the current reader is expected to give it for that writer's record."""

DEFAULTS: dict[str, dict[str, Any]] = {
    "FilterRecord": {
        "failures": {},
        "details": {},
        "unresolvable": [],
        "traffic_bytes": [],
        "metric_age_seconds": None,
        "metric_note": "",
    },
    "PrioritizeRecord": {"answer_scale": "fixed", "extender_weight": 0},
    "PluginScores": {
        "raw": [],
        "herd_bytes": [],
        "notes": {},
        "applicable": True,
        "note": "",
        "metric_age_seconds": None,
        "herd_binds": [],
        "herd_newest_age_ms": [],
        "requested": [],
        "inputs": {},
        "missing_score": None,
        "pod_assumed": None,
        "herd_reconciled": [],
    },
    "PreemptRecord": {"dropped": {}},
    "BindRecord": {"detail": "", "api_status": None, "simulated": False},
}
"""Each record field's default: a stored body's record reads back as a JSON object without them (``to_builtins``)."""

PART_OF = {"filter": "FilterRecord", "prioritize": "PrioritizeRecord", "bind": "BindRecord", "preempt": "PreemptRecord"}


def event(event_id: str, verb: str, started_at: float, answer: str, **fields: Any) -> dict[str, Any]:
    value = copy.deepcopy(EVENT_BASE)
    value.update(event_id=event_id, verb=verb, started_at=started_at, response=answer)
    value.update(copy.deepcopy(fields))
    return value


T0 = 1_795_400_000.125
"""2026-11-22 12:26:40.125 UTC (the records' start times count on from it)."""


def derived_score_events() -> list[tuple[str, dict[str, Any]]]:
    """(fixture name, event) of ``derived-scores`` and ``body-as-spooled``: a filter, and a prioritize whose final
    scores and NetworkTraffic's scores its other columns give back. By hand: NetworkTraffic of x = raw + herd bytes,
    max 3.6e9: 100 − 1.2e9·100/3.6e9 = 66.6667, 0, 100 − 2.4e9·100/3.6e9 = 33.3333; finals (weights 2 and 1)
    (2·66.6667 + 100) / 3 = 77.7778, 40 / 3 = 13.3333, (2·33.3333 + 70) / 3 = 45.5555; fixed: 8, 1, 5."""
    filtered = event("golden-deriving-filter", "filter", T0 + 0.07, FILTER_ANSWER, filter=FILTER)
    filtered["profile_version"] = "7d4e2b6a9c01"
    scored = prioritize(scale="fixed")
    traffic = scored["plugins"][0]
    traffic["raw"] = [1.2e9, 3.0e9, 2.4e9]
    traffic["scores"] = [66.6667, 0.0, 33.3333]
    traffic["notes"] = {}
    scored["final"] = [77.7778, 13.3333, 45.5555]
    scored["extender"] = [8, 1, 5]
    answer = prioritize_answer([8, 1, 5])
    prioritized = event("golden-deriving-prioritize", "prioritize", T0 + 0.08, answer, prioritize=scored)
    prioritized["profile_version"] = "7d4e2b6a9c01"
    return [("deriving_filter", filtered), ("deriving_prioritize", prioritized)]
