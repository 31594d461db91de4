"""``manage.py verify_explanations``: recompute every explanation from the figures it shows; exit 1 on a mismatch."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.utils.dateparse import parse_datetime

from dashboard.selectors.cycles import cycle_explanations_recomputed

SHOWN_MISMATCHES = 20


class Command(BaseCommand):
    help = (
        "Recompute every score, final score and 0..10 answer of the recorded cycles from their explanations, as the "
        "audit API serves them, and report how many add up."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--started-after", default=None, help="only cycles started at or after (ISO 8601)")
        parser.add_argument("--limit", type=int, default=None, help="at most this many cycles, oldest first")

    def handle(self, *args: Any, **options: Any) -> None:
        started_after = None
        if options["started_after"]:
            started_after = parse_datetime(options["started_after"])
            if started_after is None:
                raise CommandError(f"--started-after: not an ISO 8601 date and time: {options['started_after']!r}")
        checked = scored = matched = 0
        shown: list[str] = []
        for cycle, mismatches in cycle_explanations_recomputed(started_after=started_after, limit=options["limit"]):
            checked += 1
            scored += cycle.prioritize_ms is not None
            matched += not mismatches
            shown += [f"cycle {cycle.id}: {m}" for m in mismatches][: max(0, SHOWN_MISMATCHES - len(shown))]
        for line in shown:
            self.stderr.write(line)
        summary = f"{checked} cycles recomputed ({scored} with a prioritize call): {matched} add up"
        if matched != checked:
            raise CommandError(f"{summary}, {checked - matched} do not")
        self.stdout.write(f"ok: {summary}")
