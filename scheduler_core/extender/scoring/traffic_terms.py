"""The traffic window and staleness limit a cycle's traffic figures are read with, and the staleness rule.

A cycle's record carries the traffic it measured (raw bytes per node over the query window), the snapshot's age, and
the reason ``metrics stale`` when the extender refused the snapshot as too old
(``scheduler_core.extender.scoring.plugins.traffic.read_traffic``). It carries neither the window
(``timeRangeInMinutes``) nor the limit (``maxStalenessSeconds``): those are the profile's, found in one place
(``dashboard.selectors.cycles.cycle_traffic_terms``), which says where they came from or why they are not known.
Every screen judges staleness with :func:`staleness`, by way of :func:`scheduler_core.explanation.explain.explain`.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from scheduler_core.extender.scoring.plugins.traffic import STALE_REASON, NetworkTraffic, TrafficThreshold
from scheduler_core.traffic import DEFAULT_WINDOW_MINUTES

TRAFFIC_PLUGINS = (NetworkTraffic.name, TrafficThreshold.name)
"""Whose args a profile's traffic is read with: the score plugin's, else the filter's, as the engine reads them
(``scheduler_core.extender.scoring.engine._traffic_args`` looks at the scorers first)."""
WINDOW_ARG = "timeRangeInMinutes"
LIMIT_ARG = "maxStalenessSeconds"
CONFIGURED = "configured"
RECORDED = "recorded"
NOT_VERSIONED = "recorded before profile versions were kept"
"""What every screen says of a cycle without a profile version, instead of reading today's file for it."""


@dataclass(frozen=True, slots=True)
class TrafficTerms:
    """A profile's traffic window and staleness limit, where they come from, or why they are not known."""

    window_minutes: int | None = None
    max_staleness_seconds: float | None = None
    source: str = ""
    """``recorded``: the profile version the cycle recorded; ``configured``: the profile as configured now; empty:
    not known."""
    unknown: str = ""
    """Why the window and limit are not known ("recorded before profile versions were kept")."""
    profile: str = ""
    version: str = ""
    """The profile version they come from (``source`` ``recorded``)."""

    @property
    def provenance(self) -> str:
        if self.source == RECORDED:
            return f"profile {self.profile!r} version {self.version}, as recorded"
        return f"profile {self.profile!r} as configured now" if self.source == CONFIGURED else "as given"

    @property
    def window_text(self) -> str:
        """``5 min (profile 'default' as configured now)``, or why the window is not known."""
        if self.window_minutes is None:
            return self.unknown or "not known"
        return f"{self.window_minutes} min ({self.provenance})"

    @property
    def limit_text(self) -> str:
        """``120 s, profile 'default' as configured now``, or why the limit is not known."""
        if self.max_staleness_seconds is None:
            return self.unknown or "not known"
        return f"{self.max_staleness_seconds:g} s, {self.provenance}"


def traffic_args(plugin_args: Mapping[str, Mapping[str, Any]]) -> Mapping[str, Any] | None:
    """The args a profile's traffic is read with, from its plugins' effective args (``Profile.plugin_args``, a
    description's ``pluginConfig``); None: the profile reads no traffic."""
    return next((plugin_args[name] for name in TRAFFIC_PLUGINS if plugin_args.get(name)), None)


def window_seconds(plugin_args: Mapping[str, Mapping[str, Any]]) -> int:
    """The traffic window a profile's raw bytes cover, in seconds: :func:`traffic_args`' ``timeRangeInMinutes``, its
    default when the profile reads no traffic (a replay still divides by a window)."""
    return int((traffic_args(plugin_args) or {}).get(WINDOW_ARG, DEFAULT_WINDOW_MINUTES)) * 60


def terms_of(profile: str, plugin_args: Mapping[str, Mapping[str, Any]] | None, *, version: str = "") -> TrafficTerms:
    """The terms a profile states in its plugins' effective args (``Profile.plugin_args``, a description's
    ``pluginConfig``): of its recorded ``version``, else as configured now; ``None``: the profile is not configured."""
    source = RECORDED if version else CONFIGURED
    if plugin_args is None:
        return TrafficTerms(unknown=f"not recorded; profile {profile!r} is no longer configured", profile=profile)
    args = traffic_args(plugin_args)
    if args is None:
        return TrafficTerms(source=source, unknown=f"profile {profile!r} reads no traffic", profile=profile)
    window, limit = args.get(WINDOW_ARG), args.get(LIMIT_ARG)
    return TrafficTerms(
        window_minutes=window if isinstance(window, int) else None,
        max_staleness_seconds=float(limit) if isinstance(limit, int | float) else None,
        source=source,
        profile=profile,
        version=version,
    )


@dataclass(frozen=True, slots=True)
class Staleness:
    stale: bool | None
    """None: no measurement, or no known limit to compare it with."""
    text: str
    """The verdict with the figures it follows from; empty without a measurement."""


def staleness(age_seconds: float | None, notes: Iterable[str], terms: TrafficTerms) -> Staleness:
    """Whether the traffic a cycle used was stale: the extender's own verdict when it recorded one (it refused the
    snapshot), else the age against the profile's ``maxStalenessSeconds``; not known without that limit."""
    if age_seconds is None:
        return Staleness(None, "")
    measured = f"Traffic was measured {age_seconds:.0f} s before the decision"
    limit = terms.max_staleness_seconds
    if any(STALE_REASON in note.split("; ") for note in notes):
        return Staleness(
            True,
            f"{measured}, older than maxStalenessSeconds ({terms.limit_text}):"
            f" the extender scored without it ({STALE_REASON}).",
        )
    if limit is None:
        return Staleness(
            None, f"{measured}; whether that was stale is not known: maxStalenessSeconds {terms.limit_text}."
        )
    if age_seconds > limit:
        return Staleness(True, f"{measured}, older than maxStalenessSeconds ({terms.limit_text}).")
    return Staleness(False, f"{measured}, within maxStalenessSeconds ({terms.limit_text}).")
