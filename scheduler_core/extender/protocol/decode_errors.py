"""Why a document did not decode into one of schedlens's types, in schedlens's words and with its JSON path.

Every refusal schedlens shows (a verb's 400, a profile file's error, a record the history replay skips) is written
here, never passed through from msgspec: a new msgspec release once reworded its errors and changed the answers. What
is taken from msgspec is only structured: which exception class it raised, and the JSON path it appends to a
validation error (`` - at `$...` ``, the one piece of its text read; ``$`` when absent). The rest comes from the
document itself and from our own types:

- a JSON text that is not JSON: :mod:`scheduler_core.extender.protocol.json_syntax` finds the first problem and its byte
offset;
- a value that does not fit: the value at the path is looked up in the document, and described against what the
  type at that path expects (:func:`msgspec.structs.fields` and the annotations).

Kept apart from :mod:`scheduler_core.extender.protocol.wire` because it serves every decoder (profiles, cluster files,
stored records), and because none of it runs unless a decode has already failed.
"""

from __future__ import annotations

import enum
import re
import types
import typing
from collections.abc import Mapping, Sequence
from typing import Any, NamedTuple

import msgspec
import yaml

from scheduler_core.extender.protocol.json_syntax import Scan, SyntaxProblem, line_and_column, scan

EMPTY_BODY = "empty request body"

_PATH_SUFFIX = re.compile(r" - at `(?P<path>\$[^`]*)`$")
_SEGMENT = re.compile(r"\.(?P<field>[^.\[]+)|\[(?P<index>\d+)\]|(?P<key>\[\.\.\.\])")
_SHOWN_LENGTH = 40

Annotation = Any
"""A type as the decoders take it (a class, ``list[str]``, ``X | None``, ``Annotated[int, Meta(...)]``, ...)."""


class Refusal(NamedTuple):
    message: str
    path: str = "$"


# --- entry points --------------------------------------------------------------------------------------------------


def json_refusal(data: bytes, annotation: Annotation, exc: BaseException, *, part: str = "") -> Refusal:
    """Why ``data`` did not decode as ``annotation`` (``exc``: what the decoder raised).

    A text that is not well-formed JSON is refused for that, whatever its types; a well-formed one for the value that
    does not fit. ``part``: ``data`` is a part of a larger body (e.g. ``"node"``): offsets are said to be of it.
    """
    if not data.strip(b" \t\r\n"):
        return Refusal(EMPTY_BODY)
    if isinstance(exc, msgspec.ValidationError):
        try:  # is it well-formed? msgspec's own skipping, which builds nothing, answers before the slower scan below
            msgspec.json.decode(data, type=msgspec.Raw)
        except msgspec.DecodeError:
            pass
        except RecursionError:
            return Refusal(_too_deep(data, scan(data), part))
        else:
            return value_refusal(_Json(data), annotation, exc)
    result = scan(data)
    if result.problem is not None:
        return Refusal(syntax_message(data, result.problem, part))
    if isinstance(exc, RecursionError):
        return Refusal(_too_deep(data, result, part))
    return Refusal("malformed JSON")  # msgspec refused what the scan accepts: say no more than we know


def document_refusal(document: object, annotation: Annotation, exc: msgspec.ValidationError) -> Refusal:
    """Why ``msgspec.convert(document, annotation)`` refused ``document`` (decoded YAML or JSON: Python builtins)."""
    return value_refusal(_Py(document), annotation, exc)


def yaml_location(exc: yaml.YAMLError) -> str:
    """`` at line L, column C`` of a YAML error that knows where it is (PyYAML's own sentence stays out)."""
    mark = getattr(exc, "problem_mark", None) or getattr(exc, "context_mark", None)
    if isinstance(mark, yaml.Mark):
        return f" at line {mark.line + 1}, column {mark.column + 1}"
    return ""


def syntax_message(data: bytes, problem: SyntaxProblem, part: str = "") -> str:
    where = _where(data, problem.at, part)
    if problem.kind == "empty":
        return EMPTY_BODY
    if problem.kind == "utf8":
        return f"invalid UTF-8 at {where}"
    if problem.kind == "truncated":
        ends = f"byte {problem.at} of the {part}" if part else f"byte {problem.at}"
        return f"truncated JSON: it ends at {ends}, inside an unfinished {problem.detail}"
    if problem.kind == "trailing":
        return f"trailing data after the JSON value at {where}"
    return f"malformed JSON at {where}: {problem.detail}"


