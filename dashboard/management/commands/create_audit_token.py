"""``manage.py create_audit_token <username>``: an auditor's API token, printed alone on stdout."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandParser

from dashboard.audit.auditors import AUDITOR_GROUP, auditor_token_issue


class Command(BaseCommand):
    help = (
        f"Print the API token of USERNAME, creating the user (without a password) if needed and adding it to "
        f"the {AUDITOR_GROUP!r} group. Use it as 'Authorization: Token <key>'."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("username")
        parser.add_argument("--rotate", action="store_true", help="replace the user's existing token")

    def handle(self, *args: Any, **options: Any) -> None:
        issued = auditor_token_issue(username=options["username"], rotate=options["rotate"])
        if issued.user_created:
            self.stderr.write(f"created user {options['username']!r}")
        self.stderr.write(f"{'new' if issued.token_created else 'existing'} token of an {AUDITOR_GROUP!r} member:")
        self.stdout.write(issued.key)
