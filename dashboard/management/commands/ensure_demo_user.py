"""Create (or reset) the demo login for ``make run``: user ``demo``, password ``demo``, staff, an auditor.

Refused unless binds are simulated (``SCHEDLENS_BIND_MODE=simulated``, which only the demo uses): a known
password must never exist on a deployment that schedules real pods. In the demo the user is also a member of
the ``auditor`` group, so the same login reads the audit API (``/api/v1/…``, ``/api/docs/``).
"""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group
from django.core.management.base import BaseCommand, CommandError
from django.db import transaction

from dashboard.services.auditors import AUDITOR_GROUP

USERNAME = "demo"
PASSWORD = "demo"  # noqa: S105 - the demo's published login, refused outside the demo


class Command(BaseCommand):
    help = (
        f"Create the demo/demo dashboard login, a member of the {AUDITOR_GROUP!r} group "
        "(only with SCHEDLENS_BIND_MODE=simulated)."
    )

    def handle(self, *args: Any, **options: Any) -> None:
        if settings.SCHEDLENS_BIND_MODE != "simulated":
            raise CommandError("ensure_demo_user only runs for the demo (SCHEDLENS_BIND_MODE=simulated)")
        with transaction.atomic():
            user, created = get_user_model().objects.get_or_create(username=USERNAME, defaults={"is_staff": True})
            user.is_staff = True
            user.set_password(PASSWORD)
            user.save()
            group, _ = Group.objects.get_or_create(name=AUDITOR_GROUP)
            user.groups.add(group)  # a no-op when already a member
        verb = "created" if created else "reset"
        self.stdout.write(f"dashboard login {verb}: user {USERNAME}, password {PASSWORD} (also reads the audit API)")
