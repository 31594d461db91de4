"""``manage.py verify_audit_chain``: recompute the record's hash chain; exit status 1 at the first broken link."""

from __future__ import annotations

from datetime import date
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from dashboard.audit.chain import VerificationMovedError, audit_chain_verify, audit_chain_verify_day
from dashboard.models import VerbCall


class Command(BaseCommand):
    help = "Verify the hash chain over the recorded verb calls, from the last prune checkpoint to the newest call."

    def add_arguments(self, parser: CommandParser) -> None:
        start = parser.add_mutually_exclusive_group()
        start.add_argument("--after-id", type=int, default=None, help="verify only the calls after this one")
        start.add_argument(
            "--resume",
            action="store_true",
            help="start where the last verification that reached the newest call ended (its link re-checked)",
        )
        start.add_argument(
            "--day",
            type=date.fromisoformat,
            default=None,
            metavar="YYYY-MM-DD",
            help="verify only the calls stored that day (UTC), from the link before them",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        try:
            if options["day"] is not None:
                report = audit_chain_verify_day(options["day"])
            else:
                report = audit_chain_verify(after_id=options["after_id"], resume=options["resume"])
        except VerbCall.DoesNotExist:
            raise CommandError(f"no stored call has id {options['after_id']}") from None
        except VerificationMovedError as exc:
            raise CommandError(f"BROKEN: {exc}") from None
        start = f"after call {report.start_after_id}" if report.start_after_id is not None else "from the start"
        if not report.ok:
            where = f"at call {report.first_broken_id}" if report.first_broken_id is not None else "in shared parts"
            raise CommandError(f"BROKEN {where} ({report.checked} checked {start}): {report.reason}")
        self.stdout.write(
            f"ok: {report.checked} calls verified {start}; head call {report.head_id} hash {report.head_hash}"
        )
