"""zstd compressors and decompressors, one per thread and level, reused across calls.

zstandard's objects are not thread-safe (the web threads and the ingester compress at once), and building one per
call costs more than compressing a small record.
"""

from __future__ import annotations

import threading

import zstandard

_local = threading.local()


def compressor(level: int) -> zstandard.ZstdCompressor:
    """This thread's compressor at ``level``."""
    compressors: dict[int, zstandard.ZstdCompressor] | None = getattr(_local, "compressors", None)
    if compressors is None:
        compressors = _local.compressors = {}
    found = compressors.get(level)
    if found is None:
        found = compressors[level] = zstandard.ZstdCompressor(level=level)
    return found


def decompressor() -> zstandard.ZstdDecompressor:
    """This thread's decompressor (any level reads back)."""
    found: zstandard.ZstdDecompressor | None = getattr(_local, "decompressor", None)
    if found is None:
        found = _local.decompressor = zstandard.ZstdDecompressor()
    return found
