"""The local durable outbox for verb records.

A verb appends its record here (tens of microseconds: a SQLite insert in WAL mode, no fsync per call) and
answers; an ingester moves records into the database in batches. A database outage therefore loses
nothing and slows no verb: records wait here until the database is back.

SQLite rather than flat files because it gives crash-consistent appends from several gunicorn workers on
the same host and an atomic "delete what was ingested" for free.

Two more things live here, both so that no record is ever lost *silently*:

- **Answer confirmation.** A record is appended *before* its answer is written (a crash after answering must
  not lose the record of an answer kube-scheduler acted on). So a crash between the two leaves a record of an
  answer kube-scheduler never received. The view appends with ``answered = 0`` and sets it to 1 once the last
  byte was handed to the server (:meth:`Spool.confirm`); the ingester stores a record still unconfirmed after
  a grace period as a failed call ("answer not confirmed"). Rows written without confirmation (older spools,
  callers that cannot confirm) default to ``answered = 1``.
- **Rejected records.** A record the database refuses for its content (never for an outage) would otherwise
  block every record behind it forever. The ingester moves it to the ``rejected`` table with the reason,
  logs it and counts it (``schedlens_spool_rejected_records_total``); it stays in the spool file for an
  operator to inspect.
- **Bind intents.** A bind through the API server is written to the ``bind_intents`` table before the request
  (:meth:`Spool.intend`), and removed in the transaction that appends the bind's record (``append(settles=…)``). An
  intent left alone (the process died in between) is never read by the ingester: a restarted replica reconciles it
  against the pod and appends the outcome (:meth:`Spool.settle_intent`,
  ``scheduler_core.extender.record.bind_intents``).
"""

from __future__ import annotations

import contextlib
import fcntl
import logging
import os
import sqlite3
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import NamedTuple

from prometheus_client import Counter

log = logging.getLogger(__name__)

_SCHEMA = (
    "CREATE TABLE IF NOT EXISTS events ("
    "id INTEGER PRIMARY KEY AUTOINCREMENT, data BLOB NOT NULL, answered INTEGER NOT NULL DEFAULT 1)",
    "CREATE TABLE IF NOT EXISTS rejected ("
    "id INTEGER PRIMARY KEY, data BLOB NOT NULL, error TEXT NOT NULL, rejected_at REAL NOT NULL)",
    # Written only after a failed append, by the checkpoint thread: would an append of that size fit again?
    "CREATE TABLE IF NOT EXISTS write_probe (id INTEGER PRIMARY KEY, data BLOB NOT NULL)",
    # Binds in flight: written before the API server is asked, removed with the bind's record (see above).
    "CREATE TABLE IF NOT EXISTS bind_intents (id INTEGER PRIMARY KEY AUTOINCREMENT, data BLOB NOT NULL)",
    # The profile versions this host's processes loaded
    # (scheduler_core.extender.scoring.profile_versions.ProfileVersionNote), once each; ``stored`` once the ingester has
    # them in the database.
    "CREATE TABLE IF NOT EXISTS profile_versions ("
    "digest TEXT NOT NULL, server TEXT NOT NULL, data BLOB NOT NULL, stored INTEGER NOT NULL DEFAULT 0, "
    "PRIMARY KEY (digest, server))",
)

SPOOL_APPEND_FAILURES = Counter(
    "schedlens_spool_append_failures",
    "Verb records that could not be appended to the spool (disk full, unwritable): an alarm.",
    ["verb", "policy"],
)
SPOOL_REJECTED = Counter(
    "schedlens_spool_rejected_records",
    "Spooled records the database refused for their content, set aside in the spool's rejected table.",
)


class SpoolRow(NamedTuple):
    id: int
    data: bytes
    answered: bool


CHECKPOINT_SECONDS = 1.0
"""How often each process copies the spool's WAL into its database file (off the verbs' path)."""
BUSY_SECONDS = 10.0
"""How long a spool statement waits for another connection's lock before it fails."""
WAL_RESTART_FRAMES = 16_384
"""WAL length (frames of one 4 KiB page: 64 MiB) past which the checkpoint thread starts the WAL over."""
RESTART_BUSY_MS = 50
"""How long a RESTART checkpoint may wait for its locks (appends wait behind it meanwhile)."""
_PROBE_MARGIN_BYTES = 16384
"""Added to a failed record's size by the write probe: an append also writes pages the probe does not."""
_checkpointer_lock = threading.Lock()


