"""The explanation on the pod: an ``events.k8s.io/v1`` Event ``Explained`` once a pod's bind is recorded.

Emitted by the ingester (``dashboard.ingest.cycles``), after the transaction that folded a successful bind into
its cycle: only there are the cycle's filter and prioritize records together (any replica may have answered any
verb) and its id known, for the link. When kube-scheduler bound the pod itself, by whichever of the placement watcher
(``dashboard.placements.services``) and the ingester completes the cycle last, once
(``dashboard.ingest.observed_binds``). Never on a verb's request path:
they only put a job in a bounded queue; one daemon thread per process computes the summary
(``scheduler_core.explanation.explain.explain_summary``: the explanation's own summary, explaining only the nodes it
names) and writes the Event through ``scheduler_core.kube.events.KubernetesEventWriter`` with a short timeout. A full
queue, a refusing or slow API server drops the Event and counts it in ``schedlens_pod_events_dropped_total{reason}``;
each failure kind is logged once per process, nothing is raised. An Event owed (a recorded bind, a claimed observation)
is always either queued or counted there: no API configured (``unconfigured``), a cycle that names no pod or node
(``no_pod``, ``no_node``) or is gone (``no_cycle``), an error preparing it (``error``); never skipped silently.

``SCHEDLENS_POD_EVENTS`` (on unless ``SCHEDLENS_BIND_MODE=simulated``) turns it off. Of a burst of one controller's
pods, only the first in each window of ``SCHEDLENS_POD_EVENT_BURST_SECONDS`` gets one (``EventBursts``), its note
saying so; the others are counted in ``schedlens_pod_events_folded_total``.
"""

from __future__ import annotations

import logging
import os
import queue
import socket
import threading
from collections.abc import Callable
from dataclasses import dataclass

from django.conf import settings
from prometheus_client import Counter

from dashboard.models import SchedulingCycle
from dashboard.selectors.cycles import cycle_list_with_calls, cycle_read, cycle_traffic_terms, records_summary
from scheduler_core.extender.record.structs import CycleRecords
from scheduler_core.kube.pod_event import EventBursts, EventWriter, PodEvent

log = logging.getLogger(__name__)

REASON = "Explained"
ACTION = "Scheduling"
CONTROLLER = "schedlens"
QUEUE_SIZE = 1000
UNCONFIGURED = "no Kubernetes configuration: Explained Events on pods are not written"

POD_EVENTS_DROPPED = Counter(
    "schedlens_pod_events_dropped",
    "Explained Events on pods not written: queue full, API server refusing (HTTP status), timeout, unreachable, "
    "no API configured, a cycle without its pod or node, an error.",
    ["reason"],
)
POD_EVENTS_WRITTEN = Counter("schedlens_pod_events_written", "Explained Events written on pods.")
POD_EVENTS_FOLDED = Counter(
    "schedlens_pod_events_folded",
    "Explained Events not written by SCHEDLENS_POD_EVENT_BURST_SECONDS: a pod of a burst whose first pod has one.",
)


@dataclass(frozen=True, slots=True)
class PodEventJob:
    namespace: str
    name: str
    uid: str
    summary: Callable[[], str]
    """Computed in the emitter's thread (the explanation is not free)."""
    link: str = ""
    burst_note: str = ""
    """That the pod's burst has no other Event (``EventBursts.note``): kept whole, like the link."""
    reason: str = REASON
    """``Explained`` (a placement), or ``Unschedulable`` (a waiting pod: ``dashboard.placements.pending_events``)."""
    event_type: str = "Normal"


def reporting_instance() -> str:
    return f"{socket.gethostname()}:{os.getpid()}"


