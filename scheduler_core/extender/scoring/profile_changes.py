"""What changed between two recorded versions of a profile, read as an operator says it.

Two normalized definitions (``Profile.describe()``, as ``scheduler_core.extender.scoring.profile_versions`` records
them) compared part by part: a plugin added to or removed from a point, a scorer's weight, a plugin's arg, a field of
the answer, one :class:`ChangeLine` each (``NetworkTraffic weight 3 → 5``) instead of a whole list before and after.
Every figure in a line is the one a version recorded, unformatted, so an auditor finds it again in either version's
definition (:attr:`ChangeLine.path` says where). A part whose shape is not the one ``describe()`` writes is still
one line: its field with the value before and after in compact JSON.

The lines come in the definition's order (filter, score, pluginConfig, answer, then anything else), each part's
entries in a fixed order too, so the same two versions always read the same, whatever order a store gave their keys
back in (PostgreSQL's jsonb keeps its own).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Any, Final

import msgspec

from scheduler_core.extender.scoring.profiles import NEW_ARGS_DEFAULTS


class ChangeKind(StrEnum):
    PLUGIN_ADDED = "plugin_added"
    PLUGIN_REMOVED = "plugin_removed"
    WEIGHT_CHANGED = "weight_changed"
    ARG_CHANGED = "arg_changed"
    ARG_ADDED = "arg_added"
    ARG_REMOVED = "arg_removed"
    FIELD_CHANGED = "field_changed"
    """Any other field (the answer's scale, a part not understood): ``field`` is its dotted path."""


@dataclass(frozen=True, slots=True)
class ChangeLine:
    """One change from a version of a profile to the next, with its text for a page."""

    kind: ChangeKind
    text: str
    """``NetworkTraffic weight 3 → 5``, ``ImageLocality added to score (weight 2)``, ``answer scale spread → fixed``."""
    plugin: str = ""
    point: str = ""
    """``filter`` or ``score`` for a plugin added, removed or reweighted there; empty otherwise."""
    field: str = ""
    """``weight``; the arg's name (empty: all of a plugin's args); the dotted path of any other field."""
    before: Any = None
    """As recorded (None: absent). A plugin added or removed: its entry in the point's list (a filter's name, a
    scorer's ``{"name", "weight"}``)."""
    after: Any = None

    @property
    def path(self) -> str:
        """Where the Definition holds the figures: ``score``, ``pluginConfig.NetworkTraffic.timeRangeInMinutes``…"""
        if self.kind in (ChangeKind.PLUGIN_ADDED, ChangeKind.PLUGIN_REMOVED, ChangeKind.WEIGHT_CHANGED):
            return self.point
        if self.kind in (ChangeKind.ARG_CHANGED, ChangeKind.ARG_ADDED, ChangeKind.ARG_REMOVED):
            return f"pluginConfig.{self.plugin}" + (f".{self.field}" if self.field else "")
        return self.field


POINTS: Final = ("filter", "score")
_PARTS: Final = ("name", *POINTS, "pluginConfig", "answer")
_ANSWER_FIELDS: Final = ("scale", "extenderWeight")


class _Absent:
    """A key one of the two versions does not have (a recorded ``null`` is a value)."""

    def __repr__(self) -> str:
        return "absent"


ABSENT: Final = _Absent()


def version_change_lines(before: Mapping[str, Any], after: Mapping[str, Any]) -> list[ChangeLine]:
    """What changed from one normalized definition (``Profile.describe()``) to the next, one line per change."""
    points = {
        point: (_point_entries(point, before.get(point)), _point_entries(point, after.get(point))) for point in POINTS
    }
    lines: list[ChangeLine] = []
    for part in _ordered(before, after, first=_PARTS):
        old, new = before.get(part, ABSENT), after.get(part, ABSENT)
        if old == new:
            continue
        old_entries, new_entries = points.get(part, (None, None))
        if old_entries is not None and new_entries is not None:
            lines.extend(_point_lines(part, old_entries, new_entries))
        elif part == "pluginConfig" and isinstance(old, Mapping) and isinstance(new, Mapping):
            lines.extend(_config_lines(old, new, _in_use(points, 0), _in_use(points, 1)))
        elif part == "answer" and isinstance(old, Mapping) and isinstance(new, Mapping):
            lines.extend(_answer_lines(old, new))
        else:
            lines.extend(_field_lines(part, old, new, point=part if part in POINTS else ""))
    return lines


_Entries = dict[str, Any]
"""A point's plugins in their recorded order, by name: each one's entry in the point's list as recorded."""


def _point_entries(point: str, recorded: Any) -> _Entries | None:
    """The point's list as ``describe()`` writes it, or None for any other shape (read as a plain field then)."""
    if not isinstance(recorded, list):
        return None
    entries: _Entries = {}
    for entry in recorded:
        if point == "filter" and isinstance(entry, str):
            name = entry
        elif point == "score" and isinstance(entry, Mapping) and isinstance(entry.get("name"), str):
            if not set(entry) <= {"name", "weight"}:
                return None
            name = entry["name"]
        else:
            return None
        if name in entries:
            return None
        entries[name] = entry
    return entries


def _in_use(points: Mapping[str, tuple[_Entries | None, _Entries | None]], side: int) -> set[str]:
    return {name for entries in points.values() for name in entries[side] or ()}


def _point_lines(point: str, before: _Entries, after: _Entries) -> Iterator[ChangeLine]:
    for name, entry in before.items():
        if name not in after:
            said = f" (weight {_said(entry.get('weight'))})" if point == "score" else ""
            yield ChangeLine(ChangeKind.PLUGIN_REMOVED, f"{name} removed from {point}{said}", name, point, "", entry)
        elif after[name] != entry:  # a scorer's entry holds its name and weight only
            old, new = entry.get("weight"), after[name].get("weight")
            text = f"{name} weight {_said(old)} → {_said(new)}"
            yield ChangeLine(ChangeKind.WEIGHT_CHANGED, text, name, point, "weight", old, new)
    for name, entry in after.items():
        if name not in before:
            said = f" (weight {_said(entry.get('weight'))})" if point == "score" else ""
            yield ChangeLine(ChangeKind.PLUGIN_ADDED, f"{name} added to {point}{said}", name, point, "", None, entry)
    # The digest is of the lists in their order, so plugins that only swapped places are a version of their own.
    kept_before, kept_after = [n for n in before if n in after], [n for n in after if n in before]
    if kept_before != kept_after:
        old, new = list(before), list(after)
        text = f"{point} order {_json(old)} → {_json(new)}"
        yield ChangeLine(ChangeKind.FIELD_CHANGED, text, "", point, point, old, new)


def _config_lines(
    before: Mapping[str, Any], after: Mapping[str, Any], used_before: set[str], used_after: set[str]
) -> Iterator[ChangeLine]:
    for plugin in _ordered(before, after):
        old, new = before.get(plugin, ABSENT), after.get(plugin, ABSENT)
        if old == new:
            continue
        if isinstance(old, Mapping) and isinstance(new, Mapping):
            yield from _arg_lines(plugin, old, new)
        elif old is ABSENT and isinstance(new, Mapping) and plugin in used_after - used_before:
            # A plugin coming into use runs with these args, defaults filled in: the definition does not say which
            # ones the operator wrote, so all of them, on one line beside the line of the point it was added to.
            if new:
                yield ChangeLine(ChangeKind.ARG_ADDED, f"{plugin} args {_json(new)}", plugin, "", "", None, new)
        elif new is ABSENT and plugin in used_before - used_after:
            pass  # a plugin no longer in use decides nothing with its args: its removal line says all there is
        else:
            yield from _field_lines(f"pluginConfig.{plugin}", old, new, plugin=plugin)


def _arg_lines(plugin: str, before: Mapping[str, Any], after: Mapping[str, Any]) -> Iterator[ChangeLine]:
    for arg in sorted({*before, *after}):
        old, new = before.get(arg, ABSENT), after.get(arg, ABSENT)
        if old == new:
            continue
        # Args added to the plugins after versions were first stored are left out of a definition while at their
        # default (scheduler_core.extender.scoring.profiles.NEW_ARGS_DEFAULTS): an absent one is that default, not
        # unknown.
        meaning = f"absent: its default, {_said(NEW_ARGS_DEFAULTS[arg])}" if arg in NEW_ARGS_DEFAULTS else ""
        if old is ABSENT:
            text = f"{plugin} arg {arg} added: {_said(new)}" + (f" ({meaning})" if meaning else "")
            yield ChangeLine(ChangeKind.ARG_ADDED, text, plugin, "", arg, None, new)
        elif new is ABSENT:
            text = f"{plugin} arg {arg} removed (was {_said(old)}" + (f"; {meaning})" if meaning else ")")
            yield ChangeLine(ChangeKind.ARG_REMOVED, text, plugin, "", arg, old, None)
        else:
            text = f"{plugin} arg {arg} {_said(old)} → {_said(new)}"
            yield ChangeLine(ChangeKind.ARG_CHANGED, text, plugin, "", arg, old, new)


def _answer_lines(before: Mapping[str, Any], after: Mapping[str, Any]) -> Iterator[ChangeLine]:
    for key in _ordered(before, after, first=_ANSWER_FIELDS):
        old, new = before.get(key, ABSENT), after.get(key, ABSENT)
        if old == new:
            continue
        if old is ABSENT or new is ABSENT:
            yield from _field_lines(f"answer.{key}", old, new)
        else:
            text = f"answer {key} {_said(old)} → {_said(new)}"
            yield ChangeLine(ChangeKind.FIELD_CHANGED, text, "", "", f"answer.{key}", old, new)


def _field_lines(path: str, before: Any, after: Any, *, plugin: str = "", point: str = "") -> Iterator[ChangeLine]:
    """A field not read any other way: its leaves that differ (a mapping on both sides is gone into), each with its
    value before and after in compact JSON."""
    if isinstance(before, Mapping) and isinstance(after, Mapping):
        for key in _ordered(before, after):
            if before.get(key, ABSENT) != after.get(key, ABSENT):
                yield from _field_lines(f"{path}.{key}", before.get(key, ABSENT), after.get(key, ABSENT), plugin=plugin)
        return
    if before is ABSENT:
        text = f"{path}: added {_json(after)}"
    elif after is ABSENT:
        text = f"{path}: removed (was {_json(before)})"
    else:
        text = f"{path}: {_json(before)} → {_json(after)}"
    old, new = (None if value is ABSENT else value for value in (before, after))
    yield ChangeLine(ChangeKind.FIELD_CHANGED, text, plugin, point, path, old, new)


def in_reading_order(description: Mapping[str, Any]) -> dict[str, Any]:
    """A normalized definition with its parts in the order the change lines come in, every mapping inside ordered by
    key: to show beside the lines, where each one's figures are found the way the lines go."""
    return {key: _keys_sorted(description[key]) for key in _ordered(description, {}, first=_PARTS)}


def _keys_sorted(value: Any) -> Any:
    if isinstance(value, Mapping):
        return {str(key): _keys_sorted(value[key]) for key in sorted(value, key=str)}
    if isinstance(value, list):
        return [_keys_sorted(item) for item in value]
    return value


def _ordered(before: Mapping[str, Any], after: Mapping[str, Any], first: tuple[str, ...] = ()) -> list[str]:
    """The keys of both: ``first`` in its order, then the others by name (never by the order a store kept)."""
    keys = {str(key) for key in (*before, *after)}
    return [key for key in first if key in keys] + sorted(keys - set(first))


def _said(value: Any) -> str:
    """A value as a line says it: a string as itself (``spread``), anything else (and an empty string) as JSON."""
    return value if isinstance(value, str) and value else _json(value)


def _json(value: Any) -> str:
    return msgspec.json.encode(value, order="sorted").decode()