def _too_deep(data: bytes, result: Scan, part: str) -> str:
    where = _where(data, result.deepest_at, part)
    return f"JSON nested too deeply: {result.depth} levels of arrays and objects, the deepest opening at {where}"


def _where(data: bytes, at: int, part: str) -> str:
    if part:
        return f"byte {at} of the {part}"
    line, column = line_and_column(data, at)
    return f"byte {at} (line {line}, column {column})"


# --- a value that does not fit its type ----------------------------------------------------------------------------


def value_refusal(document: _View, annotation: Annotation, exc: msgspec.ValidationError) -> Refusal:
    own = exc.__cause__
    if isinstance(own, ValueError | TypeError) and not isinstance(own, msgspec.MsgspecError):
        # raised by one of our types' __post_init__ checks, in our words; msgspec adds only the path
        return Refusal(str(own), _reported_path(exc))
    reported = _reported_path(exc)
    annotation, view, path = _walk(annotation, document, reported)
    return Refusal(_misfit(annotation, view), path)


def _reported_path(exc: msgspec.ValidationError) -> str:
    match = _PATH_SUFFIX.search(str(exc))
    return match.group("path") if match else "$"


def _walk(annotation: Annotation, view: _View | None, reported: str) -> tuple[Annotation, _View | None, str]:
    """The type and value at the ``reported`` path, and the path with any map key msgspec hid (``[...]``) named."""
    path = "$"
    rest = reported[1:]
    for segment in _SEGMENT.finditer(rest):
        if view is None:
            return annotation, None, path + rest[segment.start() :]
        field, index = segment.group("field"), segment.group("index")
        if field is not None:
            struct = _choice(annotation, view, "object")
            fields = {f.encode_name: f for f in msgspec.structs.fields(struct)} if _is_struct(struct) else {}
            if field not in fields:
                return annotation, None, path + rest[segment.start() :]
            annotation, view, path = fields[field].type, view.member(field), f"{path}.{field}"
        elif index is not None:
            sequence = _choice(annotation, view, "array")
            annotation, view, path = _item_type(sequence), view.item(int(index)), f"{path}[{index}]"
        else:
            annotation = _value_type(_choice(annotation, view, "object"))
            key, view = _first_misfit(view, annotation)
            path = f"{path}.{key}" if key is not None else f"{path}[...]"
    return annotation, view, path


def _first_misfit(view: _View, annotation: Annotation) -> tuple[str | None, _View | None]:
    """A map's first entry (in the document's order, as msgspec reads them) whose value does not fit ``annotation``."""
    for key, value in view.members():
        if not value.fits(annotation):
            return key, value
    return None, None


def _misfit(annotation: Annotation, view: _View | None) -> str:
    expected = _expected(annotation)
    if view is None:
        return f"not {expected}"
    kind = view.kind()
    fitting = [m for m in _members(annotation) if kind in _accepts(m)]
    if not fitting:
        return f"expected {expected}, got {_got(view, kind, annotation)}"
    for member in fitting:
        base = _unannotated(member)
        if _is_struct(base):
            problem = _struct_problem(base, view)
            if problem:
                return problem
        elif base is int and kind == "integer":
            bounds = _bounds(member)
            value = view.integer()
            if bounds and value is not None and not _within(value, bounds):
                return f"expected {_expected(member)}, got {view.text()}"
        elif _origin(base) is typing.Literal or (isinstance(base, type) and issubclass(base, enum.Enum)):
            return f"expected {expected}, got {_quoted(view.text())}"
        elif base is float and kind in ("integer", "number") and not view.finite():
            return f"number out of range: {view.text()}"
    return f"not {expected}"


def _struct_problem(struct: type[msgspec.Struct], view: _View) -> str:
    keys = [key for key, _ in view.members()]
    present = set(keys)
    fields = msgspec.structs.fields(struct)
    for field in fields:
        if field.required and field.encode_name not in present:
            return f"missing required field `{field.encode_name}`"
    if struct.__struct_config__.forbid_unknown_fields:
        known = {f.encode_name for f in fields}
        for key in keys:
            if key not in known:
                return f"unknown field `{_shorten(key)}`"
    return ""


# --- our types, read -----------------------------------------------------------------------------------------------