class PodEventEmitter:
    """A bounded queue and one daemon thread writing its jobs; :meth:`submit` never blocks."""

    def __init__(
        self,
        writer: EventWriter | None = None,
        *,
        factory: Callable[[], EventWriter | None] | None = None,
        queue_size: int = QUEUE_SIZE,
        burst_seconds: float | None = None,
    ) -> None:
        """``writer``, or ``factory`` called once in the thread to make it (finding the cluster's API is I/O);
        ``burst_seconds`` (default ``SCHEDLENS_POD_EVENT_BURST_SECONDS``): which pods of a burst get an Event."""
        self._writer = writer
        self._factory = factory
        self._unavailable = writer is None and factory is None
        self._queue: queue.Queue[PodEventJob] = queue.Queue(maxsize=queue_size)
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()
        self._logged: set[str] = set()
        self._pid = os.getpid()
        self.instance = reporting_instance()
        seconds = settings.SCHEDLENS_POD_EVENT_BURST_SECONDS if burst_seconds is None else burst_seconds
        self.bursts = EventBursts(seconds)

    @property
    def unavailable(self) -> bool:
        """No API to write to (the factory answered that there is no Kubernetes configuration): callers may skip
        preparing jobs, and count each skipped one with :meth:`drop` (``"unconfigured"``). False while the factory is
        still running in the thread: the jobs submitted meanwhile are written once it has answered."""
        return self._unavailable

    def submit(self, job: PodEventJob) -> bool:
        self._ensure_thread()
        try:
            self._queue.put_nowait(job)
        except queue.Full:
            self.drop("queue_full", f"the pod event queue is full ({self._queue.maxsize}); dropping Events")
            return False
        return True

    def join(self, timeout: float = 10.0) -> bool:
        """Wait until every submitted job is handled (tests); False on timeout."""
        done = threading.Event()

        def wait() -> None:
            self._queue.join()
            done.set()

        threading.Thread(target=wait, daemon=True, name="schedlens-pod-events-join").start()
        return done.wait(timeout)

    # ----- the thread -----

    def _ensure_thread(self) -> None:
        with self._lock:
            if self._pid != os.getpid():  # forked (gunicorn preload): the parent's thread is not ours
                self._pid, self._thread = os.getpid(), None
                self.instance = reporting_instance()
            if self._thread is None or not self._thread.is_alive():
                self._thread = threading.Thread(target=self._run, daemon=True, name="schedlens-pod-events")
                self._thread.start()

    def _run(self) -> None:
        while True:
            job = self._queue.get()
            try:
                self._write(job)
            except Exception as exc:  # never let one job end the thread
                self.drop("error", f"writing a pod Event failed: {type(exc).__name__}: {exc}")
            finally:
                self._queue.task_done()

    def _write(self, job: PodEventJob) -> None:
        writer = self._resolve_writer()
        if writer is None:
            self.drop("unconfigured", UNCONFIGURED)
            return
        note = job.summary().strip() or "scheduled by schedlens"
        tail = " ".join(filter(None, (job.burst_note, f"— {job.link}" if job.link else "")))
        if tail:
            note = f"{note} {tail}"
            if len(note.encode()) > 1024:  # keep the tail whole: shorten the summary instead
                room = 1024 - len(f"... {tail}".encode())
                head = note.encode()[: max(room, 0)].decode("utf-8", "ignore")
                note = f"{head}... {tail}"
        failure = writer.create(
            PodEvent(
                namespace=job.namespace,
                name=job.name,
                uid=job.uid,
                note=note,
                reason=job.reason,
                action=ACTION,
                controller=CONTROLLER,
                instance=self.instance,
                event_type=job.event_type,
            )
        )
        if failure:
            self.drop(failure, f"the API server did not take an {job.reason} Event ({failure}); dropping it")
        else:
            POD_EVENTS_WRITTEN.inc()

    def _resolve_writer(self) -> EventWriter | None:
        if self._writer is None and self._factory is not None:
            # Finding the API is I/O and takes a while: until the factory has answered, ``unavailable`` stays False
            # (callers submit, and their jobs wait here); a factory that raises is tried again with the next job.
            writer = self._factory()
            self._writer, self._factory = writer, None
            self._unavailable = writer is None
        return self._writer

    def drop(self, kind: str, message: str) -> None:
        """Count an Event not written (``schedlens_pod_events_dropped_total{reason=kind}``); logged once per kind."""
        POD_EVENTS_DROPPED.labels(reason=kind).inc()
        if kind not in self._logged:
            self._logged.add(kind)
            log.warning("%s (logged once per kind; counted in schedlens_pod_events_dropped_total)", message)


