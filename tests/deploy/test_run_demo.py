"""``make run``'s script (scripts/run-demo.sh) keeps its promise with an operator's own profiles file."""

from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import time
import urllib.request
from pathlib import Path

import pytest

from tests.support.live_server import read_until, start_script
from tests.support.paths import REPO
from tests.support.processes import free_port

SERVING_WITHIN_SECONDS = 120.0


def test_make_run_fills_the_history_through_the_operators_own_profiles_and_keeps_serving(
    tmp_path: Path, runtime_venv: Path
) -> None:
    config = tmp_path / "mine.yaml"
    mine = "- name: mine\n  plugins:\n    score: {enabled: [{name: NetworkTraffic, weight: 2}]}\n"
    config.write_text(f"profiles:\n{mine}- name: batch\n", encoding="utf-8")
    (tmp_path / "prom").mkdir()
    port = free_port()
    env = {
        **os.environ,
        "PORT": str(port),
        "DEMO_NODES": "6",
        "DEMO_PODS": "6",
        "SCHEDLENS_CONFIG": str(config),
        "DATABASE_URL": f"sqlite:///{tmp_path / 'db.sqlite3'}",
        "SCHEDLENS_SPOOL_DIR": str(tmp_path / "spool"),
        "SCHEDLENS_CLUSTER_FILE": str(tmp_path / "cluster.json"),
        "PROMETHEUS_MULTIPROC_DIR": str(tmp_path / "prom"),
        "SCHEDLENS_VAR_ROOT": str(tmp_path / "var"),  # its own state directories and var/current
        "VENV": str(runtime_venv),  # the runtime set alone, as make run installs it
    }
    process = start_script("run-demo.sh", env)
    try:
        output = read_until(process, "Ctrl-C stops it.", time.monotonic() + SERVING_WITHIN_SECONDS)
        assert "filling demo history through profile mine: 6 pods, names" in output
        assert "filling demo history through profile batch: 2 pods, nodes" in output
        assert "leaving 3 pods waiting for a node, through profile mine" in output
        # mine filters nothing: only the pods kube-scheduler's own filters refuse are left (the first and third are
        # GPU pods our filter would have to refuse)
        assert re.search(r"left 1 pod waiting for a node: \S+/\S+", output), output
        assert "failed" not in output
        assert "(profiles: mine batch)" in output
        assert process.poll() is None, "the script keeps serving"
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/readyz", timeout=5) as response:
            assert response.status == 200
    finally:
        os.killpg(process.pid, signal.SIGTERM)
        process.wait(timeout=30)


@pytest.mark.parametrize("script", ["run-demo.sh", "serve.sh"])
def test_a_port_already_served_is_named_instead_of_answering_for_another_server(tmp_path: Path, script: str) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        env = {
            **os.environ,
            "PORT": str(port),
            "HOST": "127.0.0.1",
            "SCHEDLENS_VAR_ROOT": str(tmp_path / "var"),
            "VENV": str(REPO / ".venv"),
        }
        done = subprocess.run(
            ["bash", str(REPO / "scripts" / script)], cwd=REPO, env=env, capture_output=True, text=True, timeout=120
        )
    assert done.returncode == 1
    assert f"port {port} is already in use" in done.stderr
    assert not (tmp_path / "var").exists(), "nothing was started or written"
