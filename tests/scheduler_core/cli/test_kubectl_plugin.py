"""``kubectl schedlens``: the installed console script against the real app served by gunicorn.

Cycles are recorded in the test database (committed: ``transaction=True``) the way production records them; the
plugin reads them back over HTTP with an auditor's token, as an operator's terminal would.
"""

from __future__ import annotations

import json
import os
import secrets
import subprocess
import sys
import urllib.request
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
import yaml
from django.db import connection

from dashboard.audit.auditors import auditor_token_issue
from dashboard.models import VerbCall
from tests.support.fake_kube_api import FakeKubeAPI
from tests.support.kube_scheduler import NODES, PROFILES, T0
from tests.support.live_server import LiveServer
from tests.support.pending_pods import EXPECTED, NAMESPACE, leave_waiting_pods, watch_into_the_list
from tests.support.processes import database_url, free_port

pytestmark = pytest.mark.django_db(transaction=True)

PLUGIN = Path(sys.prefix) / "bin" / "kubectl-schedlens"
SUMMARY = (
    "Placed on node-2: lowest traffic (1.0 MB in 5 min), 5.0 points ahead of node-3 (answers 10 against 9 on the"
    " 0..10 scale). 1 node excluded: node-5: receive rate above 125.0 MB/s (130.0 MB/s over the last 5 min)."
)


@pytest.fixture
def server(settings, tmp_path: Path) -> Iterator[LiveServer]:
    profiles = tmp_path / "server-profiles.yaml"
    profiles.write_text(PROFILES, encoding="utf-8")
    env = {
        "DATABASE_URL": database_url(settings.DATABASES["default"]),
        "DJANGO_SECRET_KEY": secrets.token_urlsafe(50),
        "DJANGO_DEBUG": "false",
        "SCHEDLENS_CONFIG": str(profiles),
        "SCHEDLENS_CLUSTER_SOURCE": "none",
        "SCHEDLENS_BIND_MODE": "simulated",
        "SCHEDLENS_INGEST_IN_PROCESS": "false",
        "SCHEDLENS_SPOOL_DIR": str(tmp_path / "spool"),
    }
    live = LiveServer(env)
    yield live
    live.stop()


@pytest.fixture
def token(db) -> str:
    return auditor_token_issue(username="kim-kubectl").key


