"""An operator's first steps, as a new user takes them in one shell: ``make run``, a replay from the same shell,
Ctrl-C, then ``make serve`` for a cluster. Nothing of the demo follows: not its login, its history nor its chain."""

from __future__ import annotations

import http.cookiejar
import json
import os
import re
import signal
import subprocess
import sys
import time
import urllib.parse
import urllib.request
from pathlib import Path

from scheduler_core.extender.scoring.profiles import load_profiles
from tests.support.fake_kube_api import FakeKubeAPI, write_kubeconfig
from tests.support.live_server import read_until, start_script
from tests.support.paths import REPO
from tests.support.processes import django_says, free_port

SERVING_WITHIN_SECONDS = 180.0
SERVER_VARIABLES = ("DATABASE_URL", "REDIS_URL", "PROMETHEUS_URL", "KUBECONFIG", "PROMETHEUS_MULTIPROC_DIR")


def new_users_shell(var_root: Path) -> dict[str, str]:
    """A shell with none of schedlens's variables (the test run's own DATABASE_URL and REDIS_URL included): only the
    checkout's state directory is the test's own (``SCHEDLENS_VAR_ROOT``, instead of the checkout's ``var/``)."""
    shell = {k: v for k, v in os.environ.items() if not k.startswith("SCHEDLENS_") and k not in SERVER_VARIABLES}
    return {**shell, "SCHEDLENS_VAR_ROOT": str(var_root), "VENV": str(Path(sys.prefix))}


def manage(shell: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "manage.py", *args], cwd=REPO, env=shell, capture_output=True, text=True, timeout=300
    )


def stop(process: subprocess.Popen[str]) -> None:
    os.killpg(process.pid, signal.SIGINT)  # Ctrl-C
    process.wait(timeout=60)


def log_in(url: str, username: str, password: str) -> str:
    """Submit the dashboard's login form as a browser does; the path the answer ends on."""
    opener = urllib.request.build_opener(urllib.request.HTTPCookieProcessor(http.cookiejar.CookieJar()))
    with opener.open(f"{url}/accounts/login/", timeout=10) as response:
        form = response.read().decode()
    token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', form)
    assert token is not None
    body = urllib.parse.urlencode(
        {"csrfmiddlewaretoken": token.group(1), "username": username, "password": password}
    ).encode()
    request = urllib.request.Request(f"{url}/accounts/login/", data=body, headers={"Referer": f"{url}/accounts/login/"})
    with opener.open(request, timeout=10) as response:
        return urllib.parse.urlparse(response.url).path


def test_make_run_then_make_serve_leaves_the_demo_behind(tmp_path: Path) -> None:
    shell = new_users_shell(tmp_path / "var")
    demo_port = free_port()
    # No pods left waiting: their refused attempts would be cycles of the history beside the 12 placed pods.
    demo_env = {"PORT": str(demo_port), "DEMO_NODES": "6", "DEMO_PODS": "12", "DEMO_WAITING": "0"}
    demo = start_script("run-demo.sh", {**shell, **demo_env})
    try:
        output = read_until(demo, "Ctrl-C stops it.", time.monotonic() + SERVING_WITHIN_SECONDS)
        assert "filling demo history through profile default: 12 pods, names" in output
        assert log_in(f"http://127.0.0.1:{demo_port}", "demo", "demo") == "/", "the demo's own login works there"

        # From the same shell, beside the demo: the replay reads the demo's history under the demo's profiles.
        replayed = manage(
            shell, "replay_history", "--profile", "default", "--profile-recorded", "default", "-o", "json"
        )
        assert replayed.returncode == 0, replayed.stderr
        assert "the settings of the server make run started" in replayed.stderr
        assert "profiles from " + str(REPO / "deploy" / "profiles.demo.yaml") in replayed.stderr
        report = json.loads(replayed.stdout)["report"]
        assert report["cycles_replayed"] == 12
        assert report["decisions_changed"]["k"] == 0
        assert report["recorded_preferred_differs"] == 0, "the baseline reproduces every recorded decision"
        demo_profile = load_profiles((REPO / "deploy" / "profiles.demo.yaml").read_text())["default"]
        assert report["candidate"]["version"] == demo_profile.version()
        assert report["candidate"]["profile_file"] == str(REPO / "deploy" / "profiles.demo.yaml")
    finally:
        stop(demo)

    with FakeKubeAPI() as api:
        for name in ("node-1", "node-2"):
            api.put_node(name)
        api.add_pod("web-1", namespace="shop", uid="uid-1", scheduler_name="schedlens-scheduler")
        serve_port = free_port()
        url = f"http://127.0.0.1:{serve_port}"
        serving = {
            **shell,
            "PORT": str(serve_port),
            "HOST": "127.0.0.1",
            "ADVERTISE_ADDRESS": "127.0.0.1",
            "KUBECONFIG": str(write_kubeconfig(api, tmp_path / "kubeconfig")),
        }
        served = start_script("serve.sh", serving)
        try:
            read_until(served, "Ctrl-C stops it.", time.monotonic() + SERVING_WITHIN_SECONDS)
            assert log_in(url, "demo", "demo") == "/accounts/login/", "demo / demo opens nothing of a real cluster"
            # The same shell now follows the served cluster: its database holds no demo user and no history.
            counts = "from django.contrib.auth.models import User; from dashboard.models import SchedulingCycle\n"
            counts += "print(User.objects.count(), SchedulingCycle.objects.count())"
            assert django_says(shell, counts, timeout=300) == "0 0"

            bind = {"PodName": "web-1", "PodNamespace": "shop", "PodUID": "uid-1", "Node": "node-2"}
            request = urllib.request.Request(
                f"{url}/extender/default/bind",
                data=json.dumps(bind).encode(),
                headers={"Content-Type": "application/json"},
                method="POST",
            )
            with urllib.request.urlopen(request, timeout=10) as response:
                assert json.loads(response.read()) == {"Error": ""}
            first = (
                "from dashboard.models import ChainOrigin, VerbCall\n"
                "calls = list(VerbCall.objects.order_by('id').values_list('verb', 'cycle__pod_name'))\n"
                "print(ChainOrigin.objects.get().binds if calls else '', calls)"
            )
            deadline = time.monotonic() + 30
            while (found := django_says(shell, first, timeout=300)) == "[]" and time.monotonic() < deadline:
                time.sleep(0.2)  # the ingester is a thread of the web server: the record reaches the database soon
            assert found == "kubernetes [('bind', 'web-1')]", "the chain starts at the real cluster's first call"
        finally:
            stop(served)
