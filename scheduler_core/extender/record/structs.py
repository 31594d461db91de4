"""The record of one verb call: what was asked, what every plugin said, what was answered.

Columnar on purpose (one list per quantity, aligned with ``nodes``): a many-node cycle stays a handful of lists
instead of a row or object per node. Structs are ``gc=False`` (they hold only builtins, never a cycle), so a record
does not add to the cyclic collector's work on the verb path.

How a record is written to the spool and read back is ``scheduler_core.extender.record.spool_codec``.
"""

from __future__ import annotations

from typing import Final, Literal

import msgspec

from scheduler_core.extender.protocol.workloads import OVERRIDE_ANNOTATION

FILTER: Final = "filter"
PRIORITIZE: Final = "prioritize"
BIND: Final = "bind"
PREEMPT: Final = "preempt"
VERBS: Final = (FILTER, PRIORITIZE, BIND, PREEMPT)
"""The extender's verbs, in a cycle's order: the last part of each verb's URL (``urlPrefix`` + verb) and
``VerbEvent.verb``. Every other module names a verb by these constants."""
NODE_CACHE = "NodeCache"
"""The pseudo-plugin a prioritize record names for nodes kube-scheduler sent that the node cache does not know:
they answer 0 whatever the plugins said (its ``notes`` name them)."""
NETWORK_TRAFFIC: Final = "NetworkTraffic"
TRAFFIC_THRESHOLD: Final = "TrafficThreshold"
NODE_RESOURCE_FIT_BY_CR: Final = "NodeResourceFitByCR"
IMAGE_LOCALITY: Final = "ImageLocality"
"""The plugins' names, as profiles name them and records carry them (``PluginScores.name``, a failure's plugin). A
stored record is read by these names long after it was written, so they belong to the record's format: each plugin
class takes its ``name`` from here, and a reader of records (the spool codec, the outcomes) needs no plugin code."""
SOURCE_CONSTANT: Final = "constant"
SOURCE_LEARNED: Final = "learned"
SOURCE_OVERRIDE: Final = "override"
"""Where a pod's assumed bytes come from (``AssumedBytes.source``): the profile's constant, its workload's learned
figure (``scheduler_core.extender.scoring.workload_traffic``), or the pod's own annotation."""
NodeMode = Literal["names", "nodes", ""]


class AssumedBytes(msgspec.Struct, frozen=True, gc=False, omit_defaults=True):
    """What a pod is assumed to add to its node once bound, and where that comes from: the record keeps it so that an
    explanation can say it and ``verify_explanations`` can recompute it."""

    bytes: float
    source: str = SOURCE_CONSTANT
    """``constant`` (``assumedBytesPerPod``), ``learned`` or ``override`` (the pod's annotation)."""
    workload: str = ""
    """``kind namespace/name`` of the pod's workload; empty: none known."""
    pods: int = 0
    """How many pods the learned figure comes from (0 unless learned)."""
    bytes_per_second: float = 0.0
    """The learned rate the bytes are over the query window (0 unless learned)."""
    percentile: float = 0.0
    lookback_days: int = 0

    def text(self) -> str:
        if self.source == SOURCE_OVERRIDE:
            return f"override: the pod's {OVERRIDE_ANNOTATION} annotation"
        if self.source == SOURCE_LEARNED:
            return (
                f"learned from {self.pods} pods of {self.workload}, "
                f"p{round(self.percentile * 100)} over the last {self.lookback_days} days"
            )
        return "fallback: the constant assumedBytesPerPod"


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


class ReconciledBind(msgspec.Struct, frozen=True, gc=False):
    """A recent bind the herd estimate counted by its pod's own traffic (``reconcileHerd``), not by the decay."""

    node: int
    """Its node's position in ``PrioritizeRecord.nodes``."""
    pod: str
    """``namespace/name``."""
    assumed: float
    """What the pod was assumed to add over the query window (its own figure, or ``assumedBytesPerPod``)."""
    observed: float
    """The pod's own bytes over the same window, read with the node's measurement."""
    counted: float
    """``max(0, assumed − observed)``: what the measurement does not hold yet, part of the node's ``herd_bytes``."""


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
    herd_binds: list[int] = msgspec.field(default_factory=list)
    """How many recent binds ``herd_bytes`` come from, per node (aligned with ``nodes``); empty when none."""
    herd_newest_age_ms: list[int | None] = msgspec.field(default_factory=list)
    """Age of each node's newest recent bind at the call, in whole milliseconds (None: no bind); empty when no node
    has one. Whole numbers: a third of the bytes of the same ages as floats, spooled and stored for every call."""
    requested: list[str] = msgspec.field(default_factory=list)
    """What the pod asks of the plugin: its extended resources (``NodeResourceFitByCR``), its images
    (``ImageLocality``)."""
    inputs: dict[str, list[float | None]] = msgspec.field(default_factory=dict)
    """Per-node figures the score is computed from, by what they measure, aligned with ``nodes``: each requested
    resource's ``resourcesScore`` (None: no NodeResources object) for ``NodeResourceFitByCR``."""
    missing_score: float | None = None
    """The score the plugin gives a node it has no figure for, by its policy (``NetworkTraffic``: 50, neutral, or 0
    under ``missingPolicy: fail``); None in records from before it was kept."""
    pod_assumed: AssumedBytes | None = None
    """``NetworkTraffic``: what the herd estimate assumes the pod adds to its node once bound, and where that comes
    from (learned from its workload's pods, the constant, the pod's override); None in records from before it was
    kept."""
    herd_reconciled: list[ReconciledBind] = msgspec.field(default_factory=list)
    """``NetworkTraffic`` with ``reconcileHerd``: the recent binds on measured candidates whose pods' own traffic was
    observed, each counted as ``max(0, assumed − observed)``; a node's other binds decayed (its ``herd_bytes`` is the
    sum of both, rounded). Empty otherwise, and in records from before it was kept. Last: positions are the spool's
    format."""


