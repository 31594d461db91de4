"""Processes opening a new spool at the same moment (gunicorn's workers booting together) all get it.

Switching a new SQLite database to WAL needs it alone, and SQLite answers "database is locked" at once, without
its busy wait, to every other process trying at the same moment: a gunicorn worker then failed to boot and took
the server down with it (seen starting the 5000-node benchmark server).
"""

from __future__ import annotations

import multiprocessing
from collections.abc import Iterator
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from dashboard.spool import Spool

PROCESSES = 6
ROUNDS = 8


def _open_together(directory: str, barrier: Any) -> str:
    barrier.wait()  # all at once, as workers forked by one master
    try:
        Spool(directory).append(b"booted")
    except Exception as exc:
        return repr(exc)
    return ""


@pytest.fixture(scope="module")
def workers() -> Iterator[tuple[ProcessPoolExecutor, Any]]:
    spawn = multiprocessing.get_context("spawn")
    with spawn.Manager() as manager, ProcessPoolExecutor(PROCESSES, mp_context=spawn) as pool:
        yield pool, manager


def test_workers_opening_a_new_spool_together_all_open_it(
    tmp_path: Path, workers: tuple[ProcessPoolExecutor, Any]
) -> None:
    pool, manager = workers
    for round_ in range(ROUNDS):
        directory = str(tmp_path / f"spool-{round_}")
        barrier = manager.Barrier(PROCESSES)
        errors = [e for e in pool.map(_open_together, [directory] * PROCESSES, [barrier] * PROCESSES) if e]
        assert errors == [], f"round {round_}: {errors[0]}"
        assert Spool(directory).depth() == PROCESSES
