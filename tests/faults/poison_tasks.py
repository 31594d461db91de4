"""Tasks only the fault tests load into a worker (``celery worker -I tests.faults.poison_tasks``).

``kill_own_worker`` is the poison message: it notes each delivery in Redis and then SIGKILLs the process running
it, as a task that segfaults or blows the memory limit would. ``note`` is a healthy task, to show the worker still
works afterwards.
"""

from __future__ import annotations

import os
import signal

from celery import shared_task

from dashboard.traffic.clients import worker_client


@shared_task(name="schedlens.test.kill_own_worker")
def kill_own_worker(key: str) -> None:
    worker_client().rpush(key, os.getpid())
    os.kill(os.getpid(), signal.SIGKILL)


@shared_task(name="schedlens.test.note")
def note(key: str, value: str) -> None:
    worker_client().rpush(key, value)


@shared_task(name="schedlens.test.wait_then_note")
def wait_then_note(key: str, gate: str) -> None:
    """Notes its start, waits (up to 60 s) for the test to open ``gate``, notes that it finished."""
    client = worker_client()
    client.rpush(key, "started")
    client.blpop([gate], timeout=60)
    client.rpush(key, "done")
