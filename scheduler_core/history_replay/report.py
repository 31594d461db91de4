"""The history replay's report: what a candidate profile would have changed over a stretch of recorded history.

It exists apart from the replay so that readers of a stored report (the API's serializers, the pages, the
management command) need only these plain data types, never the numpy machinery that fills them.

The report is plain data (msgspec Structs, JSON as they are): every figure a person reads comes with ``basis``
text naming what it follows from (:data:`FIGURES`), and the counts it is made of are in the report too, so it can be
recomputed. :data:`CAVEATS` says what a replay cannot know.
"""

from __future__ import annotations

import msgspec

from scheduler_core.extender.record.structs import AssumedBytes

CAVEATS: tuple[str, ...] = (
    "Recorded inputs are reused: each cycle is replayed over the candidates kube-scheduler sent then, the traffic "
    "figures measured then and the other plugins' recorded verdicts and scores. Nothing is asked of the cluster or "
    "Prometheus, so a node that did not exist then, or traffic the candidate profile would have queried differently "
    "(another device or window), is not seen.",
    "The herd estimate is kept as recorded: NetworkTraffic adds the bytes assumed for the binds that were recent at "
    "that moment, whatever the candidate profile says. Which binds were recent is a fact of that moment; had the "
    "candidate placed pods differently, the later cycles' herd estimates (and the traffic those pods caused) would "
    "have differed too, and the replay does not model that feedback: every cycle is replayed independently.",
    "A filter plugin the recorded profile did not run has no recorded verdicts: under the candidate it passes every "
    "node. A score plugin that did not score a cycle has no recorded scores: its term is left out of the final "
    "scores (the nodes are counted as scored partially).",
    "Nodes our filters passed but kube-scheduler (or another extender) did not send to prioritize stay out: that "
    "exclusion was someone else's decision. kube-scheduler's own scores are not recorded, so the node it would "
    "have bound is not known: 'placements' are our preferred node (our highest final score).",
)
"""What a replay cannot know, stated in every report."""


class Count(msgspec.Struct, gc=False):
    """``k`` of ``n``: how many of the counted cycles (or nodes) had the property."""

    k: int = 0
    n: int = 0
    basis: str = ""


class SkipReason(msgspec.Struct, gc=False):
    reason: str
    cycles: int


class NodePlacements(msgspec.Struct, gc=False):
    """One node's placements (our preferred node) before and after, and the traffic it had when it was chosen."""

    node: str
    before: int = 0
    after: int = 0
    before_rate_sum: float = 0.0
    """Σ of the node's recorded traffic (raw bytes / the recorded window, bytes per second) over the cycles it was
    preferred in before, those that had a figure for it."""
    before_with_rate: int = 0
    """How many of those cycles had a figure for it."""
    after_rate_sum: float = 0.0
    after_with_rate: int = 0


class Spread(msgspec.Struct, gc=False):
    """The spread across nodes of each node's mean traffic at placement (bytes per second over the window)."""

    nodes: int = 0
    """Nodes with at least one placement that had a traffic figure."""
    mean: float | None = None
    stdev: float | None = None
    """Population standard deviation of the nodes' means."""
    max: float | None = None
    max_node: str = ""
    min: float | None = None
    min_node: str = ""
    max_over_min: float | None = None
    """None when the smallest mean is 0."""
    basis: str = ""


class TrafficBalance(msgspec.Struct, gc=False):
    before: Spread = msgspec.field(default_factory=Spread)
    after: Spread = msgspec.field(default_factory=Spread)
    quietest_chosen_before: Count = msgspec.field(default_factory=Count)
    """Cycles whose preferred node had the lowest recorded traffic among the feasible nodes (before)."""
    quietest_chosen_after: Count = msgspec.field(default_factory=Count)


class Rejection(msgspec.Struct, gc=False):
    """Nodes a filter plugin rejects after but that passed before, by plugin and reason."""

    plugin: str
    reason: str
    nodes: int
    """Node-cycles (a node counted once per cycle)."""
    cycles: int


class ChangedDecision(msgspec.Struct, gc=False):
    """One cycle whose preferred node differs, with both nodes' final scores before and after (None: not
    feasible then)."""

    cycle_id: int
    started_at: str
    pod_namespace: str
    pod_name: str
    profile: str
    before_node: str
    after_node: str
    before_node_final_before: float | None
    before_node_final_after: float | None
    after_node_final_before: float | None
    after_node_final_after: float | None
    why: str = ""


