"""``make serve`` (scripts/serve.sh): schedlens for the cluster of a kubeconfig, from a checkout, stopped together."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import REPO
from tests.fake_kube_api import FakeKubeAPI, write_kubeconfig
from tests.live_server import free_port, read_until, start_script

SERVING_WITHIN_SECONDS = 120.0


@pytest.fixture
def api() -> Iterator[FakeKubeAPI]:
    with FakeKubeAPI() as server:
        for name in ("node-1", "node-2", "node-3"):
            server.put_node(name)
        server.add_pod("web-1", namespace="shop", uid="uid-1", scheduler_name="schedlens-scheduler")
        yield server


def serve_env(tmp_path: Path, **extra: str) -> dict[str, str]:
    return {
        **os.environ,
        "PORT": str(free_port()),
        "HOST": "127.0.0.1",
        "ADVERTISE_ADDRESS": "127.0.0.1",
        "DATABASE_URL": f"sqlite:///{tmp_path / 'db.sqlite3'}",
        "SCHEDLENS_SPOOL_DIR": str(tmp_path / "spool"),
        "SCHEDLENS_CONFIG": "",
        "PROMETHEUS_MULTIPROC_DIR": str(tmp_path / "prom"),
        "SCHEDLENS_VAR_ROOT": str(tmp_path / "var"),  # its own state directories and var/current
        "VENV": str(Path(sys.prefix)),
        **extra,
    }


def post(url: str, body: dict[str, object]) -> dict[str, object]:
    request = urllib.request.Request(
        url, data=json.dumps(body).encode(), headers={"Content-Type": "application/json"}, method="POST"
    )
    with urllib.request.urlopen(request, timeout=10) as response:
        return json.loads(response.read())  # type: ignore[no-any-return]


def test_make_serve_binds_for_real_and_ctrl_c_stops_every_process(api: FakeKubeAPI, tmp_path: Path) -> None:
    env = serve_env(tmp_path, KUBECONFIG=str(write_kubeconfig(api, tmp_path / "kubeconfig")))
    url = f"http://127.0.0.1:{env['PORT']}"
    process = start_script("serve.sh", env)
    try:
        output = read_until(process, "Ctrl-C stops it.", time.monotonic() + SERVING_WITHIN_SECONDS)
        assert f"Kubernetes API server: {api.url}" in output
        assert f"both call urlPrefix {url}/extender/default" in output
        config = (REPO / "var" / "scheduler-config-nodecache.yaml").read_text(encoding="utf-8")
        assert f'urlPrefix: "{url}/extender/default"' in config
        with urllib.request.urlopen(f"{url}/readyz", timeout=5) as response:
            ready = json.loads(response.read())
        assert (ready["cluster"]["synced"], ready["cluster"]["nodes"]["count"]) == (True, 3), "the watching node cache"

        answer = post(
            f"{url}/extender/default/bind",
            {"PodName": "web-1", "PodNamespace": "shop", "PodUID": "uid-1", "Node": "node-2"},
        )
        assert answer == {"Error": ""}
        assert api.pods[("shop", "web-1")]["spec"]["nodeName"] == "node-2", "a real Binding reached the API server"
        assert api.list_requests("pods"), "the placement watcher lists the pods of its scheduler"
    finally:
        os.killpg(process.pid, signal.SIGINT)  # Ctrl-C in the terminal: the whole foreground group
        status = process.wait(timeout=60)
    assert status == 130
    with pytest.raises(urllib.error.URLError, match="Connection refused"):
        urllib.request.urlopen(f"{url}/healthz", timeout=2)  # every process stopped, the server too


def test_make_serve_says_plainly_when_there_is_no_kubernetes_configuration(tmp_path: Path) -> None:
    env = serve_env(tmp_path, KUBECONFIG=str(tmp_path / "absent"), HOME=str(tmp_path))
    env.pop("KUBERNETES_SERVICE_HOST", None)
    done = subprocess.run(
        ["bash", str(REPO / "scripts" / "serve.sh")], cwd=REPO, env=env, capture_output=True, text=True, timeout=120
    )
    assert done.returncode != 0
    assert "no Kubernetes configuration found" in done.stderr
