"""``manage.py ingest_spool``: move spooled verb records into the database (once, or ``--follow``)."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand, CommandParser
from django.db import close_old_connections

from dashboard.ingest.call_builders import BrokenProcessPool, start_call_builders
from dashboard.ingest.spool_ingest import spool_ingest
from dashboard.management.stop_signals import stop_on_signals
from dashboard.outcomes.services import outcomes_follow_start
from dashboard.spool import Spool


class Command(BaseCommand):
    help = "Ingest the local spool of verb records into the database."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--follow", action="store_true", help="keep ingesting until SIGTERM/SIGINT")
        parser.add_argument("--interval", type=float, default=settings.SCHEDLENS_INGEST_INTERVAL)
        parser.add_argument(
            "--preparers",
            type=int,
            default=settings.SCHEDLENS_INGEST_PREPARERS,
            help="with --follow: processes preparing batches beside the writing once it falls behind (0: a thread)",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        spool = Spool(settings.SCHEDLENS_SPOOL_DIR)
        if not options["follow"]:
            moved = spool_ingest(spool=spool)
            self.stdout.write(f"ingested {moved} records; {spool.depth()} left in the spool")
            return
        stop = stop_on_signals()
        processes = max(0, options["preparers"])
        outcomes_follow_start(stop=stop)  # make serve's background process follows placement outcomes too
        builders = start_call_builders(processes) if processes else None
        try:
            while not stop.is_set():
                try:
                    # Keeping up, a thread costs less CPU (the verbs'): the processes are for a backlog.
                    behind = builders is not None and spool.backlog() >= settings.SCHEDLENS_INGEST_PREPARE_BACKLOG
                    spool_ingest(spool=spool, builders=builders if behind else None, ahead=max(2, processes))
                except BrokenProcessPool as exc:  # a preparing process died: the records wait, new ones start
                    self.stderr.write(f"ingest failed, will retry with new preparing processes: {exc}")
                    if builders is not None:
                        builders.shutdown(wait=False, cancel_futures=True)
                    builders = start_call_builders(processes)
                except Exception as exc:  # database down: the records wait in the spool
                    self.stderr.write(f"ingest failed, will retry: {exc}")
                finally:
                    close_old_connections()
                stop.wait(options["interval"])
        finally:
            if builders is not None:
                builders.shutdown(wait=True, cancel_futures=True)
