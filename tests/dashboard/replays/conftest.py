"""History replay fixtures: a stretch of history recorded the way production records it (``tests.support.history``),
under the demo profiles; auditors and their clients are ``tests/dashboard/conftest.py``'s."""

from __future__ import annotations

from pathlib import Path

import pytest
from django.core.cache import cache

from dashboard.models import SchedulingCycle
from tests.support.history import PROFILES, History


@pytest.fixture(autouse=True)
def _replay_settings(settings, tmp_path: Path) -> None:
    settings.SCHEDLENS_CONFIG = str(PROFILES)
    settings.SCHEDLENS_SPOOL_DIR = tmp_path / "spool"
    settings.SCHEDLENS_INGEST_IN_PROCESS = False
    settings.SCHEDLENS_REPLAY_RUNNER = "none"
    cache.clear()


@pytest.fixture
def history(db) -> History:
    return History()


@pytest.fixture
def recorded(history: History) -> list[SchedulingCycle]:
    """30 cycles under ``default`` and 10 under ``gpu-aware`` on 80 nodes (shared parts), 6 under ``default`` on 5
    nodes (lists in the body)."""
    cycles = history.record(30)
    cycles += history.record(10, profile="gpu-aware")
    cycles += history.record(6, nodes=history.node_names[:5])
    return cycles
