"""Create (or reset) the demo login for ``make run``: user ``demo``, password ``demo``, staff, an auditor.

Refused unless binds are simulated (``SCHEDLENS_BIND_MODE=simulated``, which only the demo uses): a known
password must never exist on a deployment that schedules real pods (``dashboard.services.demo_login``). In the demo
the user is also a member of the ``auditor`` group, so the same login reads the audit API (``/api/v1/…``,
``/api/docs/``).
"""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError

from dashboard.audit.auditors import AUDITOR_GROUP
from dashboard.services.demo_login import DEMO_PASSWORD, DEMO_USERNAME, DemoLoginRefused, demo_login_ensure


class Command(BaseCommand):
    help = (
        f"Create the demo/demo dashboard login, a member of the {AUDITOR_GROUP!r} group "
        "(only with SCHEDLENS_BIND_MODE=simulated)."
    )

    def handle(self, *args: Any, **options: Any) -> None:
        try:
            created = demo_login_ensure()
        except DemoLoginRefused as exc:
            raise CommandError(str(exc)) from None
        verb = "created" if created else "reset"
        self.stdout.write(
            f"dashboard login {verb}: user {DEMO_USERNAME}, password {DEMO_PASSWORD} (also reads the audit API)"
        )
