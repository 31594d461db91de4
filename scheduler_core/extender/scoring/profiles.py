"""Named profiles: which plugins filter and score, with what weight and args.

The file has the shape operators know from ``KubeSchedulerConfiguration``::

    profiles:
    - name: default
      plugins:
        filter: {enabled: [{name: TrafficThreshold}], disabled: [{name: "*"}]}
        score:  {enabled: [{name: NetworkTraffic, weight: 3}]}
      pluginConfig:
      - {name: NetworkTraffic, args: {deviceName: eth0, timeRangeInMinutes: 5}}

Like kube-scheduler, each profile starts from the default plugin set; ``enabled`` adds to it (or changes
a weight) and ``disabled`` removes from it, ``"*"`` removing every default. Any mistake refuses the whole
file with a message naming the profile, the plugin and the field.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import msgspec
import yaml

from scheduler_core.extender.protocol.decode_errors import document_refusal, yaml_location
from scheduler_core.extender.scoring.answer import DEFAULT_ANSWER_SCALE, AnswerScale
from scheduler_core.extender.scoring.plugins import (
    FILTER_PLUGINS,
    PLUGINS,
    SCORE_PLUGINS,
    FilterPlugin,
    PluginArgs,
    ScorePlugin,
)
from scheduler_core.extender.scoring.plugins.traffic import NetworkTraffic, TrafficArgs, TrafficThreshold
from scheduler_core.traffic import TrafficQuery

DEFAULT_FILTER_PLUGINS: tuple[str, ...] = (TrafficThreshold.name,)
DEFAULT_SCORE_PLUGINS: tuple[tuple[str, int], ...] = ((NetworkTraffic.name, 1),)
MAX_WEIGHT = 100
_PROFILE_NAME = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")


class ProfileError(ValueError):
    """The profile configuration is invalid; the message names profile, plugin and field."""


class _PluginRef(msgspec.Struct, forbid_unknown_fields=True):
    name: str
    weight: int | None = None


class _PluginSet(msgspec.Struct, forbid_unknown_fields=True):
    enabled: list[_PluginRef] = msgspec.field(default_factory=list)
    disabled: list[_PluginRef] = msgspec.field(default_factory=list)


class _Plugins(msgspec.Struct, forbid_unknown_fields=True):
    filter: _PluginSet = msgspec.field(default_factory=_PluginSet)
    score: _PluginSet = msgspec.field(default_factory=_PluginSet)


class _PluginConfig(msgspec.Struct, forbid_unknown_fields=True):
    name: str
    args: dict[str, Any] = msgspec.field(default_factory=dict)


class _AnswerConfig(msgspec.Struct, rename="camel", forbid_unknown_fields=True):
    """How final scores become kube-scheduler's 0..10 answers (``scheduler_core.extender.scoring.answer``)."""

    scale: AnswerScale = DEFAULT_ANSWER_SCALE
    extender_weight: int | None = None
    """The ``weight`` of this extender in kube-scheduler's configuration, when the operator states it: explanations
    then speak of the points kube-scheduler added (answer × weight). kube-scheduler never tells the extender."""


class _ProfileConfig(msgspec.Struct, rename="camel", forbid_unknown_fields=True):
    name: str
    plugins: _Plugins = msgspec.field(default_factory=_Plugins)
    plugin_config: list[_PluginConfig] = msgspec.field(default_factory=list)
    answer: _AnswerConfig = msgspec.field(default_factory=_AnswerConfig)


class _Config(msgspec.Struct, rename="camel", forbid_unknown_fields=True):
    profiles: list[_ProfileConfig]
    api_version: str = ""
    kind: str = ""


@dataclass(frozen=True, slots=True)
class WeightedScorer:
    plugin: ScorePlugin
    weight: int


