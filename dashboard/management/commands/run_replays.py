"""``manage.py run_replays``: run the history replays started from the dashboard or the API, one at a time, when
``SCHEDLENS_REPLAY_RUNNER=process`` (``make run`` starts it beside the server; no Celery, no Redis).

A small loop: claim the oldest queued replay (``SELECT … FOR UPDATE SKIP LOCKED`` on PostgreSQL, so several of
these never take the same one), run it, look again every ``--interval`` seconds. Never touches the verbs' processes.
"""

from __future__ import annotations

import select
import signal
import socket
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.db import close_old_connections

from dashboard.replays.services import history_replay_claim, history_replay_run


class Command(BaseCommand):
    help = "Run queued history replays one at a time (SCHEDLENS_REPLAY_RUNNER=process)."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--interval", type=float, default=1.0, help="seconds between looks for a queued replay")
        parser.add_argument("--once", action="store_true", help="run what is queued now, then exit")

    def handle(self, *args: Any, **options: Any) -> None:
        stop = _Stop()
        once = options["once"]
        while not stop.requested:
            if not once:
                close_old_connections()  # between replays of a long-lived loop (Django's per-request hygiene)
            try:
                replay_id = history_replay_claim()
            except Exception as exc:  # the database away: say so, look again later
                if once:
                    raise CommandError(f"cannot claim a replay: {exc}") from None
                self.stderr.write(f"run_replays: cannot claim a replay: {exc}")
                stop.pause(max(options["interval"], 5.0))
                continue
            if replay_id is None:
                if once:
                    return
                stop.pause(options["interval"])
                continue
            self.stdout.write(f"run_replays: replay {replay_id} started")
            try:
                replay = history_replay_run(replay_id, claimed=True)
            except Exception as exc:  # recorded on its row by the service
                self.stderr.write(f"run_replays: replay {replay_id} failed: {exc}")
                continue
            self.stdout.write(f"run_replays: replay {replay_id} {replay.status}")


class _Stop:
    """SIGINT and SIGTERM ask the loop to stop; its pauses end at once.

    The handler only sets a flag, and the pause wakes on the byte Python writes to the wakeup socket for any signal.
    A ``threading.Event.set()`` in the handler deadlocked: Ctrl-C on ``make run`` reaches the whole process group and
    its trap then sends SIGTERM, so a second signal could interrupt the first handler inside the Event's
    non-reentrant lock."""

    def __init__(self) -> None:
        self.requested = False
        self._wakeup, writer = socket.socketpair()
        self._writer = writer  # kept open for the process's life: the signal machinery writes to it
        for end in (self._wakeup, writer):
            end.setblocking(False)
        signal.set_wakeup_fd(writer.fileno())
        for sig in (signal.SIGINT, signal.SIGTERM):
            signal.signal(sig, self._request)

    def _request(self, signum: int, frame: object) -> None:
        self.requested = True

    def pause(self, seconds: float) -> None:
        if not self.requested:
            select.select([self._wakeup], [], [], seconds)
