"""System checks. ``manage.py check`` validates the profile file, so a bad one is caught before deploy, not at first
call. ``migrate`` (which ``make serve``, ``make run`` and the deployments' migrate Job run before serving) and
``check --database default`` also look at the database: a real cluster is never served where the demo's login or
its audit chain would follow it."""

from __future__ import annotations

from typing import Any

from django.core.checks import CheckMessage, Error, Tags, register
from django.db import DatabaseError

from dashboard.audit.chain import chain_origin_conflict
from dashboard.selectors.profiles import profile_configuration
from dashboard.services.demo_login import DEMO_PASSWORD, binds_are_real, users_with_demo_password


@register()
def profiles_are_valid(app_configs: Any, **kwargs: Any) -> list[CheckMessage]:
    configured = profile_configuration()
    if configured.error is not None:
        return [Error(configured.problem, hint="Fix the file named by SCHEDLENS_CONFIG.", id="schedlens.E001")]
    return []


@register(Tags.database)
def no_known_password_where_binds_are_real(app_configs: Any, **kwargs: Any) -> list[CheckMessage]:
    if not binds_are_real() or not kwargs.get("databases"):
        return []
    try:
        users = users_with_demo_password()
    except DatabaseError:  # before migrate created the table: no user yet
        return []
    if not users:
        return []
    return [
        Error(
            f"user(s) {', '.join(users)} have the demo's published password ({DEMO_PASSWORD!r}) and binds are real "
            "(SCHEDLENS_BIND_MODE=kubernetes): anyone could log in to this cluster's record",
            hint="Give each a password of its own (manage.py changepassword NAME) or remove the user; the demo keeps "
            "its own database in var/demo/ (make run), make serve in var/cluster/.",
            id="schedlens.E002",
        )
    ]


@register(Tags.database)
def audit_chain_records_these_binds(app_configs: Any, **kwargs: Any) -> list[CheckMessage]:
    if not kwargs.get("databases"):
        return []
    problem = chain_origin_conflict()
    if not problem:
        return []
    return [Error(problem, hint="Point DATABASE_URL at another database.", id="schedlens.E003")]
