"""The four extender verbs as plain functions of request bytes: answer bytes plus the record of the call.

HTTP-agnostic so they run the same under Django, in the simulator and in unit tests. Nothing here waits on
Prometheus, the database or Redis: traffic comes from an in-memory view that background work keeps fresh.
"""

from __future__ import annotations

import logging
import os
import socket
import time
import uuid
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from functools import partial
from operator import attrgetter
from typing import Protocol

import msgspec

from scheduler_core.extender.candidates import CandidatesMemo, Resolved, Window
from scheduler_core.extender.filter_answer import (
    UNKNOWN_NODE,
    echo_marker,
    encoded_filter_result,
    fail_unknown,
    filter_result,
    not_held,
)
from scheduler_core.extender.lru import LRU
from scheduler_core.extender.protocol import wire
from scheduler_core.extender.protocol.binding import Binder, PodReader
from scheduler_core.extender.protocol.cluster import (
    ClusterView,
    NodeInfo,
    PodInfo,
    knows_all_nodes,
    node_info,
    node_lookup,
    pod_info,
)
from scheduler_core.extender.record.structs import (
    BIND,
    FILTER,
    NODE_CACHE,
    PREEMPT,
    PRIORITIZE,
    SOURCE_CONSTANT,
    BindIntent,
    BindRecord,
    FilterRecord,
    NodeMode,
    PluginScores,
    PreemptRecord,
    VerbEvent,
)
from scheduler_core.extender.scoring.answer import answers
from scheduler_core.extender.scoring.engine import judges_nodes_alone, run_filter, run_filter_window, run_prioritize
from scheduler_core.extender.scoring.herd import RecentBinds
from scheduler_core.extender.scoring.plugins import CycleContext
from scheduler_core.extender.scoring.plugins.base import SharedColumns, TrafficView, new_shared_columns, shared_column
from scheduler_core.extender.scoring.profiles import Profile
from scheduler_core.extender.scoring.workload_traffic import LearnedTrafficStore

SERVER_ID = f"{socket.gethostname()}:{os.getpid()}"
log = logging.getLogger(__name__)
ASSUMED_KEPT = 4096
"""Pods whose own assumed bytes a process keeps between their prioritize and their bind (the pods in flight)."""
_name = attrgetter("name")


class CycleInputs(Protocol):
    """Where a verb call's traffic and recent binds come from (e.g. Redis snapshots shared by replicas).

    ``for_call`` runs once per filter/prioritize/preempt call, before any plugin: one read (one Redis round
    trip) serves every plugin of the call. Neither method may raise or block for long.
    """

    def for_call(self, profile: Profile, now: float) -> tuple[TrafficView, RecentBinds]: ...

    def record_bind(self, *, node: str, pod: str, at: float, bytes: float | None = None, name: str = "") -> None: ...


class BindJournal(Protocol):
    """Where a bind's intent is recorded before the API server is asked (the spool: ``dashboard.bind_intents``)."""

    def intend(self, intent: BindIntent) -> int | None:
        """Record ``intent`` durably; returns what the bind's record settles (``VerbResult.intent``), or None when
        it was not recorded and the bind may go on without it. Raises when the bind must not go on."""
        ...


@dataclass(frozen=True, slots=True)
class VerbResult:
    status: int
    body: bytes
    event: VerbEvent
    intent: int | None = None
    """A bind's intent (``BindJournal.intend``) that the spooled record settles: removed as the record is appended."""


@dataclass(frozen=True, slots=True)
class _Start:
    at: float
    """Wall clock (Unix seconds) for the record."""
    perf: float
    """Monotonic counter for the duration."""


def _error_body(message: str, path: str = "") -> bytes:
    payload = {"error": message, "path": path} if path else {"error": message}
    return wire.encode(payload)


def _reads_images(plugins: Iterable[object]) -> bool:
    """Whether any of ``plugins`` reads ``NodeInfo.images`` (declared by ``reads_node_images = True``)."""
    return any(getattr(plugin, "reads_node_images", False) for plugin in plugins)


