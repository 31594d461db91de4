"""This process's runtime: the configured profiles, cluster view, traffic store, binder and spool.

A neutral module: the extender verbs, the UI, the API, Celery, the health and metrics views and the system
checks all read the configured profiles and the running runtime from here, and it imports none of them (nor
any service that writes the database), so the verbs' process depends on nothing above it.

The runtime is built once per process on first use (after gunicorn forks, so background threads live in the
worker that uses them). A bad profile file stops the process with a message naming profile, plugin and field.
What else runs beside it in a web process (the in-process ingester) is started by the WSGI wiring.
"""

from __future__ import annotations

import functools
import logging
import os
import socket
import sqlite3
import threading
import time
from pathlib import Path
from typing import TYPE_CHECKING

from django.conf import settings
from django.core.exceptions import ImproperlyConfigured

from dashboard.bind_intents import IntentReconciler, SpoolBindJournal
from dashboard.outcomes.learned_table import PROCESS_LEARNED, LearnedTrafficFollower
from dashboard.spool import Spool
from dashboard.traffic.sources import recent_pods_reader, unaddressed_source
from dashboard.traffic.view import LocalInputs, build_inputs, reconciling_queries
from scheduler_core.extender.protocol.binding import Binder, SimulatedBinder, UnconfiguredBinder
from scheduler_core.extender.protocol.cluster import ClusterView, FileCluster, StaticCluster
from scheduler_core.extender.scoring.profile_versions import encode_note, version_notes
from scheduler_core.extender.scoring.profiles import Profile, load_profiles
from scheduler_core.extender.verbs import Extender
from scheduler_core.traffic import TrafficQuery, TrafficSource
from scheduler_core.traffic.pods import PodReads
from scheduler_core.traffic.store import BackgroundRefresher, TrafficStore
from scheduler_core.traffic.synthetic import SyntheticTrafficSource

# The kubernetes and Prometheus clients are imported in the functions that use them, when the settings name a
# cluster or a Prometheus: heavy imports that the demo's processes (a file cluster, synthetic traffic) never need.
if TYPE_CHECKING:
    from scheduler_core.kube.placement_watch import PlacementWatcher


def configured_profiles() -> dict[str, Profile]:
    """The profiles of ``SCHEDLENS_CONFIG`` (or the embedded default), validated; raises ``ProfileError``.

    Read again when the file changes, so the UI and the API describe what an edited file says (the verbs'
    runtime keeps the profiles it started with until it restarts).
    """
    path = settings.SCHEDLENS_CONFIG
    if not path:
        return dict(_profiles_in("", 0, 0))
    stat = os.stat(path)  # a missing file raises OSError, as reading it would
    return dict(_profiles_in(path, stat.st_mtime_ns, stat.st_size))


@functools.lru_cache(maxsize=4)
def _profiles_in(path: str, mtime_ns: int, size: int) -> dict[str, Profile]:
    text = Path(path).read_text(encoding="utf-8") if path else None
    return load_profiles(text)


log = logging.getLogger(__name__)


def note_profile_versions(spool: Spool, profiles: dict[str, Profile]) -> None:
    """Spool the versions of the profiles this process serves (once per version and host), for the ingester to store
    (``dashboard.services.profile_versions``): every call's record names its version by digest only. A spool that
    cannot take them is logged, never fatal: the calls still carry their digests."""
    path = settings.SCHEDLENS_CONFIG
    try:
        text = Path(path).read_text(encoding="utf-8") if path else None
    except OSError:
        text = None
    notes = version_notes(profiles, text, server=socket.gethostname(), at=time.time())
    try:
        spool.note_profile_versions([(n.digest, n.server, encode_note(n)) for n in notes])
    except (sqlite3.Error, OSError):
        log.exception("could not note the profile versions this process serves in the spool")


def cluster_from_settings() -> ClusterView:
    """The node view (SCHEDLENS_CLUSTER_SOURCE): the demo file, a watching node cache, or nothing."""
    source = settings.SCHEDLENS_CLUSTER_SOURCE
    if source == "file" or (source == "auto" and settings.SCHEDLENS_CLUSTER_FILE):
        if not settings.SCHEDLENS_CLUSTER_FILE:
            raise ImproperlyConfigured("SCHEDLENS_CLUSTER_SOURCE=file needs SCHEDLENS_CLUSTER_FILE")
        return FileCluster(settings.SCHEDLENS_CLUSTER_FILE)
    if source in ("auto", "kubernetes"):
        from scheduler_core.kube.api import load_api_client
        from scheduler_core.kube.node_cache import KubernetesCluster

        client = load_api_client()
        if client is not None:
            # Started here, in the process that serves the verbs (after gunicorn's fork); /readyz stays 503 until
            # the first lists are in.
            timeout = settings.SCHEDLENS_WATCH_TIMEOUT_SECONDS
            return KubernetesCluster.from_api_client(client, watch_timeout_seconds=timeout).start()
        if source == "kubernetes":
            raise ImproperlyConfigured(
                "SCHEDLENS_CLUSTER_SOURCE=kubernetes but no Kubernetes configuration was found "
                "(not in a cluster, no KUBECONFIG, no ~/.kube/config)"
            )
    return StaticCluster()