@dataclass(frozen=True, slots=True)
class Profile:
    name: str
    filters: tuple[FilterPlugin, ...]
    scorers: tuple[WeightedScorer, ...]
    plugin_args: Mapping[str, Mapping[str, Any]]
    """The effective args of every plugin in use, as plain data (for records, the API and the dashboard)."""
    answer_scale: AnswerScale = DEFAULT_ANSWER_SCALE
    extender_weight: int | None = None
    _version: str = field(default="", init=False, repr=False, compare=False)
    """Computed once, when the profile is built: every verb call's record carries it (``VerbEvent.profile_version``)."""

    def __post_init__(self) -> None:
        object.__setattr__(self, "_version", profile_version(self.describe()))

    def traffic_queries(self) -> frozenset[TrafficQuery]:
        """Every distinct traffic query this profile's plugins read (one snapshot each)."""
        plugins: list[object] = [*self.filters, *(s.plugin for s in self.scorers)]
        return frozenset(p.args.query() for p in plugins if isinstance(getattr(p, "args", None), TrafficArgs))  # type: ignore[attr-defined]

    def version(self) -> str:
        """This exact definition of the profile (:func:`profile_version` of :meth:`describe`), computed once."""
        return self._version

    def describe(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "filter": [p.name for p in self.filters],
            "score": [{"name": s.plugin.name, "weight": s.weight} for s in self.scorers],
            "pluginConfig": {name: dict(args) for name, args in self.plugin_args.items()},
            "answer": {"scale": self.answer_scale, "extenderWeight": self.extender_weight},
        }


NEW_ARGS_DEFAULTS: Mapping[str, object] = {"learnWorkloadTraffic": False, "reconcileHerd": False}
"""Args added after profile versions were stored, left out of a profile's normalized form while at their default: a
profile that does not use them keeps the version it had (its stored records stay its), one that does gets a new one."""


def _without_new_defaults(args: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in args.items() if k not in NEW_ARGS_DEFAULTS or NEW_ARGS_DEFAULTS[k] != v}


def profile_version(description: Mapping[str, Any]) -> str:
    """A profile's version: the first 12 hex digits of the SHA-256 of its complete definition (``Profile.describe()``:
    every plugin, weight and arg with its default filled in, the answer scale and extender weight) as canonical JSON.
    Two files that define the same profile differently in form but not in effect give the same version."""
    canonical = json.dumps(description, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str)
    return hashlib.sha256(canonical.encode()).hexdigest()[:12]


def _profile_label(raw: Any, index: int) -> str:
    try:
        return repr(raw["profiles"][index]["name"])
    except (KeyError, IndexError, TypeError):
        return f"#{index}"


def parse_profiles(document: Any) -> dict[str, Profile]:
    """Validate a decoded YAML document and build its profiles."""
    if not isinstance(document, Mapping):
        raise ProfileError("profile configuration must be a mapping with a 'profiles' list")
    try:
        config = msgspec.convert(document, _Config)
    except msgspec.ValidationError as exc:
        message, path = document_refusal(document, _Config, exc)
        match = re.match(r"\$\.profiles\[(\d+)\]", path)
        where = f"profile {_profile_label(document, int(match.group(1)))}, " if match else ""
        raise ProfileError(f"{where}field {path.removeprefix('$.')}: {message}") from None
    if not config.profiles:
        raise ProfileError("field profiles: at least one profile is required")
    profiles: dict[str, Profile] = {}
    for profile_config in config.profiles:
        profile = _build_profile(profile_config)
        if profile.name in profiles:
            raise ProfileError(f"profile {profile.name!r}: field name: duplicate profile name")
        profiles[profile.name] = profile
    return profiles


def _merge(
    profile: str,
    point: str,
    allowed: frozenset[str],
    defaults: list[tuple[str, int]],
    plugin_set: _PluginSet,
) -> list[tuple[str, int]]:
    disabled = {ref.name for ref in plugin_set.disabled}
    for name in disabled - {"*"}:
        if name not in PLUGINS:
            raise ProfileError(f"profile {profile!r}, plugin {name!r}: field plugins.{point}.disabled: unknown plugin")
    chosen = [] if "*" in disabled else [(n, w) for n, w in defaults if n not in disabled]
    for ref in plugin_set.enabled:
        field = f"plugins.{point}.enabled"
        if ref.name not in PLUGINS:
            known = ", ".join(sorted(PLUGINS))
            raise ProfileError(
                f"profile {profile!r}, plugin {ref.name!r}: field {field}: unknown plugin (known: {known})"
            )
        if ref.name not in allowed:
            raise ProfileError(
                f"profile {profile!r}, plugin {ref.name!r}: field {field}: plugin has no {point} extension point"
            )
        weight = 1 if ref.weight is None else ref.weight
        if point == "score" and not 1 <= weight <= MAX_WEIGHT:
            raise ProfileError(
                f"profile {profile!r}, plugin {ref.name!r}: field {field}.weight: must be 1..{MAX_WEIGHT}, got {weight}"
            )
        if point == "filter" and ref.weight is not None:
            raise ProfileError(
                f"profile {profile!r}, plugin {ref.name!r}: field {field}.weight: filter plugins take no weight"
            )
        chosen = [(n, w) for n, w in chosen if n != ref.name] + [(ref.name, weight)]
    return chosen


