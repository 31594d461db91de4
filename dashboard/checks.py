"""``manage.py check`` validates the profile file, so a bad one is caught before deploy, not at first call."""

from __future__ import annotations

from typing import Any

from django.core.checks import CheckMessage, Error, register

from scheduler_core.profiles import ProfileError


@register()
def profiles_are_valid(app_configs: Any, **kwargs: Any) -> list[CheckMessage]:
    from dashboard.runtime import configured_profiles

    try:
        configured_profiles()
    except (ProfileError, OSError) as exc:
        return [Error(str(exc), hint="Fix the file named by SCHEDLENS_CONFIG.", id="schedlens.E001")]
    return []
