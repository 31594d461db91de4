"""``manage.py verify_audit_chain``: recompute the record's hash chain; exit status 1 at the first broken link."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from dashboard.models import VerbCall
from dashboard.services.audit_chain import audit_chain_verify


class Command(BaseCommand):
    help = "Verify the hash chain over the recorded verb calls, from the last prune checkpoint to the newest call."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--after-id", type=int, default=None, help="verify only the calls after this one")

    def handle(self, *args: Any, **options: Any) -> None:
        try:
            report = audit_chain_verify(after_id=options["after_id"])
        except VerbCall.DoesNotExist:
            raise CommandError(f"no stored call has id {options['after_id']}") from None
        start = f"after call {report.start_after_id}" if report.start_after_id is not None else "from the start"
        if not report.ok:
            where = f"at call {report.first_broken_id}" if report.first_broken_id is not None else "in shared parts"
            raise CommandError(f"BROKEN {where} ({report.checked} checked {start}): {report.reason}")
        self.stdout.write(
            f"ok: {report.checked} calls verified {start}; head call {report.head_id} hash {report.head_hash}"
        )