class CandidateDescription(msgspec.Struct, gc=False):
    """The candidate scenario, as replayed, and the what-if form parameters that fill it in on a decision page."""

    label: str
    source: str
    """``profile`` (a configured profile by name) or ``yaml`` (profile YAML given with the replay)."""
    filters: list[str]
    weights: dict[str, int]
    max_bytes_per_second: float
    fail_on_missing: bool
    answer_scale: str
    what_if_params: dict[str, str]
    """GET parameters of the decision page's what-if (``mode=custom``) with these settings."""
    version: str = ""
    """The candidate's profile version (``scheduler_core.extender.scoring.profiles.profile_version``); empty in replays
    kept before versions were named."""
    profile_file: str = ""
    """Where a configured candidate was read from: the profiles file, or empty for the built-in default (and YAML)."""


CONSTANT = "constant"
LEARNED = "learned"
MODES = (CONSTANT, LEARNED)
"""What the herd estimate assumes a bound pod adds: ``assumedBytesPerPod`` for every pod, or its workload's traffic
learned from the outcomes recorded before the cycle (the constant when too few)."""


class ErrorSummary(msgspec.Struct, gc=False):
    """The herd estimate's relative error for the pods with a measured outcome, under one mode:
    ``(measured − assumed) / assumed`` over the outcome's longest window, as the balance page computes it."""

    pods: int = 0
    mean: float | None = None
    mean_abs: float | None = None
    """Mean of ``|relative error|``: 0 is exact."""
    bounds: list[float] = msgspec.field(default_factory=list)
    """Upper bounds of the histogram's buckets (``scheduler_core.outcomes.arithmetic.RELATIVE_ERROR_BUCKETS``)."""
    counts: list[int] = msgspec.field(default_factory=list)
    """Pods per bucket: ``counts[i]`` ≤ ``bounds[i]`` (and above the one before); the last: above every bound."""


class LearningSide(msgspec.Struct, gc=False):
    """One mode's figures over the compared cycles."""

    mode: str
    error: ErrorSummary = msgspec.field(default_factory=ErrorSummary)
    quietest: Count = msgspec.field(default_factory=Count)
    """Cycles whose preferred node ended the outcome's longest window no busier than every other node measured
    (the bound node and its runner-ups); n: cycles whose preferred node was among those measured."""
    sources: dict[str, int] = msgspec.field(default_factory=dict)
    """How many of the cycles' pods were assumed from each source (``constant``, ``learned``)."""


class NodeHerd(msgspec.Struct, gc=False):
    """A node of a compared cycle: the traffic measured then and the herd bytes under each mode."""

    node: str
    measured_bytes: float | None
    """Its recorded raw bytes over the query window (None: no series)."""
    herd_before: float
    herd_after: float
    binds: int
    """Recent binds on it that weigh on the herd (each × its decayed weight × its assumed bytes)."""


class LearningCycle(msgspec.Struct, gc=False):
    """One compared cycle: the preferred node and the pod's assumed bytes under each mode, and what it measured."""

    cycle_id: int
    started_at: str
    pod_namespace: str
    pod_name: str
    workload: str
    before_node: str
    after_node: str
    before_assumed: AssumedBytes
    after_assumed: AssumedBytes
    nodes: list[NodeHerd] = msgspec.field(default_factory=list)
    """The preferred nodes (before, then after when another)."""
    measured_pod_bytes: float | None = None
    """What the pod received and sent in its outcome's longest window (None: no measured outcome)."""
    measured_seconds: int = 0
    before_error: float | None = None
    after_error: float | None = None
    before_quietest: bool | None = None
    after_quietest: bool | None = None


class LearningComparison(msgspec.Struct, gc=False):
    """Learned traffic against the constant over the replayed cycles: both under the candidate profile, differing
    only in what the herd estimate assumes each bound pod adds (:mod:`~scheduler_core.history_replay.learning`)."""

    before: str
    """The mode compared from (``constant`` or ``learned``)."""
    after: str
    constant_bytes: float
    """``assumedBytesPerPod`` over the query window (the candidate's)."""
    decay_seconds: float
    """How long a bind weighs on its node (``herdDecaySeconds``, else the traffic refresh interval)."""
    window_seconds: int
    cycles_compared: int = 0
    not_compared: dict[str, int] = msgspec.field(default_factory=dict)
    """Why cycles were not compared → how many."""
    changed: Count = msgspec.field(default_factory=Count)
    before_side: LearningSide = msgspec.field(default_factory=lambda: LearningSide(CONSTANT))
    after_side: LearningSide = msgspec.field(default_factory=lambda: LearningSide(LEARNED))
    cycles: list[LearningCycle] = msgspec.field(default_factory=list)
    cycles_limit: int = 0
    """At most this many cycles are listed (changed ones first, then oldest first); the totals count them all."""
    figures: dict[str, str] = msgspec.field(default_factory=dict)
    caveats: list[str] = msgspec.field(default_factory=list)