def kubectl_schedlens(
    *args: str, server: LiveServer | None = None, token: str = "", env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """Run the installed plugin with a clean environment: no connection settings but the ones given."""
    clean = {k: v for k, v in os.environ.items() if not k.startswith("SCHEDLENS_")}
    clean["HOME"] = clean["XDG_CONFIG_HOME"] = str(Path(os.environ.get("TMPDIR", "/tmp")) / "no-such-schedlens-home")
    flags = [*(["--server", server.url] if server else []), *(["--token", token] if token else [])]
    return subprocess.run(
        [str(PLUGIN), *args, *flags], capture_output=True, text=True, timeout=60, env={**clean, **(env or {})}
    )


def api_json(server: LiveServer, token: str, path: str) -> object:
    request = urllib.request.Request(f"{server.url}{path}", headers={"Authorization": f"Token {token}"})
    with urllib.request.urlopen(request, timeout=10) as response:
        return json.loads(response.read())


def test_the_plugin_is_installed_with_the_package():
    assert PLUGIN.is_file(), f"{PLUGIN}: reinstall the package (pip install -e '.[test]')"
    result = subprocess.run([str(PLUGIN), "--help"], capture_output=True, text=True, timeout=30, check=True)
    for line in ("0  ok", "1  verify", "2  usage", "3  not found", "4  unauthorized", "5  server unreachable"):
        assert line in result.stdout


def test_why_prints_the_summary_and_a_row_per_candidate_node(server, token, kube_scheduler):
    kube_scheduler.schedule(at=T0, name="web-1")

    result = kubectl_schedlens("why", "web-1", "-n", "shop", server=server, token=token)

    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert SUMMARY in lines
    header = next(i for i, line in enumerate(lines) if line.startswith("NODE"))
    assert lines[header].split() == ["NODE", "PASSED", "FINAL", "ANSWER", "TRAFFIC", "REASON/ARITHMETIC"]
    rows = {line.split()[0]: line for line in lines[header + 1 :]}
    assert set(rows) == set(NODES)
    assert rows["node-2"].split()[:7] == ["node-2", "*", "yes", "75.0", "10", "1.0", "MB"], "chosen, first"
    assert lines[header + 1].startswith("node-2 *")
    assert "10 × (75 − 0) / (75 − 0) = 10 → 10" in rows["node-2"]
    assert rows["node-5"].split()[1] == "no"
    assert "receive rate above 125.0 MB/s" in rows["node-5"]
    version = kube_scheduler.profiles["default"].version()
    (line,) = [line for line in lines if line.startswith("profile version: ")]
    assert line.startswith(f"profile version: {version}, first served 2026-03-01T12:00:00"), line
    assert line.endswith(f"/api/v1/profile-versions/{version}/)")


def test_why_as_json_or_yaml_is_the_apis_answer_as_is(server, token, kube_scheduler):
    kube_scheduler.schedule(at=T0, name="web-1")
    expected = api_json(server, token, "/api/v1/why/?namespace=shop&name=web-1")

    as_json = kubectl_schedlens("why", "web-1", "-n", "shop", "-o", "json", server=server, token=token)
    as_yaml = kubectl_schedlens("why", "web-1", "--namespace=shop", "-o", "yaml", server=server, token=token)

    assert as_json.returncode == 0, as_json.stderr
    assert json.loads(as_json.stdout) == expected
    assert yaml.safe_load(as_yaml.stdout) == expected


def test_pending_and_why_of_a_waiting_pod_show_the_apis_figures(server, token, kube_scheduler):
    kube_scheduler.schedule(at=T0, name="web-1")  # placed: why still explains its cycle
    with FakeKubeAPI() as api:
        leave_waiting_pods(api)
        watch_into_the_list(api)
    listed = api_json(server, token, f"/api/v1/pending/?namespace={NAMESPACE}")
    busy = api_json(server, token, f"/api/v1/pending/{NAMESPACE}/web-busy/")

    pending = kubectl_schedlens("pending", "-n", NAMESPACE, server=server, token=token)
    assert pending.returncode == 0, pending.stderr
    lines = pending.stdout.splitlines()
    assert lines[0].split() == ["NAMESPACE", "POD", "WAITING", "ATTEMPTS", "LAST-ATTEMPT", "HELD", "BACK", "BY"]
    rows = {line.split()[1]: line for line in lines[1:]}
    assert {name: row.endswith(EXPECTED[name]) for name, row in rows.items()} == dict.fromkeys(EXPECTED, True)
    assert [p["summary"] for p in listed["results"]] == [
        rows[p["name"]][-len(p["summary"]) :] for p in listed["results"]
    ]

    why = kubectl_schedlens("why", "web-busy", "-n", NAMESPACE, server=server, token=token)
    assert why.returncode == 0, why.stderr
    text = why.stdout
    assert f"held back by: {EXPECTED['web-busy']}" in text
    [attempt] = busy["recent_attempts"]
    reason_rows = [line.split("   ") for line in text.splitlines() if line.startswith(("5 ", "1 "))]
    assert [[cell.strip() for cell in row if cell.strip()] for row in reason_rows] == [
        ["5", "Insufficient memory", "kube-scheduler", "-", "-"],
        [
            "1",
            "receive rate above 125.0 MB/s",
            "schedlens TrafficThreshold",
            "125.0 MB/s",
            "node-4: 166.7 MB/s over the last 5 min",
        ],
    ]
    assert [r["nodes"] for r in attempt["reasons"]] == [5, 1]
    assert (
        "node-4   TrafficThreshold   receive rate above 125.0 MB/s   166.7 MB/s over the last 5 min   125.0 MB/s"
        in text
    )
    as_json = kubectl_schedlens("why", "web-busy", "-n", NAMESPACE, "-o", "json", server=server, token=token)
    assert {k: v for k, v in json.loads(as_json.stdout).items() if k != "waited_seconds"} == {
        k: v for k, v in busy.items() if k != "waited_seconds"
    }

    placed = kubectl_schedlens("why", "web-1", "-n", "shop", server=server, token=token)
    assert placed.returncode == 0, placed.stderr
    assert SUMMARY in placed.stdout.splitlines()


def test_history_lists_recent_cycles_filtered_by_namespace_node_and_age(server, token, kube_scheduler):
    kube_scheduler.schedule(at=T0, name="web-1")
    kube_scheduler.schedule(at=T0 + timedelta(minutes=1), name="db-1", namespace="data", nodes=["node-1", "node-3"])
    kube_scheduler.schedule(at=datetime.now(UTC) - timedelta(minutes=5), name="web-2")

    everything = kubectl_schedlens("history", server=server, token=token)
    shop = kubectl_schedlens("history", "--namespace", "shop", server=server, token=token)
    on_node_4 = kubectl_schedlens("history", "--node", "node-4", server=server, token=token)
    recent = kubectl_schedlens("history", "--since", "1h", server=server, token=token)
    as_json = kubectl_schedlens("history", "-n", "data", "-o", "json", server=server, token=token)

    for result in (everything, shop, on_node_4, recent, as_json):
        assert result.returncode == 0, result.stderr
    assert everything.stdout.splitlines()[0].split() == [
        "ID", "STARTED", "POD", "PROFILE", "OUTCOME", "CHOSEN", "PREFERRED", "FEASIBLE",
    ]  # fmt: skip
    pods = [line.split()[2] for line in everything.stdout.splitlines()[1:]]
    assert pods == ["shop/web-2", "data/db-1", "shop/web-1"], "newest first"
    assert [line.split()[2] for line in shop.stdout.splitlines()[1:]] == ["shop/web-2", "shop/web-1"]
    assert [line.split()[2] for line in on_node_4.stdout.splitlines()[1:]] == ["shop/web-2", "shop/web-1"]
    assert [line.split()[2] for line in recent.stdout.splitlines()[1:]] == ["shop/web-2"]
    assert json.loads(as_json.stdout) == api_json(server, token, "/api/v1/cycles/?namespace=data&page_size=50")


def test_nodes_lists_each_node_with_its_counts(server, token, kube_scheduler):
    kube_scheduler.schedule(at=T0, name="web-1")

    result = kubectl_schedlens("nodes", server=server, token=token)

    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0].split() == ["NODE", "CONSIDERED", "FILTERED-OUT", "PLACEMENTS", "LAST-SEEN"]
    rows = {line.split()[0]: line.split()[1:4] for line in lines[1:]}
    assert rows["node-2"] == ["1", "0", "1"]
    assert rows["node-5"] == ["1", "1", "0"]
    assert set(rows) == set(NODES)


