"""SQLite, the database ``make run`` and a first ``make serve`` use, written by several processes at once (the
ingester, ``run_replays`` with the outcome runner, the dashboard's sessions). Its deferred transactions fail at once
with "database is locked" when two of them read, then write; each must take the write lock when it begins and wait
for it instead. Run in a subprocess with exactly the environment given, as such a process reads its settings."""

from __future__ import annotations

import os
from pathlib import Path

from tests.support.processes import django_says

PROBE = """
import sqlite3
from django.db import connection, transaction
path = connection.settings_dict["NAME"]
with connection.cursor() as cursor:
    cursor.execute("CREATE TABLE IF NOT EXISTS probe (v integer)")
    cursor.execute("PRAGMA busy_timeout")
    print("busy_timeout", cursor.fetchone()[0])
    cursor.execute("PRAGMA journal_mode")
    print("journal_mode", cursor.fetchone()[0])
other = sqlite3.connect(path, timeout=0, isolation_level=None)
with transaction.atomic():
    with connection.cursor() as cursor:
        cursor.execute("SELECT count(*) FROM probe")  # a transaction that reads first, as the ingester's do
    try:
        other.execute("BEGIN IMMEDIATE")
        print("another writer began while a transaction was open")
        other.execute("ROLLBACK")
    except sqlite3.OperationalError as error:
        print("another writer:", error)
    with connection.cursor() as cursor:
        cursor.execute("INSERT INTO probe VALUES (1)")
other.execute("BEGIN IMMEDIATE")
other.execute("INSERT INTO probe VALUES (2)")
other.execute("COMMIT")
print("rows", other.execute("SELECT count(*) FROM probe").fetchone()[0])
"""


def test_a_transaction_holds_sqlites_write_lock_from_its_start_and_other_writers_wait_for_it(tmp_path: Path) -> None:
    env = {
        **{k: os.environ[k] for k in ("PATH", "HOME", "LANG") if k in os.environ},
        "DATABASE_URL": f"sqlite:///{tmp_path / 'db.sqlite3'}",
        "SCHEDLENS_VAR_ROOT": str(tmp_path / "var"),
    }
    lines = django_says(env, PROBE).splitlines()
    # A writer that finds the lock taken waits for it, longer than SQLite's 5 s a loaded machine can exceed
    timeout_ms = int(next(line for line in lines if line.startswith("busy_timeout")).split()[1])
    assert timeout_ms >= 20_000
    # Readers (the dashboard) go on while the ingester writes
    assert "journal_mode wal" in lines
    # The transaction took the write lock when it began, before it wrote: nobody can slip a write in between its
    # read and its write, which is what fails at once in a deferred transaction
    assert "another writer: database is locked" in lines, lines
    assert "rows 2" in lines