class PrioritizeRecord(msgspec.Struct, omit_defaults=True, gc=False):
    nodes: list[str]
    plugins: list[PluginScores]
    final: list[float]
    """Weighted mean of the applicable plugins' scores, 0..100."""
    extender: list[int]
    """``final`` on the extender's 0..10 scale (``answer_scale``, rounded half up): what kube-scheduler received."""
    answer_scale: str = "fixed"
    """``fixed`` (final / 10) or ``spread`` (min–max over the candidates):
    ``scheduler_core.extender.scoring.answer``."""
    extender_weight: int = 0
    """The extender's weight in kube-scheduler's configuration as the profile states it; 0: not stated."""


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
    answer_derived: bool = False
    """A prioritize's answer is its record's hosts with their extender scores, as ``wire.encode_host_priorities``
    writes them (the verb answered exactly that): the spool leaves the answer out and writes it again on reading."""
    profile_version: str = ""
    """The version of the profile that answered (``Profile.version()``: a digest of its complete definition); empty
    for a call to an unknown profile, and in records spooled before versions were kept. Last: positions are the
    spool's format (``scheduler_core.extender.record.spool_codec``)."""


class BindIntent(msgspec.Struct, omit_defaults=True, gc=False):
    """A bind about to ask the API server, written to the spool before the request (``Spool.intend``).

    Its outcome is the bind's ``VerbEvent``, with the same ``event_id``, appended in the same SQLite transaction that
    removes the intent. An intent left without one (the process died between the two) is reconciled against the
    pod's ``spec.nodeName`` by a restarted replica (``scheduler_core.extender.record.bind_intents``).
    """

    event_id: str
    """The event id the bind's record has, whichever of the verb or the reconciliation writes it."""
    profile: str
    started_at: float
    """Unix seconds: when the bind call started (the record's ``started_at``)."""
    pod_namespace: str
    pod_name: str
    pod_uid: str
    node: str
    """The node kube-scheduler asked to bind to."""
    server: str = ""
    """The process that made the call (host:pid)."""


class CallRecord(msgspec.Struct, omit_defaults=True, gc=False):
    """One stored call's record as read back (``dashboard.storage``'s codecs decode it once; readers take this, never
    the stored JSON): the verb's record, typed, with what the call says besides.

    At most one of the verb fields is set (none for a refused call). The API and the exports serve it as the JSON
    the ingester was given: the verb's record with ``error_path`` and ``node_mode`` beside its fields.
    """

    filter: FilterRecord | None = None
    prioritize: PrioritizeRecord | None = None
    bind: BindRecord | None = None
    preempt: PreemptRecord | None = None
    node_mode: NodeMode = ""
    error_path: str = ""
    unreadable: str = ""
    """Why the stored record cannot be read (a damaged body); empty when it can. Then no verb field is set."""
    untyped: msgspec.Raw | None = None
    """A record stored as JSON that does not read as its verb's type (written by an older version): its JSON as
    stored, served as it is and explained as no record. ``untyped_reason`` says why."""
    untyped_reason: str = ""

    @classmethod
    def of_event(cls, event: VerbEvent) -> CallRecord:
        """The record of ``event``, as it reads back once stored."""
        return cls(
            filter=event.filter,
            prioritize=event.prioritize,
            bind=event.bind,
            preempt=event.preempt,
            node_mode=event.node_mode,
            error_path=event.error_path,
        )


class CycleRecords(msgspec.Struct, omit_defaults=True, gc=False):
    """What a cycle's explanation and replay read: the record of its newest answered (HTTP 200) call of each verb,
    with a prioritize's reference to its filter call already resolved (``dashboard.selectors.cycles``)."""

    filter: FilterRecord | None = None
    prioritize: PrioritizeRecord | None = None
    bind: BindRecord | None = None
    unreadable: bool = False
    """The newest answered filter or prioritize call's stored record cannot be read (then it is None here)."""
    untyped: str = ""
    """Why the newest answered filter or prioritize call's record does not read as the engine's (then it is None
    here: ``CallRecord.untyped``); empty when both do."""

    @classmethod
    def of_calls(
        cls, filtered: CallRecord | None, scored: CallRecord | None, bound: CallRecord | None = None
    ) -> CycleRecords:
        """From the records of a cycle's newest answered filter, prioritize and bind calls (None: no such call)."""
        read = [r for r in (filtered, scored) if r is not None]
        return cls(
            filter=filtered.filter if filtered is not None else None,
            prioritize=scored.prioritize if scored is not None else None,
            bind=bound.bind if bound is not None else None,
            unreadable=any(r.unreadable for r in read),
            untyped=next((r.untyped_reason for r in read if r.untyped is not None), ""),
        )
