"""Where pods really went: watch the pods of our scheduler names and their FailedScheduling events.

When kube-scheduler binds a pod itself (no ``bindVerb``, or another binder), the extender never hears which
node won. This watcher turns the API's view into :class:`Observation` values, plain data handed to a sink
(``manage.py watch_placements`` records them on the matching scheduling cycle):

* ``bound``: a pod's ``spec.nodeName`` became set (from a watch event, or found set by a (re)list);
* ``failed_scheduling``: a ``FailedScheduling`` Event about a pod, reported by one of our scheduler names
  (or, when the Event names no reporter, about a pod we follow); each repeat of an event series is one;
* ``deleted``: a pod we followed disappeared before it was ever bound.

Every observation carries a ``key`` that is the same however often it is seen (relists, restarts), so the
sink can record it idempotently.

:class:`HerdSink` turns the ``bound`` ones into the herd estimate's binds (``scheduler_core.extender.scoring.herd``):
kube-scheduler's own binds never reach the ``bind`` verb, so without it a burst would all see the same quiet node.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from datetime import datetime
from typing import Any, Literal, Protocol

from scheduler_core.kube.watch import (
    DEFAULT_WATCH_TIMEOUT_SECONDS,
    Backoff,
    ListWatcher,
    Resource,
    events_resource,
    pods_resource,
)

__all__ = ["BindRecorder", "HerdSink", "Observation", "PlacementWatcher", "Sink", "WaitingPod", "fan_out"]

logger = logging.getLogger(__name__)

JSON = dict[str, Any]
ObservationKind = Literal["bound", "failed_scheduling", "deleted"]

FAILED_SCHEDULING = "FailedScheduling"


@dataclass(frozen=True, slots=True)
class Observation:
    kind: ObservationKind
    key: str
    """Identical for every sighting of the same fact (``bound:<uid>:<node>``, ``event:<uid>:<count>``, ...)."""
    pod_uid: str
    namespace: str
    name: str
    occurred_at: float
    """Unix seconds: when it happened according to the API (PodScheduled transition, event time), else when
    this watcher saw it. API timestamps may have one-second resolution."""
    node: str = ""
    scheduler_name: str = ""
    reason: str = ""
    message: str = ""


Sink = Callable[[Observation], None]


@dataclass(frozen=True, slots=True)
class WaitingPod:
    """A pod of one of our scheduler names that no node holds yet, as the pod watch knows it now."""

    pod_uid: str
    namespace: str
    name: str
    scheduler_name: str
    since: float
    """Unix seconds: the pod's ``creationTimestamp`` (else when this watcher first saw it)."""


def fan_out(*sinks: Sink) -> Sink:
    """One sink handing each observation to every one of ``sinks``, in order."""

    def deliver(observation: Observation) -> None:
        for sink in sinks:
            sink(observation)

    return deliver


class BindRecorder(Protocol):
    def __call__(self, *, node: str, pod: str, at: float, name: str = "") -> None: ...


class HerdSink:
    """Counts each pod seen bound as one bind for the herd estimate (``record``: a bind log's ``record_bind``).

    Keyed by the pod's UID, as the ``bind`` verb keys its own binds: the log counts a pod once, so a pod schedlens
    bound itself and the watcher then sees bound is not counted twice, nor is a pod seen again by a relist. The
    bind's time is the API's (``PodScheduled``): a (re)list finds pods bound long ago, and those past ``horizon``
    are no longer news for the estimate, so they are not recorded at all. Never raises: it runs in a watch thread.
    """

    def __init__(self, record: BindRecorder, *, horizon_seconds: float, clock: Callable[[], float] = time.time) -> None:
        self._record = record
        self._horizon = horizon_seconds
        self._clock = clock

    def __call__(self, observation: Observation) -> None:
        if observation.kind != "bound" or self._clock() - observation.occurred_at > self._horizon:
            return
        try:
            name = f"{observation.namespace}/{observation.name}"  # what the pod's own traffic is read by
            self._record(node=observation.node, pod=observation.pod_uid, at=observation.occurred_at, name=name)
        except Exception:
            logger.warning("could not count the bind of %s for the herd estimate", observation.pod_uid, exc_info=True)


def parse_time(value: object) -> float | None:
    """RFC 3339 as the API writes it (``2024-05-01T10:00:00Z``, with or without microseconds) → Unix seconds."""
    if not isinstance(value, str) or not value:
        return None
    try:
        return datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp()
    except ValueError:
        return None


def _meta(obj: JSON) -> JSON:
    meta = obj.get("metadata")
    return meta if isinstance(meta, dict) else {}


