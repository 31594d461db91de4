"""Create (or reset) the demo login for ``make run``: user ``demo``, password ``demo``, staff.

Refused unless binds are simulated (``SCHEDLENS_BIND_MODE=simulated``, which only the demo uses): a known
password must never exist on a deployment that schedules real pods.
"""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError

USERNAME = "demo"
PASSWORD = "demo"  # noqa: S105 - the demo's published login, refused outside the demo


class Command(BaseCommand):
    help = "Create the demo/demo dashboard login (only with SCHEDLENS_BIND_MODE=simulated)."

    def handle(self, *args: Any, **options: Any) -> None:
        if settings.SCHEDLENS_BIND_MODE != "simulated":
            raise CommandError("ensure_demo_user only runs for the demo (SCHEDLENS_BIND_MODE=simulated)")
        user, created = get_user_model().objects.get_or_create(username=USERNAME, defaults={"is_staff": True})
        user.is_staff = True
        user.set_password(PASSWORD)
        user.save()
        verb = "created" if created else "reset"
        self.stdout.write(f"dashboard login {verb}: user {USERNAME}, password {PASSWORD}")
