"""The profile versions a test's extender serves, stored as the ingester stores a serving process's spooled notes
(``dashboard.runtime.note_profile_versions`` → ``dashboard.services.profile_versions``), for the helpers that fold
the verbs' events without a spool."""

from __future__ import annotations

import time
from collections.abc import Mapping

from scheduler_core.profile_versions import version_notes
from scheduler_core.profiles import Profile

SERVER = "test-replica"


def store_served_versions(profiles: Mapping[str, Profile], text: str | None, *, server: str = SERVER) -> list[str]:
    """Store the versions of ``profiles`` (loaded from ``text``) as served by ``server``; returns their digests."""
    from dashboard.services.profile_versions import profile_version_add

    notes = version_notes(profiles, text, server=server, at=time.time())
    for note in notes:
        profile_version_add(note=note)
    return [note.digest for note in notes]
