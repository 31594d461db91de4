"""The local durable outbox for verb records.

A verb appends its record here (tens of microseconds: a SQLite insert in WAL mode, no fsync per call) and
answers; an ingester moves records into the database in batches. A database outage therefore loses
nothing and slows no verb: records wait here until the database is back.

SQLite rather than flat files because it gives crash-consistent appends from several gunicorn workers on
the same host and an atomic "delete what was ingested" for free.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import sqlite3
import threading
from collections.abc import Iterator
from pathlib import Path

_SCHEMA = "CREATE TABLE IF NOT EXISTS events (id INTEGER PRIMARY KEY AUTOINCREMENT, data BLOB NOT NULL)"


class Spool:
    def __init__(self, directory: Path | str) -> None:
        self.directory = Path(directory)
        self.directory.mkdir(parents=True, exist_ok=True)
        self.path = self.directory / "spool.sqlite3"
        self._local = threading.local()
        with contextlib.closing(self._connect()) as conn:
            conn.execute("PRAGMA journal_mode=WAL")
            conn.execute(_SCHEMA)

    def _connect(self) -> sqlite3.Connection:
        conn = sqlite3.connect(self.path, timeout=10.0, isolation_level=None, check_same_thread=False)
        # NORMAL in WAL mode survives a process crash (the data is in the OS page cache and the WAL);
        # only a power loss can drop the last commits, and an fsync per verb would cost milliseconds.
        conn.execute("PRAGMA synchronous=NORMAL")
        return conn

    def _conn(self) -> sqlite3.Connection:
        conn: sqlite3.Connection | None = getattr(self._local, "conn", None)
        if conn is None or getattr(self._local, "pid", None) != os.getpid():
            conn = self._connect()
            self._local.conn = conn
            self._local.pid = os.getpid()
        return conn

    def append(self, data: bytes) -> None:
        self._conn().execute("INSERT INTO events (data) VALUES (?)", (data,))

    def read_batch(self, limit: int) -> list[tuple[int, bytes]]:
        cursor = self._conn().execute("SELECT id, data FROM events ORDER BY id LIMIT ?", (limit,))
        return [(int(row[0]), bytes(row[1])) for row in cursor.fetchall()]

    def delete_through(self, last_id: int) -> None:
        self._conn().execute("DELETE FROM events WHERE id <= ?", (last_id,))

    def depth(self) -> int:
        return int(self._conn().execute("SELECT count(*) FROM events").fetchone()[0])

    @contextlib.contextmanager
    def ingest_lease(self) -> Iterator[bool]:
        """One ingester per spool at a time (across processes); yields False when another holds it."""
        with open(self.directory / "ingest.lock", "a+b") as handle:
            try:
                fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                yield False
                return
            try:
                yield True
            finally:
                fcntl.flock(handle, fcntl.LOCK_UN)
