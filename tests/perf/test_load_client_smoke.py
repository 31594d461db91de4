"""A short run of the benchmark's kube-scheduler-like client (``benchmarks/load.py``) against gunicorn.

The benchmark's figures are only as good as its client: this checks, on a few pods, that each scheduling cycle
is answered, that binds (posted from the client's bind process) all arrive, and that keep-alive holds.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from benchmarks.load_client import BIND_THREADS, Bodies, Scheduler
from benchmarks.load_servers import start_server
from scheduler_core.simulator import make_cluster


@pytest.mark.parametrize("names", [True, False], ids=["NodeNames", "Nodes"])
def test_the_load_client_schedules_binds_and_keeps_its_connections(tmp_path: Path, names: bool) -> None:
    cluster = make_cluster(30)
    bodies = Bodies(cluster)
    server = start_server(tmp_path, cluster, database_url=f"sqlite:///{tmp_path / 'db.sqlite3'}", ingest=False)
    try:
        scheduler = Scheduler(server.url)
        for _ in range(25):
            pod, pod_json = bodies.pod()
            scheduler.schedule(pod, bodies.filter_body(pod_json, names), pod_json, names)
        scheduler.close()
    finally:
        server.stop()
    run = scheduler.run
    assert (run.errors, run.first_error) == (0, "")
    assert run.pods == len(run.filter_ms) == 25
    assert len(run.bind_ms) > 0, "binds were posted and answered"
    assert run.requests == len(run.filter_ms) + len(run.prioritize_ms) + len(run.bind_ms)
    assert run.reconnections == 0
    assert run.connections <= 1 + BIND_THREADS