class HistoryReplayReport(msgspec.Struct, gc=False):
    """What a candidate profile would have changed over a stretch of recorded history."""

    candidate: CandidateDescription | None = None
    cycles_selected: int = 0
    cycles_replayed: int = 0
    cycles_skipped: int = 0
    skipped: list[SkipReason] = msgspec.field(default_factory=list)
    decisions_changed: Count = msgspec.field(default_factory=Count)
    """Replayed cycles whose preferred node differs (``n``: cycles with a preferred node before or after)."""
    became_unschedulable: int = 0
    """Cycles with a feasible node before and none after."""
    became_schedulable: int = 0
    feasible_to_infeasible: int = 0
    """Node-cycles feasible (reaching prioritize) before and not after."""
    infeasible_to_feasible: int = 0
    ties_created: int = 0
    """Cycles whose preferred node answered the same 0..10 as a node that scored less after, not before."""
    ties_removed: int = 0
    ties_before: int = 0
    ties_after: int = 0
    partially_scored: int = 0
    """Node-cycles scored after without a recorded score of an active plugin (its term left out)."""
    recorded_preferred_differs: int = 0
    """Cycles whose replay under the recorded scenario prefers another node than the record names (profiles changed
    since, or a record the replay cannot reproduce): the "before" figures are the replay's."""
    placements: list[NodePlacements] = msgspec.field(default_factory=list)
    balance: TrafficBalance = msgspec.field(default_factory=TrafficBalance)
    new_rejections: list[Rejection] = msgspec.field(default_factory=list)
    sample: list[ChangedDecision] = msgspec.field(default_factory=list)
    sample_limit: int = 50
    figures: dict[str, str] = msgspec.field(default_factory=dict)
    """Figure name → what it follows from (text)."""
    caveats: list[str] = msgspec.field(default_factory=lambda: list(CAVEATS))
    seconds: float = 0.0
    """Wall time of the replay (decode and replay)."""
    learning: LearningComparison | None = None
    """Learned traffic against the constant over the same cycles, when the replay was asked to compare them
    (:mod:`~scheduler_core.history_replay.learning`); None in every replay that was not, and in those kept before."""


FIGURES: dict[str, str] = {
    "cycles_replayed": "cycles with a readable filter or prioritize record among those selected; each replayed "
    "under its recorded scenario (before) and under the candidate (after)",
    "decisions_changed": "k: cycles whose preferred node (highest final score, first in candidate order on a tie) "
    "differs between before and after; n: replayed cycles with a preferred node before or after",
    "feasible_to_infeasible": "Σ over cycles of the nodes that reached prioritize before and not after",
    "infeasible_to_feasible": "Σ over cycles of the nodes that reached prioritize after and not before",
    "became_unschedulable": "cycles with at least one feasible node before and none after",
    "ties_created": "cycles whose preferred node answers the same 0..10 as a node that scored strictly less after "
    "but not before (ties_removed: the reverse)",
    "placements": "per node, the cycles that preferred it before and after; rate sums: the node's recorded traffic "
    "(raw bytes / recorded window) summed over those cycles that had a figure",
    "balance.spread": "per node with placements, its mean rate at placement = rate sum / placements with a rate; "
    "mean, population stdev, max and min of those means across nodes; max_over_min = max / min",
    "balance.quietest_chosen": "k: cycles whose preferred node had the lowest recorded traffic figure among the "
    "nodes that reached prioritize (in that replay); n: cycles with a preferred node and at least one figure",
    "new_rejections": "nodes that reached prioritize before and were rejected after, by the rejecting filter plugin "
    "and its reason (a node rejected by two plugins counts under both); cycles: cycles with at least one",
    "recorded_preferred_differs": "cycles whose recorded preferred node differs from the replay under the recorded "
    "scenario's (the profile's filters or threshold changed since it was recorded)",
    "partially_scored": "node-cycles that reached prioritize after without a recorded score of an active plugin",
}
"""Figure name → what it follows from (:attr:`HistoryReplayReport.figures`)."""
