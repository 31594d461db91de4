"""The stored profile versions, read one way: what a cycle was decided by (:func:`cycle_profile_version`), every
version's normalized form (:func:`profile_version_descriptions`, the history replays' baselines), and each profile's
versions with what changed between consecutive ones (:func:`profile_version_history`, the profiles page and API:
read as an operator says it, ``scheduler_core.extender.scoring.profile_changes``, and leaf by leaf in JSON).

A cycle is interpreted by the version it recorded, never by the profiles file the reading process has now; a cycle
recorded before versions were kept says so (``scheduler_core.extender.scoring.traffic_terms.NOT_VERSIONED``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from django.db.models import Count, Max, Min

from dashboard.models import ProfileVersion, SchedulingCycle
from dashboard.selectors.profiles import redact
from scheduler_core.extender.lru import LRU
from scheduler_core.extender.scoring.profile_changes import ChangeLine, version_change_lines
from scheduler_core.extender.scoring.profile_versions import Change, version_changes
from scheduler_core.extender.scoring.traffic_terms import NOT_VERSIONED


@dataclass(frozen=True, slots=True)
class RecordedVersion:
    """The profile version a cycle recorded: its normalized form, or why there is none."""

    profile: str
    digest: str
    description: Mapping[str, Any] | None = None
    """``Profile.describe()`` of the version; None: ``missing`` says why."""
    noted_at: datetime | None = None
    """When a serving process first loaded it."""
    missing: str = ""

    @property
    def text(self) -> str:
        """``version 3f2a9c01be44`` or why there is none, for a page or an export."""
        return f"version {self.digest}" if self.description is not None else self.missing


_VERSIONS_KEPT = 64
_known: LRU[str, tuple[dict[str, Any], datetime]] = LRU(_VERSIONS_KEPT)
"""Stored versions read, by digest: a digest names its normalized form for good (it is that form's hash), so an
export of many cycles reads each version once. A version not stored yet is looked up again next time."""


def cycle_profile_version(*, profile: str, digest: str) -> RecordedVersion:
    """The version a cycle of ``profile`` recorded (its ``profile_version``); never today's file."""
    if not digest:
        return RecordedVersion(profile, "", missing=NOT_VERSIONED)
    known = _known.get(digest)
    if known is None:
        stored = ProfileVersion.objects.filter(digest=digest).only("normalized", "noted_at").first()
        if stored is None:
            missing = f"version {digest} is not stored (its definition never reached the database)"
            return RecordedVersion(profile, digest, missing=missing)
        known = (stored.normalized, stored.noted_at)
        _known.put(digest, known)
    return RecordedVersion(profile, digest, known[0], known[1])


def profile_version_first_served(*, digest: str) -> datetime | None:
    """When the first cycle this version decided started (the ``cycle_profile_version`` index); None: none, or no
    digest."""
    if not digest:
        return None
    first = (
        SchedulingCycle.objects.filter(profile_version=digest)
        .order_by("started_at", "id")
        .values_list("started_at", flat=True)
        .first()
    )
    return first


def profile_version_descriptions() -> dict[str, dict[str, Any]]:
    """Every stored version's normalized form, by digest (one row per version ever served: a small table)."""
    return dict(ProfileVersion.objects.values_list("digest", "normalized"))


def profile_version_get(*, digest: str) -> ProfileVersion | None:
    return ProfileVersion.objects.filter(digest=digest).first()


def profile_version_newest(*, profile: str) -> ProfileVersion | None:
    """The newest stored version of ``profile`` (by when it was first loaded); None: none stored."""
    return ProfileVersion.objects.filter(profile=profile).order_by("-noted_at", "-id").first()


@dataclass(frozen=True, slots=True)
class VersionEntry:
    """One version of a profile on the profiles page and API: when it served, how many cycles it decided, and what
    changed from the version before it."""

    version: ProfileVersion
    cycles: int
    first_served: datetime | None
    last_served: datetime | None
    changes: list[Change] = field(default_factory=list)
    """From the previous version of the same profile (empty for the first), leaf by leaf, lists whole."""
    previous: str = ""
    """The previous version's digest ("" for the first)."""
    change_lines: list[ChangeLine] = field(default_factory=list)
    """The same changes as an operator says them: one line per plugin added or removed, weight, arg or field."""


def profile_version_history(*, profile: str | None = None) -> dict[str, list[VersionEntry]]:
    """Each profile's stored versions, oldest first, with their cycles (counted on the ``cycle_profile_version``
    index, grouped once) and the diff from the one before, both ways (:class:`VersionEntry`)."""
    versions = ProfileVersion.objects.order_by("profile", "noted_at", "id")
    if profile is not None:
        versions = versions.filter(profile=profile)
    rows = list(versions)
    shown = {v.digest: redact(v.normalized) for v in rows}  # what a page or the API may show: secrets masked
    served = {
        row["profile_version"]: row
        for row in SchedulingCycle.objects.filter(profile_version__in=[v.digest for v in rows])
        .order_by()
        .values("profile_version")
        .annotate(n=Count("id"), first=Min("started_at"), last=Max("started_at"))
    }
    history: dict[str, list[VersionEntry]] = {}
    for version in rows:
        entries = history.setdefault(version.profile, [])
        before = entries[-1].version if entries else None
        seen: Mapping[str, Any] = served.get(version.digest, {})
        was = shown[before.digest] if before is not None else None
        entries.append(
            VersionEntry(
                version,
                int(seen.get("n", 0)),
                seen.get("first"),
                seen.get("last"),
                version_changes(was, shown[version.digest]) if was is not None else [],
                before.digest if before is not None else "",
                version_change_lines(was, shown[version.digest]) if was is not None else [],
            )
        )
    return history