class _SchedulerPods:
    """Pods of one scheduler name: remembers each pod's node so a change of ``spec.nodeName`` is seen once."""

    def __init__(self, scheduler_name: str, sink: Sink, clock: Callable[[], float]) -> None:
        self.scheduler_name = scheduler_name
        self._sink = sink
        self._clock = clock
        self.nodes: dict[str, str] = {}
        """Pod UID → node ("" while unbound)."""
        self._names: dict[str, tuple[str, str]] = {}
        self._since: dict[str, float] = {}
        self.version = 0
        """Bumped whenever the set of waiting pods may have changed (the live pending list syncs on it)."""

    def waiting(self) -> list[WaitingPod]:
        # Copied in one step (atomic under the GIL): the watch thread goes on changing the dicts meanwhile.
        nodes, names, since = dict(self.nodes), dict(self._names), dict(self._since)
        return [
            WaitingPod(uid, *names.get(uid, ("", "")), self.scheduler_name, since.get(uid, 0.0))
            for uid, node in nodes.items()
            if not node
        ]

    def replace(self, items: list[JSON]) -> None:
        seen: set[str] = set()
        for pod in items:
            uid = self._track(pod)
            if uid:
                seen.add(uid)
        for uid in [u for u in self.nodes if u not in seen]:  # deleted while we were not watching
            self._gone(uid)

    def apply(self, event_type: str, obj: JSON) -> None:
        if event_type == "DELETED":
            uid = str(_meta(obj).get("uid") or "")
            if uid:
                self._track(obj)  # a pod may be bound and deleted in the same breath
                self._gone(uid)
            return
        self._track(obj)

    def _track(self, pod: JSON) -> str:
        meta = _meta(pod)
        uid = str(meta.get("uid") or "")
        if not uid:
            return ""
        namespace, name = str(meta.get("namespace") or ""), str(meta.get("name") or "")
        self._names[uid] = (namespace, name)
        spec = pod.get("spec") if isinstance(pod.get("spec"), dict) else {}
        node = str((spec or {}).get("nodeName") or "")
        before = self.nodes.get(uid)
        self.nodes[uid] = node
        if before is None or bool(before) != bool(node):
            self.version += 1
            self._since.setdefault(uid, parse_time(meta.get("creationTimestamp")) or self._clock())
        if node and node != before:
            self._sink(
                Observation(
                    kind="bound",
                    key=f"bound:{uid}:{node}",
                    pod_uid=uid,
                    namespace=namespace,
                    name=name,
                    node=node,
                    scheduler_name=self.scheduler_name,
                    occurred_at=_scheduled_at(pod) or self._clock(),
                )
            )
        return uid

    def _gone(self, uid: str) -> None:
        node = self.nodes.pop(uid, "")
        namespace, name = self._names.pop(uid, ("", ""))
        self._since.pop(uid, None)
        self.version += 1
        if node:
            return  # a bound pod ending its life is not a placement fact
        self._sink(
            Observation(
                kind="deleted",
                key=f"deleted:{uid}",
                pod_uid=uid,
                namespace=namespace,
                name=name,
                scheduler_name=self.scheduler_name,
                reason="Deleted",
                message="the pod was deleted before it was bound to a node",
                occurred_at=self._clock(),
            )
        )


def _scheduled_at(pod: JSON) -> float | None:
    status = pod.get("status") if isinstance(pod.get("status"), dict) else {}
    for condition in (status or {}).get("conditions") or ():
        if (
            isinstance(condition, dict)
            and condition.get("type") == "PodScheduled"
            and condition.get("status") == "True"
        ):
            return parse_time(condition.get("lastTransitionTime"))
    return None


class _SchedulingEvents:
    """FailedScheduling Events (core/v1 view) about pods of our scheduler names."""

    def __init__(
        self, scheduler_names: Sequence[str], follows: Callable[[str], bool], sink: Sink, clock: Callable[[], float]
    ) -> None:
        self._names = frozenset(scheduler_names)
        self._follows = follows
        self._sink = sink
        self._clock = clock

    def replace(self, items: list[JSON]) -> None:
        for event in items:
            self._consider(event)

    def apply(self, event_type: str, obj: JSON) -> None:
        if event_type != "DELETED":  # events expire after an hour; that is not news
            self._consider(obj)

    def _consider(self, event: JSON) -> None:
        if event.get("reason") != FAILED_SCHEDULING:
            return
        involved = event.get("involvedObject") if isinstance(event.get("involvedObject"), dict) else None
        if not involved or involved.get("kind") != "Pod" or not involved.get("uid"):
            return
        uid = str(involved["uid"])
        source = event.get("source") if isinstance(event.get("source"), dict) else {}
        # events.k8s.io/v1 recorders fill reportingComponent (= the scheduler name); legacy ones source.component.
        reporter = str(event.get("reportingComponent") or (source or {}).get("component") or "")
        if reporter and reporter not in self._names:
            return
        if not reporter and not self._follows(uid):
            return
        series = event.get("series") if isinstance(event.get("series"), dict) else None
        count = int((series or {}).get("count") or event.get("count") or 1)
        when = (
            parse_time((series or {}).get("lastObservedTime"))
            or parse_time(event.get("lastTimestamp"))
            or parse_time(event.get("eventTime"))
            or parse_time(event.get("firstTimestamp"))
            or self._clock()
        )
        event_uid = str(_meta(event).get("uid") or _meta(event).get("name") or "")
        self._sink(
            Observation(
                kind="failed_scheduling",
                key=f"event:{event_uid}:{count}",
                pod_uid=uid,
                namespace=str(involved.get("namespace") or ""),
                name=str(involved.get("name") or ""),
                scheduler_name=reporter,
                reason=FAILED_SCHEDULING,
                message=str(event.get("message") or ""),
                occurred_at=when,
            )
        )


