"""Profile versions as recorded facts: what a serving process notes when it loads its profiles, and how two
versions of one profile differ.

A version is a profile's complete, normalized definition (``Profile.describe()``: every plugin, weight and arg with
its default filled in, the answer scale and extender weight), named by its digest (``Profile.version()``). Every
verb call's record carries the digest (``VerbEvent.profile_version``); the definition itself travels once per
loaded profile, as a :class:`ProfileVersionNote` the process spools beside its records, and is stored once.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

import msgspec

from scheduler_core.extender.scoring.profiles import Profile, ProfileError, load_profiles, profile_sources


class ProfileVersionNote(msgspec.Struct, omit_defaults=True, gc=False):
    """One profile as a serving process loaded it."""

    digest: str
    """``Profile.version()``."""
    profile: str
    normalized: dict[str, Any]
    """``Profile.describe()``: what the digest is of."""
    server: str
    """The replica that loaded it (its host name)."""
    loaded_at: float
    """Unix seconds."""
    yaml: str = ""
    """The profile's entry in the profiles file, as loaded; empty for the built-in default."""


def version_notes(
    profiles: Mapping[str, Profile], text: str | None, *, server: str, at: float
) -> list[ProfileVersionNote]:
    """The notes of ``profiles``, loaded from the YAML ``text`` (None: the built-in default). A profile's YAML is
    kept only when it defines exactly that version (the file may have changed since the profiles were loaded)."""
    try:
        sources = profile_sources(text)
    except Exception:  # a file that no longer parses: the definitions are still known, their YAML is not
        sources = {}
    notes = []
    for name, profile in profiles.items():
        source = sources.get(name, "")
        if source and _version_of(source, name) != profile.version():
            source = ""
        notes.append(ProfileVersionNote(profile.version(), name, profile.describe(), server, at, source))
    return notes


def _version_of(entry: str, name: str) -> str:
    try:
        loaded = load_profiles("profiles:\n" + "".join(f"  {line}\n" for line in _list_item(entry)))
    except ProfileError:
        return ""
    return loaded[name].version() if name in loaded else ""


def _list_item(entry: str) -> Iterator[str]:
    for index, line in enumerate(entry.splitlines()):
        yield ("- " if index == 0 else "  ") + line


encode_note = msgspec.json.Encoder().encode
decode_note = msgspec.json.Decoder(ProfileVersionNote).decode


@dataclass(frozen=True, slots=True)
class Change:
    """One difference between two versions of a profile: where, and the value before and after (None: absent)."""

    path: str
    """Dotted, as the profiles file names it: ``pluginConfig.TrafficThreshold.maxBytesPerSecond``, ``score``."""
    before: Any
    after: Any

    @property
    def text(self) -> str:
        if self.before is None:
            return f"{self.path}: added {_shown(self.after)}"
        if self.after is None:
            return f"{self.path}: removed (was {_shown(self.before)})"
        return f"{self.path}: {_shown(self.before)} → {_shown(self.after)}"


def _shown(value: Any) -> str:
    return msgspec.json.encode(value).decode() if not isinstance(value, str) else value


def version_changes(before: Mapping[str, Any], after: Mapping[str, Any]) -> list[Change]:
    """What changed from one normalized definition (``Profile.describe()``) to the next, arg by arg: every leaf that
    differs, by its path. Lists (the filters, the scorers with their weights) compare whole."""
    changes: list[Change] = []
    _walk("", before, after, changes)
    return changes


def _walk(path: str, before: Any, after: Any, changes: list[Change]) -> None:
    if isinstance(before, Mapping) and isinstance(after, Mapping):
        for key in [*before, *(k for k in after if k not in before)]:
            _walk(f"{path}.{key}" if path else str(key), before.get(key), after.get(key), changes)
    elif before != after:
        changes.append(Change(path, before, after))
