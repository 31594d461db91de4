"""The profiles page: each profile's recorded versions, what changed between consecutive ones (a line per change,
``scheduler_core.extender.scoring.profile_changes``), how many cycles each decided. A thin view over
``dashboard.selectors.profile_versions``."""

from __future__ import annotations

import json
from typing import Any

import yaml
from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.views.decorators.http import require_GET

from dashboard.selectors.profile_versions import profile_version_history
from dashboard.selectors.profiles import profile_configuration, redact
from scheduler_core.extender.scoring.profile_changes import in_reading_order


def _shown_yaml(text: str) -> str:
    """The version's YAML as loaded, with secret-looking values masked as the API masks them."""
    try:
        return yaml.safe_dump(redact(yaml.safe_load(text)), sort_keys=False, allow_unicode=True) if text else ""
    except yaml.YAMLError:
        return ""


def _shown_json(normalized: Any) -> str:
    """The normalized definition as JSON, secrets masked, in the order the change lines go (the database gives its
    keys back in its own): where an auditor finds the figures of each line."""
    return json.dumps(in_reading_order(redact(normalized)), indent=2, ensure_ascii=False)


@require_GET
@login_required
def profiles(request: HttpRequest) -> HttpResponse:
    configured = profile_configuration()
    served = {name: profile.version() for name, profile in configured.profiles.items()}
    history = profile_version_history()
    sections: list[dict[str, Any]] = [
        {
            "name": name,
            "configured_version": served.get(name, ""),
            "versions": [
                {
                    "entry": entry,
                    "yaml": _shown_yaml(entry.version.yaml),
                    "normalized_json": _shown_json(entry.version.normalized),
                }
                for entry in reversed(entries)  # newest first
            ],
        }
        for name, entries in sorted(history.items())
    ]
    context = {"sections": sections, "profiles_problem": configured.problem, "profiles_path": configured.path}
    return render(request, "dashboard/profiles.html", context)