def _members(annotation: Annotation) -> list[Annotation]:
    """The alternatives of a union (``X | None``), each still with its Annotated constraints."""
    base = _unannotated(annotation)
    if _origin(base) in (typing.Union, types.UnionType):
        return [m for arg in typing.get_args(base) for m in _members(arg)]
    return [annotation]


def _origin(annotation: Annotation) -> Any:
    """``list`` of ``list[str]``, ``Literal`` of ``Literal["a"]``, ...; None for a plain class."""
    return typing.get_origin(annotation)


def _unannotated(annotation: Annotation) -> Annotation:
    while _origin(annotation) is typing.Annotated:
        annotation = typing.get_args(annotation)[0]
    return annotation


def _is_struct(annotation: Annotation) -> bool:
    return isinstance(annotation, type) and issubclass(annotation, msgspec.Struct)


def _accepts(member: Annotation) -> frozenset[str]:
    """The kinds of JSON value (see ``_View.kind``) a member of a type takes."""
    base = _unannotated(member)
    origin = _origin(base) or base
    if base in (Any, object, msgspec.Raw):
        return frozenset(("object", "array", "string", "integer", "number", "boolean", "null"))
    if _is_struct(base) or origin in (dict, Mapping):
        return frozenset(("object",))
    if origin in (list, tuple, set, frozenset, Sequence):
        return frozenset(("array",))
    if base is bool:
        return frozenset(("boolean",))
    if base is int:
        return frozenset(("integer",))
    if base is float:
        return frozenset(("integer", "number"))
    if base is str or origin is typing.Literal or (isinstance(base, type) and issubclass(base, enum.Enum)):
        return frozenset(("string",))
    if base in (None, type(None)):
        return frozenset(("null",))
    return frozenset()


def _expected(annotation: Annotation) -> str:
    names = list(dict.fromkeys(_expected_member(m) for m in _members(annotation)))
    return " or ".join(names)


def _expected_member(member: Annotation) -> str:
    base = _unannotated(member)
    origin = _origin(base) or base
    if base in (Any, object, msgspec.Raw):
        return "any JSON value"
    if _is_struct(base) or origin in (dict, Mapping):
        return "an object"
    if origin in (list, tuple, set, frozenset, Sequence):
        return "an array"
    if base is bool:
        return "true or false"
    if base is int:
        return "an integer" + _range(_bounds(member))
    if base is float:
        return "a number"
    if base is str:
        return "a string"
    if origin is typing.Literal:
        return "one of " + ", ".join(_quoted(str(v)) for v in typing.get_args(base))
    if isinstance(base, type) and issubclass(base, enum.Enum):
        return "one of " + ", ".join(_quoted(str(v.value)) for v in base)
    if base in (None, type(None)):
        return "null"
    return f"a {getattr(base, '__name__', base)}"


def _bounds(member: Annotation) -> dict[str, int]:
    bounds: dict[str, int] = {}
    if _origin(member) is typing.Annotated:
        for meta in typing.get_args(member)[1:]:
            if isinstance(meta, msgspec.Meta):
                bounds.update({k: getattr(meta, k) for k in ("ge", "gt", "le", "lt") if getattr(meta, k) is not None})
    return bounds


def _range(bounds: Mapping[str, int]) -> str:
    low = bounds["ge"] if "ge" in bounds else bounds["gt"] + 1 if "gt" in bounds else None
    high = bounds["le"] if "le" in bounds else bounds["lt"] - 1 if "lt" in bounds else None
    if low is not None and high is not None:
        return f" from {low} to {high}"
    if low is not None:
        return f" of at least {low}"
    return f" of at most {high}" if high is not None else ""


def _within(value: int, bounds: Mapping[str, int]) -> bool:
    return (
        value >= bounds.get("ge", value)
        and value > bounds.get("gt", value - 1)
        and value <= bounds.get("le", value)
        and value < bounds.get("lt", value + 1)
    )


def _choice(annotation: Annotation, view: _View, kind: str) -> Annotation:
    """The member of a union a value of ``kind`` was decoded as (``X | None`` holding an object: ``X``)."""
    fitting = [m for m in _members(annotation) if kind in _accepts(m)]
    return _unannotated(fitting[0]) if fitting else annotation


def _item_type(annotation: Annotation) -> Annotation:
    args = typing.get_args(annotation)
    return args[0] if args else Any


def _value_type(annotation: Annotation) -> Annotation:
    args = typing.get_args(annotation)
    return args[1] if len(args) == 2 else Any


