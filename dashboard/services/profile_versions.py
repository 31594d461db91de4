"""The stored profile versions: each version once (``ProfileVersion``), from the notes serving processes spool when
they load their profiles (``dashboard.runtime.note_profile_versions``).

The ingester stores them before the calls of each pass (``dashboard.ingest.spool_ingest``), so a cycle's version is
in the database by the time the cycle is; never a write per verb call.
"""

from __future__ import annotations

from datetime import UTC, datetime

import msgspec
from django.db import transaction

from dashboard.models import ProfileVersion
from dashboard.spool import Spool
from scheduler_core.extender.scoring.profile_versions import ProfileVersionNote, decode_note


def profile_versions_store(*, spool: Spool) -> int:
    """Store the versions noted in ``spool`` that the database lacks, and the replicas that loaded them; returns how
    many notes were stored. A note that does not decode is left unstored and logged by its caller's next pass."""
    pending = spool.profile_versions_unstored()
    if not pending:
        return 0
    notes: list[ProfileVersionNote] = []
    for _digest, _server, data in pending:
        try:
            notes.append(decode_note(data))
        except msgspec.DecodeError:
            continue
    with transaction.atomic():
        for note in notes:
            profile_version_add(note=note)
    spool.profile_versions_stored([(digest, server) for digest, server, _ in pending])
    return len(notes)


def profile_version_add(*, note: ProfileVersionNote) -> ProfileVersion:
    """Store ``note``'s version unless stored; add its replica to those that served it, and its YAML if unknown."""
    with transaction.atomic():
        return _add(note)


def _add(note: ProfileVersionNote) -> ProfileVersion:
    stored, created = ProfileVersion.objects.select_for_update().get_or_create(
        digest=note.digest,
        defaults={
            "profile": note.profile,
            "yaml": note.yaml,
            "normalized": note.normalized,
            "servers": [note.server],
            "noted_at": datetime.fromtimestamp(note.loaded_at, tz=UTC),
        },
    )
    if created:
        return stored
    changed = []
    if note.server not in stored.servers:
        stored.servers = [*stored.servers, note.server]
        changed.append("servers")
    if note.yaml and not stored.yaml:
        stored.yaml = note.yaml
        changed.append("yaml")
    noted = datetime.fromtimestamp(note.loaded_at, tz=UTC)
    if noted < stored.noted_at:
        stored.noted_at = noted
        changed.append("noted_at")
    if changed:
        stored.save(update_fields=changed)
    return stored
