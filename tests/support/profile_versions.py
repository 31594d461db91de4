"""The profile versions a test's extender serves, stored as the ingester stores a serving process's spooled notes
(``dashboard.runtime.note_profile_versions`` → ``dashboard.services.profile_versions``), for the helpers that fold
the verbs' events without a spool."""

from __future__ import annotations

import time
from collections.abc import Mapping

from scheduler_core.extender.scoring.profile_versions import version_notes
from scheduler_core.extender.scoring.profiles import Profile, load_profiles

SERVER = "test-replica"


def store_served_versions(profiles: Mapping[str, Profile], text: str | None, *, server: str = SERVER) -> list[str]:
    """Store the versions of ``profiles`` (loaded from ``text``) as served by ``server``; returns their digests."""
    from dashboard.services.profile_versions import profile_version_add

    notes = version_notes(profiles, text, server=server, at=time.time())
    for note in notes:
        profile_version_add(note=note)
    return [note.digest for note in notes]


ROLLED_OUT_FROM = """
profiles:
- name: web
  plugins:
    score: {enabled: [{name: NetworkTraffic, weight: 3}]}
  pluginConfig:
  - {name: NetworkTraffic, args: {timeRangeInMinutes: 5}}
"""
ROLLED_OUT_TO = """
profiles:
- name: web
  plugins:
    score: {enabled: [{name: NetworkTraffic, weight: 5}, {name: ImageLocality, weight: 2}]}
  pluginConfig:
  - {name: NetworkTraffic, args: {timeRangeInMinutes: 10}}
"""
"""A rollout of profile ``web``: NetworkTraffic's weight raised, ImageLocality added to score, NetworkTraffic's
window doubled."""


def store_rollout() -> tuple[str, str]:
    """Both versions of the rollout stored, the older first, as a replica serving each would have; their digests."""
    (before,) = store_served_versions(load_profiles(ROLLED_OUT_FROM), ROLLED_OUT_FROM)
    (after,) = store_served_versions(load_profiles(ROLLED_OUT_TO), ROLLED_OUT_TO)
    return before, after
