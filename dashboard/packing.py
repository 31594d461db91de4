"""Compact storage of the large JSON columns of a verb call (its record and its answer).

A 1000-node cycle is ~180 KB of JSON (per-node names, figures and scores), which PostgreSQL's TOAST
compression (pglz, a 4 KB window) only brings down to ~48 KB: the same node names repeat 12–30 KB apart. The
ingester therefore stores a large value as ``{"$zstd": "<base64 of zstd(JSON)>"}`` inside the same ``jsonb``
column, and :class:`PackedJSONField` gives every reader the original value back (``call.record``,
``.values("record")``, the API, exports): nothing outside this module sees the packed form.

The audit chain hashes what is stored (:func:`stored_form`): a packed value is sealed as its packed text, so
the chain costs one short string per call to compute and to verify instead of walking ~10,000 numbers, and
an altered packed value or a value swapped for plain JSON breaks the link like any other change. Values
written before packing existed (plain JSON) are stored, read and hashed as before.
"""

from __future__ import annotations

import base64
import threading
from typing import Any

import msgspec
import zstandard
from django.db import models

PACK_KEY = "$zstd"
MIN_PACKED_BYTES = 1024
"""Smaller values stay plain JSON (readable in SQL; compression would gain little)."""
_LEVEL = 3
"""zstd's default: ~0.1 ms for a 1000-node record, within a few per cent of its higher levels' size here."""

_local = threading.local()


def _compressor() -> zstandard.ZstdCompressor:
    # zstandard's (de)compressors are not thread-safe; one per thread (the ingester and the web threads).
    compressor: zstandard.ZstdCompressor | None = getattr(_local, "compressor", None)
    if compressor is None:
        compressor = _local.compressor = zstandard.ZstdCompressor(level=_LEVEL)
    return compressor


def _decompressor() -> zstandard.ZstdDecompressor:
    decompressor: zstandard.ZstdDecompressor | None = getattr(_local, "decompressor", None)
    if decompressor is None:
        decompressor = _local.decompressor = zstandard.ZstdDecompressor()
    return decompressor


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
    return _wrap(value, base64.b64encode(_compressor().compress(data)).decode("ascii"))


def unpack(value: Any) -> Any:
    """The original value of what a column holds (packed or plain)."""
    if not (isinstance(value, dict) and len(value) == 1 and isinstance(value.get(PACK_KEY), str)):
        return value
    stored: str = value[PACK_KEY]
    try:
        original = msgspec.json.decode(_decompressor().decompress(base64.b64decode(stored, validate=True)))
    except (ValueError, zstandard.ZstdError, msgspec.DecodeError) as exc:
        # Damaged (or tampered with): readers get an empty record saying so; the chain still hashes the text.
        original = {"$unreadable": f"packed value cannot be read: {exc}"}
    return _wrap(original, stored)


def stored_form(value: Any) -> Any:
    """What the column holds for ``value``: the packed object for a packed value, else ``value`` itself."""
    if isinstance(value, PackedDict | PackedList):
        return {PACK_KEY: value.stored}
    return value


class PackedJSONField(models.JSONField):  # type: ignore[type-arg]
    """A ``jsonb`` (or JSON text) column whose large values the ingester packs; reads give the original value."""

    def from_db_value(self, value: Any, expression: Any, connection: Any) -> Any:
        return unpack(super().from_db_value(value, expression, connection))

    def get_prep_value(self, value: Any) -> Any:
        return super().get_prep_value(stored_form(value))
