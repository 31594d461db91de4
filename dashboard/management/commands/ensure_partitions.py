"""``manage.py ensure_partitions``: create the record's day partitions ahead (PostgreSQL; what the hourly task does)."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from dashboard.services.partitions import DAYS_AHEAD, is_partitioned, partitions_ensure


class Command(BaseCommand):
    help = "Create the day partitions of cycles and calls for today and the days ahead (PostgreSQL)."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--days-ahead", type=int, default=DAYS_AHEAD)

    def handle(self, *args: Any, **options: Any) -> None:
        if options["days_ahead"] < 0:
            raise CommandError("--days-ahead must not be negative")
        if not is_partitioned():
            self.stdout.write("the record's tables are not partitioned here (SQLite): nothing to do")
            return
        created = partitions_ensure(days_ahead=options["days_ahead"])
        self.stdout.write(f"created {len(created)} day partitions" + (f": {', '.join(created)}" if created else ""))
