"""Shared parts (body format 2): a filter's per-node lists, stored once for every filter call that has them.

Every pod of a kind is filtered against the same candidates, fails on the same nodes for the same reasons, and
sees the same traffic figures until the next snapshot. Those lists are most of a filter's body, and PostgreSQL's
cost of writing a row grows with its bytes, so a filter body names them by digest instead of holding them: a
:class:`SharedFilterPart`, stored as zstd of its MessagePack (``SharedPart`` rows), addressed by the SHA-256 of
those bytes. The body names the digest, the audit chain seals the body, and every reader checks the digest
(:func:`shared_part_decode`): a part cannot change unnoticed either.

This module only encodes and decodes. Where the stored bytes come from is the caller's to say (a
:data:`SharedPartLookup`): the database (``dashboard.models.shared_part_data``), or the part the ingester is about to
store with the body.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from typing import NamedTuple

import msgspec

from dashboard.storage.columns import Column
from scheduler_core.extender.record.compression import compressor, decompressor


class SharedFilterPart(msgspec.Struct, array_like=True, omit_defaults=True, gc=False):
    """What a filter call shares with many others, stored once: its candidates, its failures and the snapshot's
    traffic figures for them, the same for every pod of a kind between two traffic snapshots. Most of a many-node
    filter's body, and most of its writing cost."""

    nodes: bytes
    """JSON of the record's ``nodes``."""
    failures: bytes = b""
    """JSON of its ``failures``; empty: none failed."""
    traffic: Column | None = None
    answer: bytes = b""
    """The answer after its ``NodeNames`` (the failed nodes and their reasons) as the first filter with these lists
    was answered, which the others' answers repeat; a body whose answer differs keeps its own."""


class SharedPartBytes(NamedTuple):
    """A shared part as stored: its digest (the SHA-256 of ``data``, hex) and its bytes (zstd of MessagePack)."""

    digest: str
    data: bytes


MIN_SHARED_BYTES = 1024
"""A filter's lists smaller than this (JSON and columns) stay in its body: a row of their own would cost more."""
SharedPartLookup = Callable[[str], "bytes | None"]
"""Digest of a shared part → its stored bytes, or None when it is not stored."""
_LEVEL = 3
"""zstd's default level: a part is compressed once per distinct set of lists, not once per call."""
_msgpack = msgspec.msgpack.Encoder()
_decoder = msgspec.msgpack.Decoder(SharedFilterPart)


def shared_part_encode(shared: SharedFilterPart) -> SharedPartBytes | None:
    """``shared`` as stored, or None when its lists are small enough to stay in the body (:data:`MIN_SHARED_BYTES`)."""
    size = len(shared.nodes) + len(shared.failures) + (len(_msgpack.encode(shared.traffic)) if shared.traffic else 0)
    if size < MIN_SHARED_BYTES:
        return None
    data = compressor(_LEVEL).compress(_msgpack.encode(shared))
    return SharedPartBytes(hashlib.sha256(data).hexdigest(), data)


def shared_part_decode(digest: str, shared_parts: SharedPartLookup) -> SharedFilterPart:
    """The shared part ``digest`` a body names, read through ``shared_parts`` and checked against its digest."""
    data = shared_parts(digest)
    if data is None:
        raise ValueError(f"the shared part {digest} this record refers to is not stored")
    if hashlib.sha256(data).hexdigest() != digest:
        raise ValueError(f"the shared part {digest} this record refers to does not match its digest (altered)")
    return _decoder.decode(decompressor().decompress(data))