class Extender:
    """Serves the verbs for a set of profiles."""

    def __init__(
        self,
        profiles: Mapping[str, Profile],
        *,
        cluster: ClusterView,
        traffic: TrafficView,
        binder: Binder,
        clock: Callable[[], float] = time.time,
        inputs: CycleInputs | None = None,
        journal: BindJournal | None = None,
        learned: LearnedTrafficStore | None = None,
    ) -> None:
        self.profiles = profiles
        self.cluster = cluster
        self.traffic = traffic
        self.binder = binder
        self.clock = clock
        self.inputs = inputs
        """When set, replaces ``traffic`` for the verbs and learns of every successful bind (herd effect)."""
        self.journal = journal
        """When set, a bind through a binder that can read the pod back (``PodReader``: the API server's) records
        its intent here before asking (``scheduler_core.extender.record.bind_intents``)."""
        self.learned = LearnedTrafficStore() if learned is None else learned
        """Traffic learned per workload, kept current by background work (the outcome job): read, never waited on."""
        self._assumed: LRU[tuple[str, str], float | None] = LRU(ASSUMED_KEPT)
        """(profile, pod key) → the bytes the profile's last prioritize of the pod assumed when not the constant
        (learned, overridden; None: the constant): the bind's request names only the pod, so the bind log learns them
        from here. Keyed by profile too: profiles differ in learning, and a bind records its own profile's figure."""
        self._candidates_memo = CandidatesMemo()

    # --- shared plumbing ---------------------------------------------------------------------------

    def _event(self, verb: str, profile: str, started: _Start, event_id: str = "", **fields: object) -> VerbEvent:
        return VerbEvent(
            event_id=event_id or uuid.uuid4().hex,
            verb=verb,
            profile=profile,
            started_at=started.at,
            duration_ms=round((time.perf_counter() - started.perf) * 1000, 3),
            server=SERVER_ID,
            profile_version=known.version() if (known := self.profiles.get(profile)) is not None else "",
            **fields,  # type: ignore[arg-type]
        )

    def _start(self, profile_name: str) -> tuple[Profile | None, _Start]:
        return self.profiles.get(profile_name), _Start(self.clock(), time.perf_counter())

    def _refuse(self, verb: str, profile: str, started: _Start, status: int, error: wire.WireError | str) -> VerbResult:
        message, path = (error.message, error.path) if isinstance(error, wire.WireError) else (error, "")
        event = self._event(verb, profile, started, http_status=status, error=message, error_path=path)
        return VerbResult(status, _error_body(message, path), event)

    def refuse(self, verb: str, profile_name: str, status: int, message: str) -> VerbResult:
        """Refuse a call before decoding it (bad Content-Type, …); the refusal is recorded like any call."""
        _, started = self._start(profile_name)
        return self._refuse(verb, profile_name, started, status, message)

    def _unknown_profile(self, verb: str, profile: str, started: _Start) -> VerbResult:
        known = ", ".join(sorted(self.profiles))
        return self._refuse(verb, profile, started, 404, f"unknown profile {profile!r} (known: {known})")

    @staticmethod
    def _pod_fields(pod: PodInfo) -> dict[str, str]:
        return {
            "pod_namespace": pod.namespace,
            "pod_name": pod.name,
            "pod_uid": pod.uid,
            "pod_resource_version": pod.resource_version,
        }

    def _candidates(
        self, body: bytes, *, images: bool = True, windowed: bool = False
    ) -> tuple[wire.ExtenderArgs, NodeMode, Resolved | Window, list[msgspec.Raw]]:
        """The decoded body and its candidates as NodeInfo, with where to keep per-node columns of them.

        ``images``: some plugin of the call reads the nodes' images. Without it a full-Nodes item is decoded only
        as far as its ``metadata`` (the rest of a 10–20 KB node is skipped unread), which is most of a full-Nodes
        filter's time at 1000 nodes. A NodeNames list seen before is not decoded or looked up again
        (:mod:`scheduler_core.extender.candidates`). ``windowed``: NodeNames that are all in the node view come as a
        :class:`Window` of it (for filters that judge each node alone).
        """
        args, raw_names = wire.decode_extender_args_known_names(body, self._candidates_memo.known)
        if args.nodes is not None:
            raws = args.nodes.items or []
            if images:
                infos = [node_info(wire.decode_node(raw, i)) for i, raw in enumerate(raws)]
            else:
                metas = [wire.decode_node_meta(raw, i).metadata for i, raw in enumerate(raws)]
                infos = [NodeInfo(meta.name, meta.labels or {}) for meta in metas]
            wire.check_node_names(list(map(_name, infos)), wire.NODE_ITEM_NAME_PATH)
            return args, "nodes", Resolved(infos, new_shared_columns()), raws
        names = args.node_names or []
        window = self._candidates_memo.window(names, self.cluster) if windowed and names else None
        if window is not None:
            return args, "names", window, []
        return args, "names", self._candidates_memo.candidates(raw_names, names, self.cluster), []

    def _unknown(self, mode: NodeMode, nodes: Sequence[NodeInfo], shared: SharedColumns) -> set[str]:
        """NodeNames entries a node cache that knows every node does not hold (never in full-Nodes mode).

        Once per candidate list and state of the cache (``nodes`` is looked up again when the state changes).
        """
        if mode != "names" or not knows_all_nodes(self.cluster):
            return set()
        unknown = partial(not_held, nodes, node_lookup(self.cluster))
        return set(shared_column(shared, "unknown", (nodes,), unknown))

    def _context(self, profile: Profile, pod: PodInfo, now: float, shared: SharedColumns | None = None) -> CycleContext:
        shared = new_shared_columns() if shared is None else shared
        learned = self.learned.current
        if self.inputs is None:
            return CycleContext(
                pod=pod, cluster=self.cluster, traffic=self.traffic, now=now, shared=shared, learned=learned
            )
        traffic, binds = self.inputs.for_call(profile, now)
        return CycleContext(
            pod=pod, cluster=self.cluster, traffic=traffic, now=now, binds=binds, shared=shared, learned=learned
        )

    # --- verbs ---------------------------------------------------------------------------------------

    def filter(self, profile_name: str, body: bytes) -> VerbResult:
        profile, started = self._start(profile_name)
        if profile is None:
            return self._unknown_profile(FILTER, profile_name, started)
        try:
            images = _reads_images(profile.filters)
            args, mode, candidates, raws = self._candidates(body, images=images, windowed=judges_nodes_alone(profile))
        except wire.WireError as exc:
            return self._refuse(FILTER, profile_name, started, 400, exc)
        pod = pod_info(args.pod)
        if isinstance(candidates, Window):
            context = self._context(profile, pod, started.at, candidates.cluster.shared)
            everyone = candidates.cluster.nodes
            decision, record = run_filter_window(profile, context, everyone, candidates.names, candidates.at)
            if len(decision.passed) > 1:  # kube-scheduler asks prioritize only when two or more nodes pass
                passing = [everyone[candidates.at[i]] for i in decision.passed]
                self._candidates_memo.prime(record.passed, passing, candidates.cluster.state)
            answer, recorded = encoded_filter_result(decision, record)
            return self._filtered(profile_name, started, mode, record, answer, recorded, pod)
        nodes, shared = candidates.nodes, candidates.shared
        decision, record = run_filter(profile, self._context(profile, pod, started.at, shared), nodes)
        unknown = self._unknown(mode, nodes, shared)
        if unknown:
            fail_unknown(decision, record, nodes, unknown)
        if len(decision.passed) > 1:
            self._candidates_memo.prime(record.passed, [nodes[i] for i in decision.passed], candidates.state)
        if mode == "nodes":
            result = filter_result(decision, record)
            result.node_names = None
            result.nodes = wire.NodeListOut(items=[raws[i] for i in decision.passed])
            answer = wire.encode(result)
            result.nodes = wire.NodeListOut(items=[echo_marker(nodes[i].name) for i in decision.passed])
            recorded = msgspec.Raw(wire.encode(result))
        elif unknown:
            answer, recorded = encoded_filter_result(decision, record)
        else:  # the same verdicts, the same answer: encoded once per outcome
            encode = partial(encoded_filter_result, decision, record)
            key = ("filter answer", profile_name, id(decision.outcome))
            answer, recorded = shared_column(shared, key, (decision.outcome,), encode)
        return self._filtered(profile_name, started, mode, record, answer, recorded, pod)

    def _filtered(
        self,
        profile_name: str,
        started: _Start,
        mode: NodeMode,
        record: FilterRecord,
        answer: bytes,
        recorded: msgspec.Raw,
        pod: PodInfo,
    ) -> VerbResult:
        event = self._event(
            FILTER,
            profile_name,
            started,
            http_status=200,
            node_mode=mode,
            filter=record,
            response=recorded,
            **self._pod_fields(pod),
        )
        return VerbResult(200, answer, event)

    def prioritize(self, profile_name: str, body: bytes) -> VerbResult:
        profile, started = self._start(profile_name)
        if profile is None:
            return self._unknown_profile(PRIORITIZE, profile_name, started)
        try:
            scorers = (s.plugin for s in profile.scorers)
            args, mode, candidates, _ = self._candidates(body, images=_reads_images(scorers))
        except wire.WireError as exc:
            return self._refuse(PRIORITIZE, profile_name, started, 400, exc)
        assert isinstance(candidates, Resolved)  # never a window: not asked for
        nodes, shared = candidates.nodes, candidates.shared
        pod = pod_info(args.pod)
        context = self._context(profile, pod, started.at, shared)
        record = run_prioritize(profile, context, nodes)
        if context.herd_reconciled:  # per bind, beside the engine's per-node herd columns
            for plugin in record.plugins:
                plugin.herd_reconciled = context.herd_reconciled.get(plugin.name, plugin.herd_reconciled)
        own = next((p.pod_assumed for p in record.plugins if p.pod_assumed is not None), None)
        key = (profile_name, pod.uid or pod.key)
        if own is not None and own.source != SOURCE_CONSTANT:
            self._assumed.put(key, own.bytes)
        elif key in self._assumed:  # a figure of an earlier prioritize (an override since removed) is not this one
            self._assumed.put(key, None)
        if unknown := self._unknown(mode, nodes, shared):
            forced = [i for i, name in enumerate(record.nodes) if name in unknown]
            for i in forced:
                record.final[i] = 0.0
            record.extender = answers(record.final, record.answer_scale, forced)
            zero = [0.0] * len(nodes)
            notes = dict.fromkeys(sorted(unknown), UNKNOWN_NODE)
            record.plugins.append(PluginScores(name=NODE_CACHE, weight=0, scores=zero, notes=notes, applicable=False))
        names = record.nodes
        prefixes = shared_column(shared, "host_prefixes", (names,), partial(wire.host_prefixes, names))
        answer = wire.encode_host_priorities(names, record.extender, prefixes)
        event = self._event(
            PRIORITIZE,
            profile_name,
            started,
            http_status=200,
            node_mode=mode,
            prioritize=record,
            response=msgspec.Raw(answer),
            answer_derived=True,  # the answer above is exactly ``record``'s hosts and extender scores
            **self._pod_fields(pod),
        )
        return VerbResult(200, answer, event)

    def bind(self, profile_name: str, body: bytes) -> VerbResult:
        profile, started = self._start(profile_name)
        if profile is None:
            return self._unknown_profile(BIND, profile_name, started)
        try:
            args = wire.decode_binding_args(body)
        except wire.WireError as exc:
            return self._refuse(BIND, profile_name, started, 400, exc)
        for value, path in (
            (args.pod_name, "$.PodName"),
            (args.pod_namespace, "$.PodNamespace"),
            (args.node, "$.Node"),
        ):
            if not value:
                return self._refuse(BIND, profile_name, started, 400, wire.WireError("must not be empty", path))
        event_id = uuid.uuid4().hex
        try:
            intent = self._intend(profile_name, started, event_id, args)
        except Exception:  # not bound: a bind nobody could account for is what the intent exists to prevent
            return self._not_intended(profile_name, started, event_id, args)
        outcome = self.binder.bind(namespace=args.pod_namespace, name=args.pod_name, uid=args.pod_uid, node=args.node)
        if outcome.ok and self.inputs is not None:
            name = f"{args.pod_namespace}/{args.pod_name}"
            pod_key = args.pod_uid or name
            try:
                assumed = self._assumed.get((profile_name, pod_key))
                self.inputs.record_bind(node=args.node, pod=pod_key, at=self.clock(), bytes=assumed, name=name)
            except Exception:  # the pod is bound: a lost herd hint must not turn that into an error
                log.exception("could not record the bind of %s to %s for the herd estimate", pod_key, args.node)
        # kube-scheduler formats Error with fmt.Errorf: a "%" would be mangled (protocol doc §2.2).
        error = outcome.error.replace("%", " percent")
        answer = wire.encode(wire.ExtenderBindingResult(error=error))
        event = self._event(
            BIND,
            profile_name,
            started,
            event_id,
            http_status=200,
            error=error,
            bind=BindRecord(
                node=args.node, detail=outcome.detail, api_status=outcome.status, simulated=outcome.simulated
            ),
            response=msgspec.Raw(answer),
            pod_namespace=args.pod_namespace,
            pod_name=args.pod_name,
            pod_uid=args.pod_uid,
        )
        return VerbResult(200, answer, event, intent)

    def _intend(self, profile_name: str, started: _Start, event_id: str, args: wire.ExtenderBindingArgs) -> int | None:
        """Record the bind's intent before the API server is asked, when the binder can read the pod back: a process
        that dies before the bind's record is spooled leaves it, and a restarted replica reconciles it against the
        pod (``scheduler_core.extender.record.bind_intents``). One local SQLite append; no API round trip."""
        if self.journal is None or not isinstance(self.binder, PodReader):
            return None
        planned = BindIntent(
            event_id=event_id,
            profile=profile_name,
            started_at=started.at,
            pod_namespace=args.pod_namespace,
            pod_name=args.pod_name,
            pod_uid=args.pod_uid,
            node=args.node,
            server=SERVER_ID,
        )
        return self.journal.intend(planned)

    def _not_intended(
        self, profile_name: str, started: _Start, event_id: str, args: wire.ExtenderBindingArgs
    ) -> VerbResult:
        message = "schedlens could not record this bind's intent (spool unavailable); not bound"
        log.exception("%s: %s/%s to %s", message, args.pod_namespace, args.pod_name, args.node)
        event = self._event(
            BIND,
            profile_name,
            started,
            event_id,
            http_status=503,
            error=message,
            pod_namespace=args.pod_namespace,
            pod_name=args.pod_name,
            pod_uid=args.pod_uid,
        )
        return VerbResult(503, _error_body(message), event)

    def preempt(self, profile_name: str, body: bytes) -> VerbResult:
        """Keep only candidate nodes this profile's filters accept; victims are passed through untouched."""
        profile, started = self._start(profile_name)
        if profile is None:
            return self._unknown_profile(PREEMPT, profile_name, started)
        try:
            args = wire.decode_preemption_args(body)
        except wire.WireError as exc:
            return self._refuse(PREEMPT, profile_name, started, 400, exc)
        meta: dict[str, wire.MetaVictims] = {}
        if args.node_name_to_meta_victims is not None:
            meta = {n: v for n, v in args.node_name_to_meta_victims.items() if v is not None}
        elif args.node_name_to_victims is not None:
            meta = {
                n: wire.MetaVictims(
                    pods=[wire.MetaPod(uid=p.metadata.uid) for p in v.pods],
                    num_pdb_violations=v.num_pdb_violations,
                )
                for n, v in args.node_name_to_victims.items()
                if v is not None
            }
        pod = pod_info(args.pod)
        names: Sequence[str] = list(meta)
        nodes = [self.cluster.node(name) or NodeInfo(name) for name in names]
        context = self._context(profile, pod, started.at)
        decision, record = run_filter(profile, context, nodes)
        if unknown := self._unknown("names", nodes, context.shared):
            fail_unknown(decision, record, nodes, unknown)
        kept = [nodes[i].name for i in decision.passed]
        answer = wire.encode(wire.ExtenderPreemptionResult(node_name_to_meta_victims={n: meta[n] for n in kept}))
        mode: NodeMode = "names" if args.node_name_to_meta_victims is not None else "nodes"
        event = self._event(
            PREEMPT,
            profile_name,
            started,
            http_status=200,
            node_mode=mode,
            preempt=PreemptRecord(
                candidates=list(names), kept=kept, dropped={**decision.failed, **decision.unresolvable}
            ),
            response=msgspec.Raw(answer),
            **self._pod_fields(pod),
        )
        return VerbResult(200, answer, event)
