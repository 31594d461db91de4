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
import yaml

from tests.support.fake_kube_api import FakeKubeAPI, write_kubeconfig
from tests.support.live_server import read_until, start_script
from tests.support.paths import REPO
from tests.support.processes import django_says, free_port
from tests.support.scheduler_standin import schedule

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
        "PROMETHEUS_URL": "",
        "PROMETHEUS_MULTIPROC_DIR": str(tmp_path / "prom"),
        "SCHEDLENS_VAR_ROOT": str(tmp_path / "var"),  # its own state directories and var/current
        "VENV": str(Path(sys.prefix)),
        **extra,
    }


def test_make_serve_binds_for_real_and_ctrl_c_stops_every_process(api: FakeKubeAPI, tmp_path: Path) -> None:
    kubeconfig = write_kubeconfig(api, tmp_path / "kubeconfig")
    env = serve_env(tmp_path, KUBECONFIG=str(kubeconfig))
    url = f"http://127.0.0.1:{env['PORT']}"
    process = start_script("serve.sh", env)
    try:
        output = read_until(process, "Ctrl-C stops it.", time.monotonic() + SERVING_WITHIN_SECONDS)
        assert f"Kubernetes API server: {api.url}" in output
        written = tmp_path / "var" / "cluster" / "scheduler-config-nodecache.yaml"
        assert f"start kube-scheduler beside it: kube-scheduler --config {written}" in output
        assert f"each calls urlPrefix {url}/extender/default" in output
        assert "traffic: none measured: set PROMETHEUS_URL" in output
        with urllib.request.urlopen(f"{url}/readyz", timeout=5) as response:
            ready = json.loads(response.read())
        assert (ready["cluster"]["synced"], ready["cluster"]["nodes"]["count"]) == (True, 3), "the watching node cache"
        # The ingester is a process of its own, as deployed, and the web workers do not ingest too.
        commands = group_commands(process.pid)
        assert any("manage.py ingest_spool --follow" in command for command in commands.values()), commands
        web = [pid for pid, command in commands.items() if "gunicorn" in command]
        assert web
        assert all(environment(pid).get("SCHEDLENS_INGEST_IN_PROCESS") == "false" for pid in web)

        # The written configuration, read as kube-scheduler reads it, sends a plain pod (no extended resource) to
        # schedlens, which records it and binds it for real.
        config = yaml.safe_load(written.read_text(encoding="utf-8"))
        assert config["clientConnection"]["kubeconfig"] == str(kubeconfig.resolve())
        assert config["leaderElection"] == {"leaderElect": False}, "one scheduler started by hand: no lease to hold"
        pod = api.pods[("shop", "web-1")]
        assert "resources" not in pod["spec"]["containers"][0]
        outcome = schedule(config, pod, ["node-1", "node-2", "node-3"], bind=lambda node: None)
        assert [call.rsplit("/", 1)[1] for call in outcome.calls] == ["filter", "prioritize", "bind"]
        assert outcome.bound_by == "extender"
        assert api.pods[("shop", "web-1")]["spec"]["nodeName"] == outcome.node, "a real Binding reached the API"
        recorded = (
            "from dashboard.models import VerbCall\nprint(sorted(VerbCall.objects.values_list('verb', flat=True)))"
        )
        deadline = time.monotonic() + 30
        while (verbs := django_says(env, recorded)) != "['bind', 'filter', 'prioritize']":
            assert time.monotonic() < deadline, verbs
            time.sleep(0.2)  # the ingester stores the records soon after
        assert api.list_requests("pods"), "the placement watcher lists the pods of its scheduler"
        # No Prometheus: the demo's invented traffic does not follow; the record says why nothing was measured.
        traffic_note = (
            "from dashboard.models import VerbCall\nfrom dashboard.selectors.cycles import call_get_read\n"
            "read = call_get_read(call=VerbCall.objects.get(verb='prioritize'))\n"
            "(p,) = [p for p in read.recorded.prioritize.plugins if p.name == 'NetworkTraffic']\n"
            "print(p.note, '|', any(p.raw))"
        )
        assert django_says(env, traffic_note) == (
            "no traffic data yet; no Prometheus configured (PROMETHEUS_URL, or the plugin's address): "
            "traffic is not measured | False"
        )
    finally:
        os.killpg(process.pid, signal.SIGINT)  # Ctrl-C in the terminal: the whole foreground group
        status = process.wait(timeout=60)
    assert status == 130
    with pytest.raises(urllib.error.URLError, match="Connection refused"):
        urllib.request.urlopen(f"{url}/healthz", timeout=2)  # every process stopped, the server too
    deadline = time.monotonic() + 30
    while left := group_commands(process.pid):  # the ingester and the watcher too
        assert time.monotonic() < deadline, left
        time.sleep(0.2)


def group_commands(group: int) -> dict[int, str]:
    """The command line of each live process of process group ``group`` (the script's), by pid."""
    found = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
            command = (stat.parent / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue  # gone meanwhile
        if int(fields[2]) == group and fields[0] != "Z":  # state, ppid, pgrp; a zombie has stopped already
            found[int(stat.parent.name)] = command
    return found


def environment(pid: int) -> dict[str, str]:
    raw = Path(f"/proc/{pid}/environ").read_bytes()
    return dict(entry.decode(errors="replace").partition("=")[::2] for entry in raw.split(b"\0") if entry)


def test_make_serve_says_plainly_when_there_is_no_kubernetes_configuration(tmp_path: Path) -> None:
    env = serve_env(tmp_path, KUBECONFIG=str(tmp_path / "absent"), HOME=str(tmp_path))
    env.pop("KUBERNETES_SERVICE_HOST", None)
    done = subprocess.run(
        ["bash", str(REPO / "scripts" / "serve.sh")], cwd=REPO, env=env, capture_output=True, text=True, timeout=120
    )
    assert done.returncode != 0
    assert "no Kubernetes configuration found" in done.stderr