def _kubernetes_writer() -> EventWriter | None:
    # The kubernetes client is imported only where Events are written: a heavy import no demo process needs.
    from scheduler_core.kube.api import KubeConfigError, load_api_client
    from scheduler_core.kube.events import KubernetesEventWriter

    try:
        api_client = load_api_client()
    except KubeConfigError as exc:
        log.warning("Explained Events on pods are not written: %s", exc)
        return None
    if api_client is None:
        return None
    return KubernetesEventWriter(api_client, timeout_seconds=settings.SCHEDLENS_POD_EVENT_TIMEOUT_SECONDS)


_emitter: PodEventEmitter | None = None
_emitter_lock = threading.Lock()


def emitter() -> PodEventEmitter:
    """This process's emitter (writing through the cluster's API, found lazily in its thread)."""
    global _emitter
    with _emitter_lock:
        if _emitter is None:
            _emitter = PodEventEmitter(factory=_kubernetes_writer)
        return _emitter


def install(new: PodEventEmitter | None) -> PodEventEmitter | None:
    """Replace this process's emitter (tests; None: back to the default); returns the previous one."""
    global _emitter
    with _emitter_lock:
        previous, _emitter = _emitter, new
        return previous


def cycle_link(cycle_id: int | None, pod_uid: str) -> str:
    """The cycle's page under ``SCHEDLENS_PUBLIC_URL``, else the pod's history; "" when no public URL is set."""
    base = settings.SCHEDLENS_PUBLIC_URL
    if not base:
        return ""
    if cycle_id is not None:
        return f"{base}/cycles/{cycle_id}/"
    return f"{base}/?pod_uid={pod_uid}"


def explained_bind(*, cycle: SchedulingCycle, records: CycleRecords) -> None:
    """Queue the Explained Event of a recorded bind (no-op when ``SCHEDLENS_POD_EVENTS`` is off); one that cannot be
    written is counted as dropped, with its reason."""
    if not settings.SCHEDLENS_POD_EVENTS:
        return
    if not (cycle.pod_namespace and cycle.pod_name):
        emitter().drop("no_pod", f"cycle {cycle.pk} names no pod: its Explained Event is not written")
        return
    if not cycle.chosen_node:
        emitter().drop("no_node", f"cycle {cycle.pk} names no node: its Explained Event is not written")
        return
    burst = emitter().bursts
    if not burst.first(cycle.pod_namespace, cycle.pod_name, cycle.started_at.timestamp()):
        POD_EVENTS_FOLDED.inc()
        return
    burst_note = burst.note(cycle.pod_namespace, cycle.pod_name)
    # The cycle as it is now, and its recorded profile version's terms read here, in the caller's transaction: the
    # emitter's thread explains it later, while the ingester goes on with its objects.
    chosen_node, error = cycle.chosen_node, cycle.error
    terms = cycle_traffic_terms(profile=cycle.profile, profile_version=cycle.profile_version)

    def summary() -> str:
        return records_summary(records=records, chosen_node=chosen_node, error=error, terms=terms)

    job = PodEventJob(
        namespace=cycle.pod_namespace,
        name=cycle.pod_name,
        uid=cycle.pod_uid,
        summary=summary,
        link=cycle_link(cycle.pk, cycle.pod_uid),
        burst_note=burst_note,
    )
    emitter().submit(job)


def explained_placement(*, cycle_id: int) -> None:
    """Queue the Explained Event of a cycle kube-scheduler bound itself (seen by ``watch_placements``), whose Event the
    caller claimed: queued, or counted as dropped with its reason."""
    if not settings.SCHEDLENS_POD_EVENTS:
        return
    if emitter().unavailable:
        emitter().drop("unconfigured", UNCONFIGURED)
        return
    cycle = cycle_list_with_calls().filter(pk=cycle_id).first()
    if cycle is None:
        emitter().drop("no_cycle", f"cycle {cycle_id} is gone: its Explained Event is not written")
        return
    explained_bind(cycle=cycle, records=cycle_read(cycle=cycle).records)
