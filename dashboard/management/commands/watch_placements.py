"""``manage.py watch_placements``: record where pods of our scheduler names were bound, and why not.

Runs as its own process (one replica is enough: observations are idempotent, so two overlapping during a
rollout do no harm). Needs get/list/watch on pods and events. In redis mode it also counts the binds it sees in the
herd estimate the verbs read (``dashboard.placements.herd``; a pod counts once however often it is seen).
"""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError, CommandParser

from dashboard.management.stop_signals import stop_on_signals
from dashboard.placements.herd import HerdFeed, watcher_sink
from dashboard.placements.pump import PlacementPump
from scheduler_core.kube.api import KubeConfigError, load_api_client
from scheduler_core.kube.placement_watch import PlacementWatcher


class Command(BaseCommand):
    help = (
        "Watch pods whose spec.schedulerName is one of SCHEDLENS_SCHEDULER_NAMES and their FailedScheduling events; "
        "record the final node and the failure messages on the matching scheduling cycles."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "--scheduler-name",
            action="append",
            dest="scheduler_names",
            help="a scheduler name to follow (repeatable; default: SCHEDLENS_SCHEDULER_NAMES)",
        )
        parser.add_argument("--kubeconfig", help="a kubeconfig file (default: in-cluster, $KUBECONFIG, ~/.kube/config)")
        parser.add_argument("--reconcile-interval", type=float, default=5.0)
        parser.add_argument(
            "--once",
            action="store_true",
            help="list once, record what is there, reconcile, and exit (a backfill) instead of watching",
        )
        parser.add_argument("--sync-timeout", type=float, default=60.0, help="--once: how long to wait for the lists")

    def handle(self, *args: Any, **options: Any) -> None:
        names = options["scheduler_names"] or settings.SCHEDLENS_SCHEDULER_NAMES
        try:
            api_client = load_api_client(kubeconfig=options["kubeconfig"])
        except KubeConfigError as exc:
            raise CommandError(str(exc)) from exc
        if api_client is None:
            raise CommandError("no Kubernetes configuration found (not in a cluster, no KUBECONFIG, no ~/.kube/config)")

        pump = PlacementPump(reconcile_interval=options["reconcile_interval"])
        # A backfill finds binds made while nothing watched: the herd estimate has no use for them.
        herd = None if options["once"] else HerdFeed.from_settings()
        watcher = PlacementWatcher.from_api_client(
            api_client,
            scheduler_names=names,
            sink=watcher_sink(pump, herd),
            watch_timeout_seconds=settings.SCHEDLENS_WATCH_TIMEOUT_SECONDS,
        )
        pump.keep_waiting(watcher)  # the live pending list (``dashboard.placements.selectors``)
        self.stdout.write(f"watching pods of {', '.join(names)} and their FailedScheduling events")
        if herd is not None:
            herd.start()
        watcher.start()
        try:
            if options["once"]:
                if not watcher.wait_synced(options["sync_timeout"]):
                    raise CommandError(f"the pod and event lists did not complete: {watcher.status()}")
                pump.drain()
                self.stdout.write(f"recorded {pump.recorded} observations")
                return
            stop = stop_on_signals()
            pump.run(stop)
        finally:
            watcher.stop()
            if herd is not None:
                herd.stop()
