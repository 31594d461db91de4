"""The demo's published login (``make run``: demo / demo) and the guards that keep it off a real cluster.

It is created only where binds are simulated (``SCHEDLENS_BIND_MODE=simulated``, the demo). Where binds are real, a
user whose password is the demo's stops the server from starting (``dashboard.checks``, run by ``migrate`` and
``check``) and never logs in (``dashboard.auth_backends``): a known password must never open a deployment that
schedules real pods.
"""

from __future__ import annotations

from django.conf import settings
from django.contrib.auth import get_user_model
from django.contrib.auth.models import AbstractBaseUser, Group
from django.db import transaction

from dashboard.audit.auditors import AUDITOR_GROUP

DEMO_USERNAME = "demo"
DEMO_PASSWORD = "demo"  # noqa: S105 - the demo's published login, refused outside the demo


class DemoLoginRefused(RuntimeError):
    pass


def binds_are_real() -> bool:
    return bool(settings.SCHEDLENS_BIND_MODE != "simulated")


def demo_login_ensure() -> bool:
    """Create (or reset) the demo user: staff and an auditor. True when it was created."""
    if binds_are_real():
        raise DemoLoginRefused("the demo login is only created for the demo (SCHEDLENS_BIND_MODE=simulated)")
    with transaction.atomic():
        user, created = get_user_model().objects.get_or_create(username=DEMO_USERNAME, defaults={"is_staff": True})
        user.is_staff = True
        user.set_password(DEMO_PASSWORD)
        user.save()
        group, _ = Group.objects.get_or_create(name=AUDITOR_GROUP)
        user.groups.add(group)  # a no-op when already a member
    return bool(created)


def users_with_demo_password() -> list[str]:
    """The usernames whose password is the demo's (every user with a usable password is tried: a handful)."""
    # "!" starts an unusable password (set_unusable_password): nothing to try.
    users: list[AbstractBaseUser] = list(get_user_model().objects.exclude(password__startswith="!"))  # noqa: S106
    return sorted(user.get_username() for user in users if user.check_password(DEMO_PASSWORD))