class PlacementWatcher:
    """One pods watch per scheduler name (``spec.schedulerName=`` field selector) and one FailedScheduling
    events watch (``reason=FailedScheduling``; none when ``events`` is None: binds only), each in its own thread,
    all feeding ``sink``."""

    def __init__(
        self,
        *,
        pods: Sequence[tuple[str, Resource]],
        events: Resource | None,
        scheduler_names: Sequence[str],
        sink: Sink,
        watch_timeout_seconds: int = DEFAULT_WATCH_TIMEOUT_SECONDS,
        backoff: Callable[[], Backoff] = Backoff,
        wait: Callable[[float], object] | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        if not scheduler_names:
            raise ValueError("at least one scheduler name is needed")
        self._lock = threading.Lock()
        guarded = self._serialized(sink)
        self._pods = [_SchedulerPods(name, guarded, clock) for name, _ in pods]
        self._watchers = [
            ListWatcher(resource, handler, watch_timeout_seconds=watch_timeout_seconds, backoff=backoff(), wait=wait)
            for (_, resource), handler in zip(pods, self._pods, strict=True)
        ]
        if events is not None:
            self._watchers.append(
                ListWatcher(
                    events,
                    _SchedulingEvents(scheduler_names, self.follows, guarded, clock),
                    watch_timeout_seconds=watch_timeout_seconds,
                    backoff=backoff(),
                    wait=wait,
                )
            )

    @classmethod
    def from_api_client(
        cls, api_client: Any, *, scheduler_names: Sequence[str], sink: Sink, failures: bool = True, **options: Any
    ) -> PlacementWatcher:
        """``failures=False``: the pods only (where they were bound), without the FailedScheduling events."""
        pods = [(n, pods_resource(api_client, field_selector=f"spec.schedulerName={n}")) for n in scheduler_names]
        events = events_resource(api_client, field_selector=f"reason={FAILED_SCHEDULING}") if failures else None
        return cls(pods=pods, events=events, scheduler_names=scheduler_names, sink=sink, **options)

    def _serialized(self, sink: Sink) -> Sink:
        def deliver(observation: Observation) -> None:
            with self._lock:  # one observation at a time, whichever watcher thread saw it
                sink(observation)

        return deliver

    def follows(self, pod_uid: str) -> bool:
        """Whether ``pod_uid`` belongs to one of our scheduler names (as far as the pod watches know)."""
        return any(pod_uid in handler.nodes for handler in self._pods)

    def waiting(self) -> list[WaitingPod]:
        """The pods of our scheduler names not bound to a node now, from the pod watches (no API call)."""
        return [pod for handler in self._pods for pod in handler.waiting()]

    @property
    def waiting_version(self) -> int:
        """Changes whenever :meth:`waiting` may answer differently."""
        return sum(handler.version for handler in self._pods)

    @property
    def pods_synced(self) -> bool:
        """Whether every pod watch has listed once (before that, :meth:`waiting` may miss pods)."""
        return all(w.synced for w in self._watchers[: len(self._pods)])

    def start(self) -> PlacementWatcher:
        # kube-scheduler always names itself as the reporter; only a reporter-less event depends on the pod
        # watches, and one listed before they synced is skipped (it is the rare case, not worth a start-up wait).
        for watcher in self._watchers:
            watcher.start()
        return self

    def stop(self) -> None:
        for watcher in self._watchers:
            watcher.stop()

    @property
    def synced(self) -> bool:
        return all(w.synced for w in self._watchers)

    def wait_synced(self, timeout: float | None = None) -> bool:
        deadline = None if timeout is None else time.monotonic() + timeout
        for watcher in self._watchers:
            remaining = None if deadline is None else max(0.0, deadline - time.monotonic())
            if not watcher.wait_synced(remaining):
                return False
        return True

    def status(self) -> list[dict[str, Any]]:
        return [asdict(w.status()) for w in self._watchers]
