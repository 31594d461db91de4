"""Why a pod is still pending: its recent attempts, each with both halves of the refusal put together.

A waiting pod is refused by two judges. schedlens's filter plugins say, per node, which check failed and what it
saw (the record's ``failures`` and ``details``); kube-scheduler's ``FailedScheduling`` Event says, per reason, how
many nodes its own filters refused (``"0/5 nodes are available: 3 Insufficient cpu, 2 ..."``, as v1.28 writes it).
kube-scheduler folds the extender's per-node answers into that same message, so the reasons it quotes from
schedlens (``"<Plugin>: <reason>"``, ``scheduler_core.extender.scoring.engine``) are dropped from its side: counted
once, as ours.

Plain data in, plain data out: :func:`pair_attempts` lines up a pod's recorded filter calls with the Events, and
:func:`pending_view` groups each attempt's reasons with their counts, finds the nodes that fail one check only
(with the figure the check saw and its limit), and says what changed from one attempt to the next.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Final, Literal

from scheduler_core.extender.record.structs import FilterRecord

__all__ = [
    "CycleAttempt",
    "FailedEvent",
    "KubeReasons",
    "PendingView",
    "ReasonGroup",
    "headline",
    "pair_attempts",
    "parse_failed_scheduling",
    "pending_view",
]

Source = Literal["schedlens", "kube-scheduler"]
SCHEDLENS: Final = "schedlens"
KUBE_SCHEDULER: Final = "kube-scheduler"

PAIRING_SKEW_SECONDS: Final = 2.0
"""An Event may carry a one-second timestamp written a moment before our record's start: the placement watcher's
``CLOCK_SKEW``."""
MAX_NODE_NAMES: Final = 20
"""Names listed per reason (the count is always whole): enough to act on, bounded for a 5,000-node cluster."""

NAMESPACE_NAME: Final = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
"""A namespace's name: a DNS-1123 label (at most 63 characters)."""
POD_NAME: Final = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
"""A pod's name: a DNS-1123 subdomain (at most 253 characters)."""


def name_problem(*, namespace: str, name: str | None = None) -> tuple[str, str] | None:
    """(field, why) for a namespace or pod name Kubernetes would refuse; None when both are well-formed."""
    if len(namespace) > 63 or not NAMESPACE_NAME.match(namespace):
        return "namespace", "not a namespace name (a DNS-1123 label, at most 63 characters)"
    if name is not None and (len(name) > 253 or not POD_NAME.match(name)):
        return "name", "not a pod name (a DNS-1123 subdomain, at most 253 characters)"
    return None


_AVAILABLE = re.compile(r"^(\d+)/(\d+) nodes are available(?:: (.*))?$", re.DOTALL)
_ITEM_SPLIT = re.compile(r", (?=\d+ )")
_ITEM = re.compile(r"^(\d+) (.+)$", re.DOTALL)
_LIMIT = re.compile(r"\b(?:above|below|over|under|more than|less than|at most|at least)\s+(.+)$")


@dataclass(frozen=True, slots=True)
class KubeReasons:
    """A ``FailedScheduling`` message read as kube-scheduler writes it; ``counted`` False when it is not the
    ``"0/N nodes are available"`` form (a bind or PreBind failure, an unbound PVC...): then ``text`` is all there is."""

    text: str
    counted: bool = False
    available: int | None = None
    total: int | None = None
    reasons: tuple[tuple[int, str], ...] = ()
    preemption: str = ""


def parse_failed_scheduling(message: str) -> KubeReasons:
    """``"0/5 nodes are available: 3 Insufficient cpu, 2 node(s) didn't match Pod's node affinity/selector.
    preemption: 0/5 nodes are available: 5 Preemption is not helpful for scheduling."`` → the counts by reason."""
    text = message.strip()
    head, preemption = text, ""
    if " preemption: " in text:
        head, _, preemption = text.partition(" preemption: ")
        preemption = preemption.strip().rstrip(".")
    head = head.strip().rstrip(".")
    match = _AVAILABLE.match(head)
    if match is None:
        return KubeReasons(text=text)
    reasons: list[tuple[int, str]] = []
    for item in _ITEM_SPLIT.split(match.group(3) or ""):
        counted = _ITEM.match(item.strip())
        if counted is not None:
            reasons.append((int(counted.group(1)), counted.group(2).strip()))
        elif item.strip():
            reasons.append((0, item.strip()))
    return KubeReasons(
        text=text,
        counted=True,
        available=int(match.group(1)),
        total=int(match.group(2)),
        reasons=tuple(reasons),
        preemption=preemption,
    )


@dataclass(frozen=True, slots=True)
class CycleAttempt:
    """A recorded cycle of the pod: its filter call's record, or None when it has none."""

    at: float
    cycle_id: int | None
    profile: str
    filter_record: FilterRecord | None
    candidates: int = 0
    error: str = ""