def test_verify_exits_0_on_an_intact_record_and_1_on_a_broken_one(server, token, kube_scheduler):
    kube_scheduler.schedule(at=T0, name="web-1")

    intact = kubectl_schedlens("verify", server=server, token=token)
    assert (intact.returncode, intact.stdout.split()[0]) == (0, "ok:"), intact.stderr

    victim = VerbCall.objects.order_by("id")[1]
    with connection.cursor() as cursor:
        cursor.execute("UPDATE dashboard_verbcall SET server = 'elsewhere:1' WHERE id = %s", [victim.id])
    broken = kubectl_schedlens("verify", server=server, token=token)
    assert broken.returncode == 1
    assert broken.stdout.startswith(f"broken: first broken call {victim.id}")


def test_errors_exit_with_a_code_scripts_can_use_and_one_line_naming_the_problem(server, token, kube_scheduler):
    kube_scheduler.schedule(at=T0, name="web-1")

    missing = kubectl_schedlens("why", "web-9", "-n", "shop", server=server, token=token)
    assert (missing.returncode, missing.stderr) == (3, "schedlens: no cycle recorded for pod shop/web-9\n")
    assert missing.stdout == ""

    bad_token = kubectl_schedlens("nodes", server=server, token="not-a-token")
    assert bad_token.returncode == 4
    assert bad_token.stderr.startswith("schedlens: unauthorized")

    no_token = kubectl_schedlens("nodes", server=server)
    assert no_token.returncode == 4

    closed = f"http://127.0.0.1:{free_port()}"
    unreachable = kubectl_schedlens("verify", "--server", closed, token=token)
    assert unreachable.returncode == 5
    assert unreachable.stderr == f"schedlens: cannot reach {closed}: the connection was refused\n"

    for usage in (("frobnicate",), ("why",), ("history", "--since", "soon"), ("history", "--limit", "0"), ()):
        result = kubectl_schedlens(*usage, server=server, token=token)
        assert result.returncode == 2, usage
    no_server = kubectl_schedlens("nodes", token=token)
    assert no_server.returncode == 2
    assert no_server.stderr.startswith("schedlens: no server")


