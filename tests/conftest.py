"""Shared fixtures: the protocol fixtures beside the repo, and a traffic store tests fill by hand."""

from __future__ import annotations

import faulthandler
import os
import sys
import tempfile
import time
from collections.abc import Iterator, Mapping
from pathlib import Path

import pytest

from scheduler_core.herd import InMemoryBindLog, RecentBinds
from scheduler_core.plugins.base import TrafficView
from scheduler_core.profiles import Profile
from scheduler_core.traffic import TrafficQuery, TrafficSnapshot
from scheduler_core.traffic.store import TrafficStore

REPO = Path(__file__).resolve().parent.parent
# CI clones the repo with the project's shared/ folder beside it; SCHEDLENS_SHARED_DIR points elsewhere.
SHARED = Path(os.environ.get("SCHEDLENS_SHARED_DIR", REPO.parent / "shared"))
CAPTURES = SHARED / "fixtures" / "kube-scheduler-v1.28.7"
EXAMPLES = SHARED / "fixtures" / "extender-examples"
# A `make run` or `make serve` of the checkout names its state directory in var/current, which manage.py follows
# (config.server_env): the tests' commands and scripts use a root of their own, never the developer's servers.
TESTS_VAR_ROOT = Path(tempfile.mkdtemp(prefix="schedlens-tests-var-"))
os.environ["SCHEDLENS_VAR_ROOT"] = str(TESTS_VAR_ROOT)


@pytest.fixture(autouse=True)
def _no_server_env_shared_between_tests() -> Iterator[None]:
    """A test that starts ``make run`` or ``make serve`` gives it a root of its own: one left in the shared root
    would fill the variables of every later test's ``manage.py``."""
    yield
    pointer = TESTS_VAR_ROOT / "current"
    if pointer.exists():
        pointer.unlink()
        pytest.fail("a script wrote var/current in the tests' shared root: give it SCHEDLENS_VAR_ROOT=tmp_path")


EXIT_DEADLINE_SECONDS = 300
"""After the last test: time for the process to exit before every thread's stack is printed and it is ended."""


def pytest_unconfigure(config: pytest.Config) -> None:
    # A thread or child process that never ends would keep the run alive until CI kills it, silently: name it
    # instead (and fail, exit status 1), whatever the tests' outcome.
    faulthandler.dump_traceback_later(EXIT_DEADLINE_SECONDS, exit=True, file=sys.__stderr__)


def traffic_store(
    bytes_by_node: Mapping[str, float], *, age: float = 0.0, query: TrafficQuery | None = None
) -> TrafficStore:
    store = TrafficStore()
    store.put(TrafficSnapshot(query or TrafficQuery(), dict(bytes_by_node), time.time() - age, "test"))
    return store


class Inputs:
    """A verb's ``CycleInputs`` over a fixed traffic view and an in-memory bind log (the herd estimate on, as in
    production); counts how often each call reads."""

    def __init__(self, traffic: TrafficView, binds: InMemoryBindLog) -> None:
        self.traffic = traffic
        self.binds = binds
        self.reads = 0

    def for_call(self, profile: Profile, now: float) -> tuple[TrafficView, RecentBinds]:
        self.reads += 1
        return self.traffic, self.binds.recent_binds(now)

    def record_bind(self, *, node: str, pod: str, at: float) -> None:
        self.binds.record_bind(node=node, pod=pod, at=at)


@pytest.fixture
def captures() -> Path:
    assert CAPTURES.is_dir(), f"the kube-scheduler captures are expected at {CAPTURES}"
    return CAPTURES


def ingest_everything(spool, *, deadline_seconds: float = 10.0) -> int:
    """Drain a spool into the database, waiting for answers still being confirmed (bounded, not a sleep-for-timing).

    A verb's record is held back until the server confirms the answer was written; that confirmation lands just
    after the client has read the response, so an ingest right after the last call can find it not yet there.
    """
    from dashboard.ingest.spool_ingest import spool_ingest

    moved = spool_ingest(spool=spool)
    deadline = time.monotonic() + deadline_seconds
    while spool.depth() and time.monotonic() < deadline:
        time.sleep(0.01)
        moved += spool_ingest(spool=spool)
    assert spool.depth() == 0, "records still unconfirmed after the deadline"
    return moved