def _got(view: _View, kind: str, annotation: Annotation) -> str:
    if kind in ("integer", "number"):
        numeric = any(_unannotated(m) in (int, float) for m in _members(annotation))
        return _shorten(view.text()) if numeric else "a number"
    return {
        "object": "an object",
        "array": "an array",
        "string": "a string",
        "boolean": "a boolean",
        "null": "null",
    }.get(kind) or f"a {view.type_name()}"


def _quoted(text: str) -> str:
    return "'" + _shorten(text) + "'"


def _shorten(text: str) -> str:
    return text if len(text) <= _SHOWN_LENGTH else text[: _SHOWN_LENGTH - 1] + "…"


# --- documents, read ------------------------------------------------------------------------------------------------


class _View:
    """A value of a document, as far as describing a misfit needs it."""

    def kind(self) -> str:
        raise NotImplementedError

    def member(self, key: str) -> _View | None:
        return dict(self.members()).get(key)

    def members(self) -> list[tuple[str, _View]]:
        raise NotImplementedError

    def item(self, index: int) -> _View | None:
        raise NotImplementedError

    def text(self) -> str:
        """A number as written, or a string's value."""
        raise NotImplementedError

    def integer(self) -> int | None:
        text = self.text()
        return int(text) if len(text) <= 400 else None  # a longer one is past any bound our types set

    def finite(self) -> bool:
        try:
            return float(self.text()) not in (float("inf"), float("-inf"))
        except (OverflowError, ValueError):
            return False

    def fits(self, annotation: Annotation) -> bool:
        raise NotImplementedError

    def type_name(self) -> str:
        return self.kind()


class _Json(_View):
    """A JSON value as its bytes: each level is split only as far as the path goes (``msgspec.Raw``)."""

    def __init__(self, raw: bytes) -> None:
        self.raw = raw.strip(b" \t\r\n")

    def kind(self) -> str:
        first = self.raw[:1]
        if first == b"{":
            return "object"
        if first == b"[":
            return "array"
        if first == b'"':
            return "string"
        if first in (b"t", b"f"):
            return "boolean"
        if first == b"n":
            return "null"
        return "number" if any(c in self.raw for c in b".eE") else "integer"

    def members(self) -> list[tuple[str, _View]]:
        try:
            entries = msgspec.json.decode(self.raw, type=dict[str, msgspec.Raw])
        except (msgspec.MsgspecError, RecursionError):
            return []
        return [(key, _Json(bytes(value))) for key, value in entries.items()]

    def item(self, index: int) -> _View | None:
        try:
            items = msgspec.json.decode(self.raw, type=list[msgspec.Raw])
        except (msgspec.MsgspecError, RecursionError):
            return None
        return _Json(bytes(items[index])) if index < len(items) else None

    def text(self) -> str:
        if self.raw[:1] == b'"':
            try:
                return msgspec.json.decode(self.raw, type=str)
            except msgspec.MsgspecError:
                return self.raw.decode("utf-8", "replace")
        return self.raw.decode("ascii", "replace")

    def fits(self, annotation: Annotation) -> bool:
        try:
            msgspec.json.decode(self.raw, type=annotation)
        except (msgspec.MsgspecError, RecursionError):
            return False
        return True


class _Py(_View):
    """A value of a decoded document (YAML or JSON loaded as Python builtins)."""

    def __init__(self, value: object) -> None:
        self.value = value

    def kind(self) -> str:
        value = self.value
        if isinstance(value, Mapping):
            return "object"
        if isinstance(value, list | tuple):
            return "array"
        if isinstance(value, str):
            return "string"
        if isinstance(value, bool):
            return "boolean"
        if isinstance(value, int):
            return "integer"
        if isinstance(value, float):
            return "number"
        return "null" if value is None else "other"

    def members(self) -> list[tuple[str, _View]]:
        value = self.value
        return [(str(k), _Py(v)) for k, v in value.items()] if isinstance(value, Mapping) else []

    def item(self, index: int) -> _View | None:
        value = self.value
        if isinstance(value, list | tuple) and index < len(value):
            return _Py(value[index])
        return None

    def text(self) -> str:
        return str(self.value)

    def integer(self) -> int | None:
        return self.value if isinstance(self.value, int) else None

    def fits(self, annotation: Annotation) -> bool:
        try:
            msgspec.convert(self.value, annotation)
        except (msgspec.MsgspecError, RecursionError):
            return False
        return True

    def type_name(self) -> str:
        return type(self.value).__name__