class SpoolUnavailableError(OSError):
    """The spool cannot be opened for writing: the process must not serve verbs it cannot record."""


class Spool:
    def __init__(self, directory: Path | str) -> None:
        self.directory = Path(directory)
        self.path = self.directory / "spool.sqlite3"
        self._local = threading.local()
        self._checkpointer_pid: int | None = None
        self.checkpoint_thread: threading.Thread | None = None
        self._closed = threading.Event()
        # Readiness (dashboard/health.py): set by a failed append, cleared by a successful one or by the checkpoint
        # thread's write probe (an unready replica gets no verbs through its Service, so none would clear it).
        self.last_append_error: str | None = None
        self._failed_append_bytes = 0
        try:
            self.directory.mkdir(parents=True, exist_ok=True)
            # Processes starting together (gunicorn's workers) set a new spool up one at a time: switching it to WAL
            # takes it whole, and SQLite answers "database is locked" at once, without waiting, to all but one.
            with open(self.directory / "setup.lock", "a+b") as setup:
                fcntl.flock(setup, fcntl.LOCK_EX)  # released when the file closes
                with contextlib.closing(self._connect()) as conn:
                    conn.execute("PRAGMA journal_mode=WAL")
                    for statement in _SCHEMA:
                        conn.execute(statement)
                    columns = {row[1] for row in conn.execute("PRAGMA table_info(events)")}
                    if "answered" not in columns:  # a spool written before confirmations: rows count as answered
                        conn.execute("ALTER TABLE events ADD COLUMN answered INTEGER NOT NULL DEFAULT 1")
        except (OSError, sqlite3.Error) as exc:
            raise SpoolUnavailableError(
                f"the spool at {self.path} cannot be written (SCHEDLENS_SPOOL_DIR): {exc}"
            ) from exc

    def _connect(self) -> sqlite3.Connection:
        conn = sqlite3.connect(self.path, timeout=BUSY_SECONDS, isolation_level=None, check_same_thread=False)
        # NORMAL in WAL mode survives a process crash (the data is in the OS page cache and the WAL);
        # only a power loss can drop the last commits, and an fsync per verb would cost milliseconds.
        conn.execute("PRAGMA synchronous=NORMAL")
        # No connection checkpoints on commit: SQLite's automatic checkpoint (every 1000 WAL pages, i.e. every few
        # dozen 1000-node records) would copy the WAL into the database inside a verb's append, a stall that
        # shows at the p99. A background thread per process checkpoints instead (``_checkpoint_forever``).
        conn.execute("PRAGMA wal_autocheckpoint=0")
        # Each gunicorn thread keeps its own connection, and SQLite's default page cache (2 MiB) fills up with
        # pages that appends never read again. Appends and the ingester's sequential reads need only a few pages.
        conn.execute("PRAGMA cache_size=-256")
        # When the WAL starts over (``checkpoint``), its file is cut back to this size rather than kept at its peak.
        conn.execute(f"PRAGMA journal_size_limit={WAL_RESTART_FRAMES * 4096}")
        return conn

    def _checkpoint_forever(self) -> None:
        while not self._closed.wait(CHECKPOINT_SECONDS):
            if not self.path.exists():  # the spool was removed (a test's temporary directory): nothing to keep
                log.info("spool %s is gone; its checkpoint thread stops", self.path)
                break
            try:
                self.checkpoint()
            except sqlite3.Error:
                log.warning("spool checkpoint failed; will retry", exc_info=True)
            if self.last_append_error is not None:
                self.probe_write()
        self._close_connection()

    def checkpoint(self) -> int:
        """Copy the WAL into the database file; start the WAL over once it is long. Returns its length in frames.

        A PASSIVE checkpoint never blocks appends (SQLite releases the GIL while it copies). But under a steady
        stream of appends it never catches up with the last frame, and SQLite starts the WAL over only when one
        has: the WAL grew by gigabytes in a 10-minute run, and with it the WAL index that every process maps (the
        memory growth the soak showed). So past :data:`WAL_RESTART_FRAMES` a RESTART checkpoint follows: it copies
        the few frames appended since the PASSIVE pass and lets the next append start at the WAL's beginning.
        Appends wait for it (it holds the write lock); a short busy timeout bounds that wait, and a RESTART that
        cannot get its locks in time is tried again on the next round.
        """
        conn = self._conn()
        _, frames, _ = conn.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchone()
        if frames >= WAL_RESTART_FRAMES:
            conn.execute(f"PRAGMA busy_timeout={RESTART_BUSY_MS}")
            try:
                conn.execute("PRAGMA wal_checkpoint(RESTART)").fetchone()
            finally:
                conn.execute(f"PRAGMA busy_timeout={int(BUSY_SECONDS * 1000)}")  # back to the connection's own
        return int(frames)

    def probe_write(self) -> bool:
        """After a failed append: write (then delete) a blob of that record's size; success clears the failure."""
        failed = self.last_append_error
        conn = self._conn()
        try:
            size = self._failed_append_bytes + _PROBE_MARGIN_BYTES
            conn.execute("INSERT OR REPLACE INTO write_probe (id, data) VALUES (1, zeroblob(?))", (size,))
            conn.execute("DELETE FROM write_probe")
        except sqlite3.Error:
            return False
        if self.last_append_error is failed:  # not failed again meanwhile
            self.last_append_error = None
        return True

    def close(self) -> None:
        """Stop this spool's checkpoint thread and close the calling thread's connection (appends still work)."""
        self._closed.set()
        thread = self.checkpoint_thread
        if thread is not None and thread is not threading.current_thread():
            thread.join(timeout=10.0)
        self._close_connection()

    def _close_connection(self) -> None:
        conn: sqlite3.Connection | None = getattr(self._local, "conn", None)
        self._local.conn = None
        if conn is not None:
            conn.close()

    def _start_checkpointer(self) -> None:
        with _checkpointer_lock:
            if self._checkpointer_pid != os.getpid():  # once per process (gunicorn forks after import)
                self._checkpointer_pid = os.getpid()
                self.checkpoint_thread = threading.Thread(
                    target=self._checkpoint_forever, name="schedlens-spool-checkpoint", daemon=True
                )
                self.checkpoint_thread.start()

    def _conn(self) -> sqlite3.Connection:
        conn: sqlite3.Connection | None = getattr(self._local, "conn", None)
        if conn is None or getattr(self._local, "pid", None) != os.getpid():
            conn = self._connect()
            self._local.conn = conn
            self._local.pid = os.getpid()
        return conn

    def append(self, data: bytes, *, confirm_later: bool = False, settles: int | None = None) -> int:
        """Append one record; returns its row id. ``confirm_later``: the answer is not written yet (see above).
        ``settles``: the bind intent this record is the outcome of, removed in the same transaction."""
        if self._checkpointer_pid != os.getpid():
            self._start_checkpointer()
        answered = 0 if confirm_later else 1
        try:
            if settles is None:
                cursor = self._conn().execute("INSERT INTO events (data, answered) VALUES (?, ?)", (data, answered))
            else:  # a bind's record: its intent goes in the same transaction (one commit, as without)
                with self._transaction() as conn:
                    cursor = conn.execute("INSERT INTO events (data, answered) VALUES (?, ?)", (data, answered))
                    conn.execute("DELETE FROM bind_intents WHERE id = ?", (settles,))
        except Exception as exc:
            self._failed(len(data), exc)
            raise
        if self.last_append_error is not None:
            self.last_append_error = None
        return int(cursor.lastrowid or 0)

    def _failed(self, size: int, exc: Exception) -> None:
        self._failed_append_bytes = size
        self.last_append_error = f"{type(exc).__name__}: {exc}"

    @contextlib.contextmanager
    def _transaction(self) -> Iterator[sqlite3.Connection]:
        conn = self._conn()
        conn.execute("BEGIN IMMEDIATE")
        try:
            yield conn
            conn.execute("COMMIT")
        except BaseException:
            if conn.in_transaction:  # SQLite may have rolled back already (a full disk)
                conn.execute("ROLLBACK")
            raise

    def intend(self, data: bytes) -> int:
        """Record a bind intent (``scheduler_core.extender.record.structs.BindIntent``'s bytes) before its API call;
        returns its id, which the bind's record settles (``append(settles=…)``). A failure counts as a failed append
        (readiness)."""
        if self._checkpointer_pid != os.getpid():
            self._start_checkpointer()
        try:
            cursor = self._conn().execute("INSERT INTO bind_intents (data) VALUES (?)", (data,))
        except Exception as exc:
            self._failed(len(data), exc)
            raise
        return int(cursor.lastrowid or 0)

    def intents(self) -> list[tuple[int, bytes]]:
        """Every bind intent without an outcome, oldest first: (id, bytes). The table holds only binds in flight."""
        cursor = self._conn().execute("SELECT id, data FROM bind_intents ORDER BY id")
        return [(int(row[0]), bytes(row[1])) for row in cursor.fetchall()]

    def settle_intent(self, intent_id: int, data: bytes) -> bool:
        """Append ``data`` (the reconciled outcome of intent ``intent_id``, as answered) and remove the intent, in one
        transaction; False, appending nothing, when the intent is gone already (another process settled it)."""
        with self._transaction() as conn:
            settled = conn.execute("DELETE FROM bind_intents WHERE id = ?", (intent_id,)).rowcount == 1
            if settled:
                conn.execute("INSERT INTO events (data, answered) VALUES (?, 1)", (data,))
        return settled

    def note_profile_versions(self, notes: list[tuple[str, str, bytes]]) -> None:
        """Keep each (digest, server, note) not kept yet: a process loading its profiles, never a verb."""
        with self._transaction() as conn:
            conn.executemany("INSERT OR IGNORE INTO profile_versions (digest, server, data) VALUES (?, ?, ?)", notes)

    def profile_versions_unstored(self) -> list[tuple[str, str, bytes]]:
        """The noted versions the database does not have yet: (digest, server, note)."""
        cursor = self._conn().execute("SELECT digest, server, data FROM profile_versions WHERE stored = 0")
        return [(str(row[0]), str(row[1]), bytes(row[2])) for row in cursor.fetchall()]

    def profile_versions_stored(self, keys: list[tuple[str, str]]) -> None:
        self._conn().executemany("UPDATE profile_versions SET stored = 1 WHERE digest = ? AND server = ?", keys)

    def confirm(self, row_id: int) -> None:
        """The answer of the call recorded in ``row_id`` was handed to the server in full."""
        self._conn().execute("UPDATE events SET answered = 1 WHERE id = ?", (row_id,))

    def read_batch(self, limit: int) -> list[tuple[int, bytes]]:
        return [(row.id, row.data) for row in self.read_rows(limit)]

    def read_rows(self, limit: int, *, after: int = 0) -> list[SpoolRow]:
        """The oldest ``limit`` records with an id above ``after``."""
        cursor = self._conn().execute(
            "SELECT id, data, answered FROM events WHERE id > ? ORDER BY id LIMIT ?", (after, limit)
        )
        return [SpoolRow(int(row[0]), bytes(row[1]), bool(row[2])) for row in cursor.fetchall()]

    def delete_through(self, last_id: int) -> None:
        self._conn().execute("DELETE FROM events WHERE id <= ?", (last_id,))

    def reject(self, row_id: int, error: str) -> None:
        """Move one record the database refused out of the way, keeping it and the reason (see above)."""
        # _transaction: after SQLite rolled back on its own (a full disk), a ROLLBACK would fail and hide why.
        with self._transaction() as conn:
            conn.execute(
                "INSERT OR REPLACE INTO rejected (id, data, error, rejected_at) "
                "SELECT id, data, ?, ? FROM events WHERE id = ?",
                (error, time.time(), row_id),
            )
            conn.execute("DELETE FROM events WHERE id = ?", (row_id,))
        SPOOL_REJECTED.inc()

    def rejected(self) -> list[tuple[int, bytes, str]]:
        cursor = self._conn().execute("SELECT id, data, error FROM rejected ORDER BY id")
        return [(int(row[0]), bytes(row[1]), str(row[2])) for row in cursor.fetchall()]

    def depth(self) -> int:
        """How many records wait, counted: reads every row, so for tests and tools, not for probes or scrapes."""
        return int(self._conn().execute("SELECT count(*) FROM events").fetchone()[0])

    def backlog(self) -> int:
        """About how many records wait, from the oldest and newest ids (two index lookups, where ``depth`` counts
        them all): records leave in id order, so only the rare record set aside leaves a gap. What the probes, the
        scrapes and the health page show, and what the ingester sizes its work by."""
        # Two subqueries: SQLite looks min() and max() up in the index only when each is a query's sole aggregate;
        # "SELECT min(id), max(id)" scans the whole table.
        oldest, newest = (
            self._conn().execute("SELECT (SELECT min(id) FROM events), (SELECT max(id) FROM events)").fetchone()
        )
        return 0 if oldest is None else int(newest) - int(oldest) + 1

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
