"""What ``/api/v1/profile-versions/`` (``dashboard.api.views.ProfileVersionViewSet``) serves: every recorded version
of each profile, what changed from the one before (leaf by leaf, and one line per change as ``/profiles/`` reads it),
and how many cycles it decided
(``dashboard.selectors.profile_versions``); secret-looking values masked as ``/profiles/`` masks them. The why API
names a cycle's version with a link there (:func:`version_reference`)."""

from __future__ import annotations

from typing import Any

from django.urls import reverse
from rest_framework import serializers
from rest_framework.request import Request

from dashboard.selectors.profile_versions import (
    RecordedVersion,
    VersionEntry,
    profile_version_first_served,
)
from dashboard.selectors.profiles import redact
from scheduler_core.extender.scoring.profile_changes import ChangeKind, ChangeLine


class ChangeSerializer(serializers.Serializer[Any]):
    path = serializers.CharField(help_text="Where, as the profiles file names it: pluginConfig.<plugin>.<arg>, score…")
    before = serializers.JSONField(allow_null=True)
    after = serializers.JSONField(allow_null=True)
    text = serializers.CharField()


class ChangeLineSerializer(serializers.Serializer[Any]):
    kind = serializers.ChoiceField(
        # (value, name): the pairs the ENUM_NAME_OVERRIDES setting takes from ChangeKind, so the schema names the enum
        choices=[(k.value, k.name) for k in ChangeKind],
        help_text="field_changed: any other field.",
    )
    text = serializers.CharField(help_text="As /profiles/ shows it: NetworkTraffic weight 3 → 5.")
    plugin = serializers.CharField(help_text="The plugin it is about; empty for another field.")
    point = serializers.CharField(help_text="filter or score, for a plugin added, removed or reweighted there.")
    field = serializers.CharField(help_text="weight, the arg's name (empty: all its args), or the field's dotted path.")
    path = serializers.CharField(help_text="Where the normalized definitions hold before and after.")
    before = serializers.JSONField(allow_null=True, help_text="As recorded; null: absent.")
    after = serializers.JSONField(allow_null=True, help_text="As recorded; null: absent.")


class ProfileVersionSerializer(serializers.Serializer[Any]):
    digest = serializers.CharField(help_text="Profile.version(): what each cycle records as profile_version.")
    profile = serializers.CharField()
    noted_at = serializers.DateTimeField(help_text="When a replica first loaded it.")
    first_served = serializers.DateTimeField(allow_null=True, help_text="The first cycle it decided; null: none.")
    last_served = serializers.DateTimeField(allow_null=True)
    cycles = serializers.IntegerField(help_text="Cycles it decided (retained).")
    servers = serializers.ListField(child=serializers.CharField(), help_text="The replicas that loaded it.")
    previous = serializers.CharField(help_text="The version of the same profile before it; empty for the first.")
    changes = ChangeSerializer(
        many=True, help_text="What changed from the previous version, leaf by leaf, lists whole."
    )
    change_lines = ChangeLineSerializer(
        many=True, help_text="The same, one line per plugin added or removed, weight, arg or other field changed."
    )
    normalized = serializers.JSONField(help_text="Profile.describe(): every plugin, weight and arg, defaults in.")
    yaml = serializers.CharField(help_text="The profile's entry in the profiles file as loaded (secrets masked).")


class VersionQuerySerializer(serializers.Serializer[Any]):
    profile = serializers.RegexField(
        r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$", max_length=63, required=False, help_text="One profile's versions only."
    )


def version_shown(entry: VersionEntry) -> dict[str, Any]:
    version = entry.version
    return {
        "digest": version.digest,
        "profile": version.profile,
        "noted_at": version.noted_at,
        "first_served": entry.first_served,
        "last_served": entry.last_served,
        "cycles": entry.cycles,
        "servers": list(version.servers),
        "previous": entry.previous,
        "changes": [{"path": c.path, "before": c.before, "after": c.after, "text": c.text} for c in entry.changes],
        "change_lines": [_line_shown(line) for line in entry.change_lines],
        "normalized": redact(version.normalized),
        "yaml": "" if not version.yaml else "\n".join(_masked_lines(version.yaml)),
    }


def _line_shown(line: ChangeLine) -> dict[str, Any]:
    return {
        "kind": line.kind.value,
        "text": line.text,
        "plugin": line.plugin,
        "point": line.point,
        "field": line.field,
        "path": line.path,
        "before": line.before,
        "after": line.after,
    }


def _masked_lines(text: str) -> list[str]:
    import yaml

    try:
        return yaml.safe_dump(redact(yaml.safe_load(text)), sort_keys=False, allow_unicode=True).splitlines()
    except yaml.YAMLError:
        return []


def version_reference(request: Request, recorded: RecordedVersion) -> dict[str, Any]:
    """A cycle's version as the why API names it: digest, when it first served, a link."""
    known = recorded.description is not None
    url = reverse("api:profile-version-detail", args=[recorded.digest]) if known else ""
    return {
        "digest": recorded.digest,
        "first_served": profile_version_first_served(digest=recorded.digest) if known else None,
        "url": request.build_absolute_uri(url) if url else "",
        "missing": recorded.missing,
    }