def _build_profile(config: _ProfileConfig) -> Profile:
    name = config.name
    if not _PROFILE_NAME.match(name) or len(name) > 63:
        raise ProfileError(f"profile {name!r}: field name: must be a DNS label (lowercase letters, digits, '-')")
    filters = _merge(name, "filter", FILTER_PLUGINS, [(n, 0) for n in DEFAULT_FILTER_PLUGINS], config.plugins.filter)
    scores = _merge(name, "score", SCORE_PLUGINS, list(DEFAULT_SCORE_PLUGINS), config.plugins.score)

    raw_args: dict[str, dict[str, Any]] = {}
    for entry in config.plugin_config:
        if entry.name not in PLUGINS:
            raise ProfileError(f"profile {name!r}, plugin {entry.name!r}: field pluginConfig: unknown plugin")
        if entry.name in raw_args:
            raise ProfileError(f"profile {name!r}, plugin {entry.name!r}: field pluginConfig: configured twice")
        raw_args[entry.name] = entry.args

    instances: dict[str, Any] = {}
    effective: dict[str, Mapping[str, Any]] = {}
    for plugin_name in dict.fromkeys([n for n, _ in filters] + [n for n, _ in scores]):
        cls = PLUGINS[plugin_name]
        try:
            args: PluginArgs = msgspec.convert(raw_args.get(plugin_name, {}), cls.args_type)
        except msgspec.ValidationError as exc:
            message, path = document_refusal(raw_args.get(plugin_name, {}), cls.args_type, exc)
            field = path.removeprefix("$").lstrip(".") or "args"
            raise ProfileError(
                f"profile {name!r}, plugin {plugin_name!r}: field args.{field}: {message}".replace("args.args", "args")
            ) from None
        instances[plugin_name] = cls(args)  # type: ignore[arg-type]
        effective[plugin_name] = _without_new_defaults(msgspec.to_builtins(args))
    weight = config.answer.extender_weight
    if weight is not None and not 1 <= weight <= MAX_WEIGHT:
        raise ProfileError(f"profile {name!r}: field answer.extenderWeight: must be 1..{MAX_WEIGHT}, got {weight}")
    return Profile(
        name=name,
        filters=tuple(instances[n] for n, _ in filters),
        scorers=tuple(WeightedScorer(instances[n], w) for n, w in scores),
        plugin_args=effective,
        answer_scale=config.answer.scale,
        extender_weight=weight,
    )


def profile_sources(text: str | None) -> dict[str, str]:
    """Each profile's own entry of the YAML ``text`` as loaded (its mapping under ``profiles``, written again as YAML),
    by name; empty for the built-in default. For the record of a profile's versions: what the operator wrote."""
    if text is None:
        return {}
    document = yaml.safe_load(text)
    entries = document.get("profiles") if isinstance(document, Mapping) else None
    return {
        str(entry["name"]): yaml.safe_dump(entry, sort_keys=False, allow_unicode=True)
        for entry in entries or ()
        if isinstance(entry, Mapping) and "name" in entry
    }


def load_profiles(text: str | None) -> dict[str, Profile]:
    """Profiles from YAML text; ``None`` gives the built-in ``default`` profile."""
    if text is None:
        return parse_profiles({"profiles": [{"name": "default"}]})
    try:
        document = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise ProfileError(f"profile configuration is not valid YAML{yaml_location(exc)}") from None
    return parse_profiles(document)
