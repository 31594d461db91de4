"""``manage.py prune_cycles``: apply the retention (``SCHEDLENS_RETENTION_DAYS``) keeping the chain verifiable."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.utils import timezone

from dashboard.services.retention import AuditChainBrokenError, cycles_prune


class Command(BaseCommand):
    help = "Delete cycles older than the retention, after verifying the part of the hash chain that goes."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--days", type=int, default=settings.SCHEDLENS_RETENTION_DAYS)
        parser.add_argument("--dry-run", action="store_true", help="report what would go, delete nothing")

    def handle(self, *args: Any, **options: Any) -> None:
        if options["days"] < 0:
            raise CommandError("--days must not be negative")
        older_than = timezone.now() - timedelta(days=options["days"])
        try:
            result = cycles_prune(older_than=older_than, dry_run=options["dry_run"])
        except AuditChainBrokenError as exc:
            raise CommandError(f"nothing pruned: {exc}") from None
        verb = "would delete" if options["dry_run"] else "deleted"
        self.stdout.write(
            f"{verb} {result.cycles_deleted} cycles, {result.calls_deleted} calls started before "
            f"{older_than:%Y-%m-%d %H:%M:%S}Z and {result.parts_deleted} shared parts no call refers to any more; "
            f"checkpoint at call {result.checkpoint_call_id}; "
            f"{result.held_back} older cycles held back (calls chained after newer ones); "
            f"{len(result.partitions_dropped)} partitions dropped{_why(result.partitions_held_back)}; "
            f"verified for {result.verified_seconds:.1f} s, then held the chain lock (ingest waiting) for "
            f"{result.locked_seconds:.1f} s"
        )


def _why(held_back: str) -> str:
    return f", a day held back: {held_back}" if held_back else ""
