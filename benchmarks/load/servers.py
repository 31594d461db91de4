"""The schedlens processes the benchmark measures: gunicorn as deployed, and the floor server beside it.

The floor: an empty Django view behind the production middleware, and an empty WSGI app, under the same gunicorn
configuration (``benchmarks/load/floor_urls.py``).
"""

from __future__ import annotations

import http.client
import os
import sys
import time
from pathlib import Path

import msgspec

from benchmarks.common import REPO
from benchmarks.load.client import JSON_HEADERS
from scheduler_core.cli.simulator import SyntheticCluster


def start_server(workdir: Path, cluster: SyntheticCluster, *, database_url: str, ingest: bool, floor: bool = False):
    from tests.support.live_server import LiveServer

    env = server_env(workdir, cluster, database_url=database_url, ingest=ingest)
    if floor:
        return _FloorServer(env)
    return LiveServer(env, workers=int(os.environ.get("WEB_WORKERS", "2")))


def server_env(workdir: Path, cluster: SyntheticCluster, *, database_url: str, ingest: bool) -> dict[str, str]:
    """The environment of the benchmark's schedlens processes: demo profiles, the simulator's cluster, a spool."""
    workdir.mkdir(parents=True, exist_ok=True)
    cluster_file = workdir / "cluster.json"
    if not cluster_file.exists():
        cluster_file.write_bytes(msgspec.json.encode(cluster.document()))
    env = {
        "DATABASE_URL": database_url,
        "SCHEDLENS_SPOOL_DIR": str(workdir / "spool"),
        "SCHEDLENS_INGEST_IN_PROCESS": "true" if ingest else "false",
        "SCHEDLENS_BIND_MODE": "simulated",
        "SCHEDLENS_CONFIG": str(REPO / "deploy" / "profiles.demo.yaml"),
        "SCHEDLENS_CLUSTER_FILE": str(cluster_file),
        "SCHEDLENS_CLUSTER_SOURCE": "file",
        "PROMETHEUS_URL": "",
        "SCHEDLENS_TRAFFIC_BACKEND": "inprocess",
    }
    return env


class _FloorServer:
    """gunicorn with the production configuration serving only the empty view (``benchmarks/load/floor_urls.py``)."""

    def __init__(self, env: dict[str, str]) -> None:
        import subprocess

        from tests.support.processes import free_port

        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        full = {**os.environ, **env, "PORT": str(self.port), "DJANGO_SETTINGS_MODULE": "benchmarks.load.floor_settings"}
        gunicorn = Path(sys.executable).with_name("gunicorn")
        self.process = subprocess.Popen(
            [str(gunicorn), "--config", "python:config.gunicorn_conf", "benchmarks.load.floor_wsgi:application"],
            cwd=REPO,
            env=full,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            try:
                conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=1)
                conn.request("POST", "/floor/", body=b"{}", headers=JSON_HEADERS)
                if conn.getresponse().status == 200:
                    conn.close()
                    return
            except (ConnectionError, OSError):
                time.sleep(0.05)  # polling for start-up, bounded by the deadline
        self.stop()
        raise RuntimeError("the floor server did not start")

    def stop(self) -> None:
        self.process.terminate()
        self.process.wait(timeout=10)
