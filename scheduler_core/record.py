"""The record of one verb call: what was asked, what every plugin said, what was answered.

Columnar on purpose (one list per quantity, aligned with ``nodes``): a 1000-node cycle stays a few tens
of KB before compression instead of a thousand rows or objects. Structs are ``gc=False`` (they hold only
builtins, never a cycle), so a record does not add to the cyclic collector's work on the verb path.
"""

from __future__ import annotations

from typing import Literal

import msgspec

Verb = Literal["filter", "prioritize", "bind", "preempt"]
NodeMode = Literal["names", "nodes", ""]


class FilterRecord(msgspec.Struct, omit_defaults=True, gc=False):
    nodes: list[str]
    """Candidates in the order kube-scheduler sent them."""
    passed: list[str]
    failures: dict[str, dict[str, str]] = msgspec.field(default_factory=dict)
    """Failed node → {plugin: reason}; only failed nodes appear (the rest passed every plugin)."""
    details: dict[str, dict[str, str]] = msgspec.field(default_factory=dict)
    """Failed node → {plugin: node-specific figures}."""
    unresolvable: list[str] = msgspec.field(default_factory=list)
    traffic_bytes: list[float | None] = msgspec.field(default_factory=list)
    """Raw received bytes per candidate (aligned with ``nodes``) from the profile's traffic query."""
    metric_age_seconds: float | None = None
    metric_note: str = ""


class PluginScores(msgspec.Struct, omit_defaults=True, gc=False):
    name: str
    weight: int
    scores: list[float]
    """Normalized 0..100 per node, aligned with ``PrioritizeRecord.nodes``."""
    raw: list[float | None] = msgspec.field(default_factory=list)
    herd_bytes: list[float] = msgspec.field(default_factory=list)
    """Bytes assumed on top of ``raw`` per node for its recent binds (aligned with ``nodes``); empty when none."""
    notes: dict[str, str] = msgspec.field(default_factory=dict)
    """Node → why its score is what it is, for nodes that need a word (missing metrics, …)."""
    applicable: bool = True
    note: str = ""
    metric_age_seconds: float | None = None


class PrioritizeRecord(msgspec.Struct, omit_defaults=True, gc=False):
    nodes: list[str]
    plugins: list[PluginScores]
    final: list[float]
    """Weighted mean of the applicable plugins' scores, 0..100."""
    extender: list[int]
    """``final`` on the extender's 0..10 scale (rounded half up): what kube-scheduler received."""


class BindRecord(msgspec.Struct, omit_defaults=True, gc=False):
    node: str
    detail: str = ""
    api_status: int | None = None
    simulated: bool = False


class PreemptRecord(msgspec.Struct, omit_defaults=True, gc=False):
    candidates: list[str]
    kept: list[str]
    dropped: dict[str, str] = msgspec.field(default_factory=dict)


def _null() -> msgspec.Raw:
    return msgspec.Raw(b"null")


class VerbEvent(msgspec.Struct, omit_defaults=True, gc=False):
    """One verb call, as appended to the spool and folded into a scheduling cycle by the ingester."""

    event_id: str
    verb: str
    profile: str
    started_at: float
    """Unix seconds."""
    duration_ms: float
    http_status: int
    pod_namespace: str = ""
    pod_name: str = ""
    pod_uid: str = ""
    pod_resource_version: str = ""
    node_mode: NodeMode = ""
    error: str = ""
    """The ``Error`` answered, or why the request was refused (400/404/413)."""
    error_path: str = ""
    filter: FilterRecord | None = None
    prioritize: PrioritizeRecord | None = None
    bind: BindRecord | None = None
    preempt: PreemptRecord | None = None
    response: msgspec.Raw = msgspec.field(default_factory=_null)
    """The JSON answered (``null`` for a refused call).

    In full-Nodes mode each echoed node is replaced by ``{"$echoed": name}``: the bytes were the request's.
    """
    server: str = ""
    """Which process answered (host:pid), to trace calls of one cycle across replicas."""


_encoder = msgspec.json.Encoder()
_decoder = msgspec.json.Decoder(VerbEvent)


def encode_event(event: VerbEvent) -> bytes:
    return _encoder.encode(event)


def decode_event(data: bytes) -> VerbEvent:
    return _decoder.decode(data)
