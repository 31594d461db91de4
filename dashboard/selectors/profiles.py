"""The configured profiles, read one way: :func:`profile_configuration` (the file ``SCHEDLENS_CONFIG`` names, or
the embedded default, read again when it changes), for the pages, the API, the explanation's traffic terms, the
history replays, the traffic prefetch and the commands.

Only the verbs' runtime loads them otherwise (``dashboard.runtime``, the layer below, which this wraps): it keeps
the profiles it started with until it restarts.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from functools import cached_property
from typing import Any
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

from django.conf import settings

from dashboard.runtime import configured_profiles
from scheduler_core.extender.scoring.profiles import Profile, ProfileError

REDACTED = "***"
_SECRET_KEY = re.compile(r"pass(word|wd)?|secret|token|credential|api[-_]?key|auth|bearer|private|cookie", re.I)


class ProfilesUnavailableError(Exception):
    """The profiles file cannot be read or is invalid (the extender would refuse to start with it)."""


@dataclass(frozen=True)
class ConfiguredProfiles:
    profiles: Mapping[str, Profile]
    """By name; empty when the configuration cannot be read."""
    error: ProfileError | OSError | None
    """Why the configuration cannot be read (the ``ProfileError`` naming profile, plugin and field, or the file's
    ``OSError``); None when it can."""
    path: str
    """The file read (``SCHEDLENS_CONFIG``); empty: the embedded default."""

    @property
    def problem(self) -> str:
        return str(self.error) if self.error is not None else ""

    def required(self) -> Mapping[str, Profile]:
        """The profiles, or the error raised: for whoever cannot go on without them."""
        if self.error is not None:
            raise self.error
        return self.profiles

    @cached_property
    def descriptions(self) -> dict[str, dict[str, Any]]:
        """The profiles described as plain data; empty when the configuration cannot be read."""
        return {name: profile.describe() for name, profile in self.profiles.items()}


def profile_configuration() -> ConfiguredProfiles:
    """The configured profiles, or what is wrong with their file: never raises."""
    path = str(settings.SCHEDLENS_CONFIG or "")
    try:
        return ConfiguredProfiles(configured_profiles(), None, path)
    except (ProfileError, OSError) as exc:
        return ConfiguredProfiles({}, exc, path)


def _redact_url(text: str) -> str:
    try:
        parts = urlsplit(text)
    except ValueError:
        return text
    if not parts.scheme or not parts.netloc:
        return text
    netloc = parts.netloc
    if "@" in netloc:
        userinfo, _, host = netloc.rpartition("@")
        user, colon, _password = userinfo.partition(":")
        netloc = f"{user}:{REDACTED}@{host}" if colon else f"{REDACTED}@{host}"
    query = parts.query
    if query:
        pairs = parse_qsl(query, keep_blank_values=True)
        query = urlencode([(k, REDACTED if _SECRET_KEY.search(k) else v) for k, v in pairs], safe="*")
    return urlunsplit((parts.scheme, netloc, parts.path, query, parts.fragment))


def redact(value: Any, key: str = "") -> Any:
    """Profile configuration with secrets masked: values of secret-looking keys, URL passwords and tokens."""
    if isinstance(value, Mapping):
        return {k: redact(v, str(k)) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [redact(v, key) for v in value]
    if key and _SECRET_KEY.search(key) and value not in (None, "", False):
        return REDACTED
    if isinstance(value, str) and "://" in value:
        return _redact_url(value)
    return value


def profile_list() -> list[dict[str, Any]]:
    """The effective configuration of every profile, as the extender loads it, redacted (the API's)."""
    configured = profile_configuration()
    if configured.error is not None:
        raise ProfilesUnavailableError(configured.problem)
    return [redact(profile.describe()) for profile in configured.profiles.values()]
