"""Packed JSON: a large JSON value of a ``jsonb`` column stored compressed inside the same column.

A many-node record repeats the same node names kilobytes apart, further than PostgreSQL's TOAST compression
(pglz, a 4 KB window) looks back, so TOAST leaves most of it. A large value is therefore stored as
``{"$zstd": "<base64 of zstd(JSON)>"}`` in its own column, and :class:`PackedJSONField` gives every reader the
original value back (``call.record_json``, ``.values("record_json")``, the API, exports): nothing outside this
module sees the packed form.

The audit chain hashes what is stored (:func:`stored_form`): a packed value is sealed as its packed text, so the
chain hashes one short string per call instead of walking every number of the record, and an altered packed value
or a value swapped for plain JSON breaks the link like any other change. Values written before packing existed
(plain JSON) are stored, read and hashed as before.

Calls with a per-node record are stored as a binary body instead since migration 0004 (``call_body``); packed JSON
remains for the other calls and for every call recorded before.
"""

from __future__ import annotations

import base64
from typing import Any

import msgspec
import zstandard
from django.db import models

from scheduler_core.extender.record.compression import compressor, decompressor

PACK_KEY = "$zstd"
MIN_PACKED_BYTES = 1024
"""Smaller values stay plain JSON (readable in SQL; compression would gain little)."""
_LEVEL = 3
"""zstd's default level: its higher levels make these records barely smaller and take longer."""


class PackedDict(dict[str, Any]):
    """A JSON object as read or to be written, with its packed text (what the column holds)."""

    stored: str


class PackedList(list[Any]):
    """A JSON array as read or to be written, with its packed text (what the column holds)."""

    stored: str


def _wrap(value: Any, stored: str) -> Any:
    wrapped: PackedDict | PackedList
    if isinstance(value, dict):
        wrapped = PackedDict(value)
    elif isinstance(value, list):
        wrapped = PackedList(value)
    else:
        return value  # a scalar is never large
    wrapped.stored = stored
    return wrapped


def pack(value: Any) -> Any:
    """``value`` marked for packed storage when its JSON is large; otherwise ``value`` itself."""
    if not isinstance(value, dict | list):
        return value
    data = msgspec.json.encode(value)
    if len(data) < MIN_PACKED_BYTES:
        return value
    return _wrap(value, base64.b64encode(compressor(_LEVEL).compress(data)).decode("ascii"))


def unpack(value: Any) -> Any:
    """The original value of what a column holds (packed or plain)."""
    if not (isinstance(value, dict) and len(value) == 1 and isinstance(value.get(PACK_KEY), str)):
        return value
    stored: str = value[PACK_KEY]
    try:
        original = msgspec.json.decode(decompressor().decompress(base64.b64decode(stored, validate=True)))
    except (ValueError, zstandard.ZstdError, msgspec.DecodeError) as exc:
        # Damaged (or tampered with): readers get an empty record saying so; the chain still hashes the text.
        original = {"$unreadable": f"packed value cannot be read: {exc}"}
    return _wrap(original, stored)


def stored_form(value: Any) -> Any:
    """What the column holds for ``value``: the packed object for a packed value, else ``value`` itself."""
    if isinstance(value, PackedDict | PackedList):
        return {PACK_KEY: value.stored}
    return value


class PackedJSONField(models.JSONField):
    """A ``jsonb`` (or JSON text) column whose large values the ingester packs; reads give the original value."""

    def from_db_value(self, value: Any, expression: Any, connection: Any) -> Any:
        return unpack(super().from_db_value(value, expression, connection))

    def get_prep_value(self, value: Any) -> Any:
        return super().get_prep_value(stored_form(value))
