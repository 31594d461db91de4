from __future__ import annotations

import pytest

from dashboard import runtime as runtime_module
from tests.conftest import traffic_store


@pytest.fixture
def runtime(settings, tmp_path, monkeypatch):
    """A fresh per-test runtime: its own spool, the demo binder, and traffic the test controls."""
    settings.SCHEDLENS_SPOOL_DIR = tmp_path / "spool"
    settings.SCHEDLENS_INGEST_IN_PROCESS = False
    settings.SCHEDLENS_BIND_MODE = "simulated"
    settings.SCHEDLENS_CONFIG = ""
    settings.SCHEDLENS_CLUSTER_FILE = ""
    runtime = runtime_module.Runtime()
    quiet = traffic_store({"node-1": 4.0e6, "node-2": 1.0e6, "node-3": 2.0e6})
    runtime.traffic.put(quiet.latest(next(iter(runtime.profiles["default"].traffic_queries()))))
    runtime.extender.traffic = runtime.traffic
    monkeypatch.setattr(runtime_module, "_runtime", runtime)
    yield runtime
    runtime.spool.close()