@dataclass(frozen=True, slots=True)
class FailedEvent:
    """One ``FailedScheduling`` (each repeat of an Event series is one) seen by the placement watcher."""

    at: float
    message: str


@dataclass(frozen=True, slots=True)
class ReasonGroup:
    source: Source
    reason: str
    nodes: int
    """How many nodes this check refused (one node may fail several checks: then it counts in each)."""
    plugin: str = ""
    limit: str = ""
    """The limit the check applies, as its reason states it ("125 MB/s"); "" when the reason names none."""
    node_names: tuple[str, ...] = ()
    """The first :data:`MAX_NODE_NAMES` of them, by name (kube-scheduler names none)."""
    figures: tuple[tuple[str, str], ...] = ()
    """(node, what the check saw there) for the named nodes that have a figure."""

    @property
    def label(self) -> str:
        return f"{SCHEDLENS} {self.plugin}" if self.source == SCHEDLENS else KUBE_SCHEDULER

    @property
    def key(self) -> tuple[str, str, str]:
        return (self.source, self.plugin, self.reason)


@dataclass(frozen=True, slots=True)
class NearMiss:
    """A node refused by one check only: the figure that check saw and the limit it applies."""

    node: str
    plugin: str
    reason: str
    figure: str
    limit: str


@dataclass(frozen=True, slots=True)
class Attempt:
    at: float
    cycle_id: int | None
    profile: str
    groups: tuple[ReasonGroup, ...]
    """Largest first; schedlens's and kube-scheduler's side by side."""
    closest: tuple[NearMiss, ...]
    nodes_total: int | None
    """The cluster's nodes as kube-scheduler counted them, else the candidates our filter was asked about."""
    passed: int | None
    """Nodes that passed our filter (None: our filter was not asked)."""
    message: str = ""
    """kube-scheduler's own words, whole."""
    preemption: str = ""
    error: str = ""
    changes: tuple[str, ...] = ()
    """What differs from the attempt before it (empty for the first)."""

    @property
    def summary(self) -> str:
        return headline(self.groups, message=self.message, error=self.error)


@dataclass(frozen=True, slots=True)
class PendingView:
    attempts: tuple[Attempt, ...]
    """Newest first."""
    summary: str
    profile: str = ""

    @property
    def latest(self) -> Attempt | None:
        return self.attempts[0] if self.attempts else None


def pair_attempts(
    cycles: Sequence[CycleAttempt], events: Sequence[FailedEvent]
) -> list[tuple[CycleAttempt | None, FailedEvent | None]]:
    """Oldest first: each cycle with the first Event that followed it before the next cycle started; an Event with
    no cycle of its own is an attempt kube-scheduler refused before asking our filter."""
    timeline = sorted(
        [(c.at, 0, i) for i, c in enumerate(cycles)]
        + [(e.at + PAIRING_SKEW_SECONDS, 1, i) for i, e in enumerate(events)]
    )
    attempts: list[tuple[CycleAttempt | None, FailedEvent | None]] = []
    open_cycle: int | None = None  # the index in ``attempts`` of a cycle still waiting for its Event
    for _, kind, index in timeline:
        if kind == 0:
            attempts.append((cycles[index], None))
            open_cycle = len(attempts) - 1
        elif open_cycle is not None:
            attempts[open_cycle] = (attempts[open_cycle][0], events[index])
            open_cycle = None
        else:
            attempts.append((None, events[index]))
    return attempts


def _limit(reason: str) -> str:
    match = _LIMIT.search(reason)
    return match.group(1).strip() if match else ""


def _ours(record: FilterRecord) -> tuple[list[ReasonGroup], list[NearMiss], set[str]]:
    """Our filter's refusals grouped by (plugin, reason), the nodes failing one check only, and the per-node strings
    kube-scheduler received (to recognise them in its message)."""
    failures, details = record.failures, record.details
    by_check: dict[tuple[str, str], list[str]] = {}
    closest: list[NearMiss] = []
    sent: set[str] = set()
    for node, checks in failures.items():
        for plugin, reason in checks.items():
            by_check.setdefault((plugin, reason), []).append(node)
        sent.add("; ".join(f"{plugin}: {reason}" for plugin, reason in checks.items()))
        if len(checks) == 1:
            [(plugin, reason)] = checks.items()
            figure = (details.get(node) or {}).get(plugin, "")
            closest.append(NearMiss(node=node, plugin=plugin, reason=reason, figure=figure, limit=_limit(reason)))
    groups = []
    for (plugin, reason), nodes in by_check.items():
        named = sorted(nodes)[:MAX_NODE_NAMES]
        figures = tuple((n, (details.get(n) or {}).get(plugin, "")) for n in named)
        groups.append(
            ReasonGroup(
                source=SCHEDLENS,
                plugin=plugin,
                reason=reason,
                nodes=len(nodes),
                limit=_limit(reason),
                node_names=tuple(named),
                figures=tuple((n, f) for n, f in figures if f),
            )
        )
    closest.sort(key=lambda miss: miss.node)
    return groups, closest, sent