def _binder(cluster: ClusterView) -> Binder:
    if settings.SCHEDLENS_BIND_MODE == "simulated":
        # The demo cluster file says which nodes exist: a bind elsewhere is refused as a cluster would refuse it.
        return SimulatedBinder(cluster if isinstance(cluster, FileCluster) else None)
    from scheduler_core.kube.api import KubernetesBinder, load_api_client

    client = load_api_client()
    return KubernetesBinder(client) if client is not None else UnconfiguredBinder()


class Runtime:
    def __init__(self) -> None:
        self.profiles = configured_profiles()
        self.cluster = cluster_from_settings()
        self.traffic = TrafficStore()
        self.spool = Spool(settings.SCHEDLENS_SPOOL_DIR)
        note_profile_versions(self.spool, self.profiles)
        self.extender = Extender(
            self.profiles,
            cluster=self.cluster,
            traffic=self.traffic,
            binder=_binder(self.cluster),
            journal=SpoolBindJournal(self.spool),
            learned=PROCESS_LEARNED,
        )
        # Traffic learned per workload: the outcome job publishes it, this thread reads it for the verbs.
        self.learned_follower = LearnedTrafficFollower(PROCESS_LEARNED)
        # Settles the bind intents a process killed mid-bind left (dashboard/bind_intents.py says why here).
        self.reconciler = IntentReconciler(
            self.spool,
            lambda: self.extender.binder,
            grace_seconds=settings.SCHEDLENS_BIND_INTENT_GRACE_SECONDS,
            interval_seconds=settings.SCHEDLENS_BIND_RECONCILE_SECONDS,
        )
        # Where verbs read traffic and recent binds (herd effect): Redis snapshots refreshed by Celery workers
        # (SCHEDLENS_TRAFFIC_BACKEND=redis), or this process's own store and refresher thread (inprocess).
        self.inputs = self.extender.inputs = build_inputs(self.profiles, local_traffic=lambda: self.extender.traffic)
        queries = {q for p in self.profiles.values() for q in p.traffic_queries()}
        if settings.SCHEDLENS_TRAFFIC_BACKEND == "redis":
            queries = set()  # the workers refresh; this process only reads
        self.bind_watch = self._bind_watch()
        self.refresher = BackgroundRefresher(
            self.traffic,
            self._source_for,
            queries,
            interval=settings.SCHEDLENS_TRAFFIC_REFRESH_SECONDS,
            pods=self._pod_reads(),
        )
        self._sources: dict[str, TrafficSource] = {}
        names = getattr(self.cluster, "node_names", None)
        self._synthetic = SyntheticTrafficSource(names if callable(names) else list)

    def _pod_reads(self) -> PodReads | None:
        """In-process mode: this process's refresh reads the pods of its own recent binds, for the profiles that
        reconcile them (``scheduler_core.traffic.pods``)."""
        queries = reconciling_queries(self.profiles)
        reader = recent_pods_reader() if queries and isinstance(self.inputs, LocalInputs) else None
        if reader is None or not isinstance(self.inputs, LocalInputs):
            return None
        binds = self.inputs.binds
        return PodReads(reader, lambda: binds.recent_binds(time.time()).pods, queries)

    def _bind_watch(self) -> PlacementWatcher | None:
        """In-process mode against a cluster: this process's own watch of the pods bound, for the herd estimate.

        The binds the verbs count live in this process's memory, which the placement watcher (a process of its own)
        cannot reach; so each web process follows the pods of our scheduler names itself and counts kube-scheduler's
        binds, and its sibling workers' binds, as they appear. In redis mode the placement watcher appends them to the
        shared bind log instead (``dashboard.placements.herd``)."""
        from scheduler_core.kube.node_cache import KubernetesCluster
        from scheduler_core.kube.placement_watch import HerdSink, PlacementWatcher

        if not isinstance(self.inputs, LocalInputs) or not isinstance(self.cluster, KubernetesCluster):
            return None
        from scheduler_core.kube.api import load_api_client

        client = load_api_client()
        if client is None:
            return None
        binds = self.inputs.binds
        return PlacementWatcher.from_api_client(
            client,
            scheduler_names=settings.SCHEDLENS_SCHEDULER_NAMES,
            sink=HerdSink(binds.record_bind, horizon_seconds=binds.horizon_seconds),
            failures=False,
            watch_timeout_seconds=settings.SCHEDLENS_WATCH_TIMEOUT_SECONDS,
        )

    def _source_for(self, query: TrafficQuery) -> TrafficSource:
        url = query.address or settings.PROMETHEUS_URL
        if not url:
            return unaddressed_source(self._synthetic)
        if url not in self._sources:
            from scheduler_core.traffic.prometheus import PrometheusTrafficSource

            self._sources[url] = PrometheusTrafficSource(url)
        return self._sources[url]

    def start(self) -> None:
        # One synchronous refresh so the first verbs have data; a failing source only logs (the verbs
        # then score neutrally and say why) and never blocks start-up for longer than its timeout.
        self.refresher.refresh_once()
        self.refresher.start()
        self.reconciler.start()
        self.learned_follower.start()
        if self.bind_watch is not None:
            self.bind_watch.start()


_lock = threading.Lock()
_runtime: Runtime | None = None


def get_runtime() -> Runtime:
    global _runtime
    if _runtime is None:
        with _lock:
            if _runtime is None:
                runtime = Runtime()
                runtime.start()
                _runtime = runtime
    return _runtime


def running_runtime() -> Runtime | None:
    """The runtime if this process has built one, without building it (the UI shows it only where it runs)."""
    return _runtime
