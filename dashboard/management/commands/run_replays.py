"""``manage.py run_replays``: run the history replays started from the dashboard or the API, one at a time, when
``SCHEDLENS_REPLAY_RUNNER=process`` (``make run`` starts it beside the server; no Celery, no Redis).

A small loop: claim the oldest queued replay (``SELECT … FOR UPDATE SKIP LOCKED`` on PostgreSQL, so several of
these never take the same one), run it, look again every ``--interval`` seconds. Never touches the verbs' processes.
"""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.db import close_old_connections

from dashboard.management.stop_signals import stop_on_signals
from dashboard.outcomes.services import outcomes_follow_start
from dashboard.replays.services import history_replay_claim, history_replay_run


class Command(BaseCommand):
    help = "Run queued history replays one at a time (SCHEDLENS_REPLAY_RUNNER=process)."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--interval", type=float, default=1.0, help="seconds between looks for a queued replay")
        parser.add_argument("--once", action="store_true", help="run what is queued now, then exit")

    def handle(self, *args: Any, **options: Any) -> None:
        stop = stop_on_signals()
        once = options["once"]
        if not once:  # make run's background process also follows placement outcomes (issue 32)
            outcomes_follow_start(stop=stop)
        while not stop.is_set():
            if not once:
                close_old_connections()  # between replays of a long-lived loop (Django's per-request hygiene)
            try:
                replay_id = history_replay_claim()
            except Exception as exc:  # the database away: say so, look again later
                if once:
                    raise CommandError(f"cannot claim a replay: {exc}") from None
                self.stderr.write(f"run_replays: cannot claim a replay: {exc}")
                stop.wait(max(options["interval"], 5.0))
                continue
            if replay_id is None:
                if once:
                    return
                stop.wait(options["interval"])
                continue
            self.stdout.write(f"run_replays: replay {replay_id} started")
            try:
                replay = history_replay_run(replay_id, claimed=True)
            except Exception as exc:  # recorded on its row by the service
                self.stderr.write(f"run_replays: replay {replay_id} failed: {exc}")
                continue
            self.stdout.write(f"run_replays: replay {replay_id} {replay.status}")