def _theirs(parsed: KubeReasons, sent: set[str], plugins: set[str]) -> list[ReasonGroup]:
    groups = []
    for count, reason in parsed.reasons:
        quoted = reason in sent or any(reason.startswith(f"{plugin}: ") for plugin in plugins)
        if not quoted:  # kube-scheduler repeating our answer is already counted, per check, on our side
            groups.append(ReasonGroup(source=KUBE_SCHEDULER, reason=reason, nodes=count))
    return groups


def _attempt(cycle: CycleAttempt | None, event: FailedEvent | None) -> Attempt:
    groups: list[ReasonGroup] = []
    closest: list[NearMiss] = []
    sent: set[str] = set()
    plugins: set[str] = set()
    passed: int | None = None
    candidates: int | None = None
    record = cycle.filter_record if cycle is not None else None
    if record is not None:
        groups, closest, sent = _ours(record)
        plugins = {group.plugin for group in groups}
        passed = len(record.passed)
        candidates = len(record.nodes) or (cycle.candidates if cycle is not None else None)
    parsed = parse_failed_scheduling(event.message) if event is not None else KubeReasons(text="")
    groups += _theirs(parsed, sent, plugins)
    groups.sort(key=lambda g: (-g.nodes, g.source != SCHEDLENS, g.plugin, g.reason))
    return Attempt(
        at=cycle.at if cycle is not None else event.at if event is not None else 0.0,
        cycle_id=cycle.cycle_id if cycle is not None else None,
        profile=cycle.profile if cycle is not None else "",
        groups=tuple(groups),
        closest=tuple(closest),
        nodes_total=parsed.total if parsed.total is not None else candidates,
        passed=passed,
        message=parsed.text,
        preemption=parsed.preemption,
        error=cycle.error if cycle is not None else "",
    )


def _nodes(count: int) -> str:
    return f"{count} node" if count == 1 else f"{count} nodes"


def headline(groups: Sequence[ReasonGroup], *, message: str = "", error: str = "") -> str:
    """One line, both sides: ``12 nodes: receive rate above 125 MB/s (schedlens TrafficThreshold); 3 nodes:
    Insufficient cpu (kube-scheduler)``. Without counted reasons, kube-scheduler's or the extender's own words."""
    if groups:
        return "; ".join(f"{_nodes(g.nodes)}: {g.reason} ({g.label})" for g in groups)
    if message:
        return f"{message} ({KUBE_SCHEDULER})"
    if error:
        return f"{error} ({SCHEDLENS})"
    return "no attempt seen yet"


def changes(before: Attempt, after: Attempt) -> tuple[str, ...]:
    """What ``after`` says that ``before`` did not: reasons new, gone or counting other nodes, nodes newly close."""
    said: list[str] = []
    old = {g.key: g for g in before.groups}
    new = {g.key: g for g in after.groups}
    for key, group in new.items():
        was = old.get(key)
        if was is None:
            said.append(f"new: {_nodes(group.nodes)}: {group.reason} ({group.label})")
        elif was.nodes != group.nodes:
            said.append(f"{group.reason} ({group.label}): {was.nodes} → {group.nodes} nodes")
    for key, group in old.items():
        if key not in new:
            said.append(f"gone: {group.reason} ({group.label}), {_nodes(group.nodes)} before")
    if before.nodes_total != after.nodes_total and None not in (before.nodes_total, after.nodes_total):
        said.append(f"nodes: {before.nodes_total} → {after.nodes_total}")
    if before.passed != after.passed and None not in (before.passed, after.passed):
        said.append(f"passing schedlens's filter: {before.passed} → {after.passed}")
    was_close = {m.node for m in before.closest}
    for miss in after.closest:
        if miss.node not in was_close:
            said.append(f"{miss.node} now fails one check only: {miss.reason}")
    return tuple(said)


def pending_view(cycles: Sequence[CycleAttempt], events: Sequence[FailedEvent], *, limit: int = 20) -> PendingView:
    """A waiting pod's last ``limit`` attempts, newest first, each with what changed since the one before."""
    pairs = pair_attempts(cycles, events)[-(limit + 1) :]
    attempts = [_attempt(cycle, event) for cycle, event in pairs]
    described: list[Attempt] = []
    for index, attempt in enumerate(attempts):
        if index:
            attempt = replace(attempt, changes=changes(attempts[index - 1], attempt))
        described.append(attempt)
    kept = described[-limit:] if limit else []
    kept.reverse()
    latest = kept[0] if kept else None
    profile = next((a.profile for a in kept if a.profile), "")
    return PendingView(
        attempts=tuple(kept), summary=latest.summary if latest is not None else headline(()), profile=profile
    )