def test_the_connection_comes_from_the_environment_or_the_config_file(server, token, kube_scheduler, tmp_path):
    kube_scheduler.schedule(at=T0, name="web-1")
    from_env = kubectl_schedlens(
        "why", "web-1", "-n", "shop", env={"SCHEDLENS_SERVER": server.url, "SCHEDLENS_TOKEN": token}
    )
    assert from_env.returncode == 0, from_env.stderr

    config = tmp_path / "kubectl.yaml"
    config.write_text(yaml.safe_dump({"server": server.url, "token": token}), encoding="utf-8")
    from_file = kubectl_schedlens("why", "web-1", "-n", "shop", env={"SCHEDLENS_KUBECTL_CONFIG": str(config)})
    assert from_file.returncode == 0, from_file.stderr
    assert from_file.stdout == from_env.stdout

    flags_win = kubectl_schedlens("nodes", "--token", "not-a-token", env={"SCHEDLENS_KUBECTL_CONFIG": str(config)})
    assert flags_win.returncode == 4


def test_global_flags_go_before_or_after_the_command_as_kubectls_do(server, token, kube_scheduler):
    kube_scheduler.schedule(at=T0, name="web-1", namespace="shop")
    expected = api_json(server, token, "/api/v1/why/?namespace=shop&name=web-1")
    connect = ["--server", server.url, "--token", token, "--timeout", "20"]

    before = kubectl_schedlens(*connect, "-n", "shop", "-o", "json", "why", "web-1")
    after = kubectl_schedlens("why", "web-1", "-n", "shop", "-o", "json", *connect)
    split = kubectl_schedlens("-n", "shop", "--token", token, "why", "web-1", "--server", server.url, "-o", "json")
    # The same flag in both places: the last one wins (a wrong server and namespace first, the right ones after).
    closed = f"http://127.0.0.1:{free_port()}"
    last_wins = kubectl_schedlens(
        "--server", closed, "-n", "data", "-o", "yaml", "why", "web-1", "--namespace=shop", "-o", "json", *connect
    )
    history = kubectl_schedlens(*connect, "--namespace", "shop", "-o", "json", "history", "--limit", "5")

    for result in (before, after, split, last_wins, history):
        assert result.returncode == 0, result.stderr
    for result in (before, after, split, last_wins):
        assert json.loads(result.stdout) == expected
    assert json.loads(history.stdout) == api_json(server, token, "/api/v1/cycles/?namespace=shop&page_size=5")


def test_a_global_flag_means_the_same_wherever_it_stands():
    from scheduler_core.cli.kubectl_plugin import parse

    assert vars(parse(["why", "web"])) == {
        "command": "why", "pod": "web", "namespace": "default", "server": None, "token": None, "output": "table",
        "timeout": 30.0,
    }  # fmt: skip
    for argv in (
        ["-n", "shop", "--server", "http://a", "why", "web"],
        ["why", "web", "-n", "shop", "--server", "http://a"],
        ["-n", "other", "--server", "http://b", "why", "-n", "shop", "web", "--server", "http://a"],
    ):
        args = parse(argv)
        assert (args.pod, args.namespace, args.server) == ("web", "shop", "http://a"), argv
    assert parse(["-n", "shop", "history"]).namespace == "shop"
    assert parse(["history"]).namespace is None, "history without -n: every namespace"
    assert parse(["-o", "yaml", "--timeout", "5", "nodes"]).output == "yaml"
    assert parse(["verify", "--timeout", "5"]).timeout == 5.0
