"""The simulator drives a real schedlens (gunicorn, keep-alive) like kube-scheduler, in both node modes."""

from __future__ import annotations

import pytest
from django.core.management import call_command

from dashboard.models import Outcome, SchedulingCycle
from dashboard.spool import Spool
from scheduler_core.cli.simulator import ExtenderClient, KubeSchedulerSimulator, make_cluster
from tests.support.ingest import ingest_everything
from tests.support.live_server import LiveServer
from tests.support.paths import REPO


@pytest.fixture
def demo_server(tmp_path):
    cluster_file = tmp_path / "cluster.json"
    call_command("simulate", nodes=30, write_cluster=str(cluster_file))
    server = LiveServer(
        {
            "SCHEDLENS_SPOOL_DIR": str(tmp_path / "spool"),
            "SCHEDLENS_INGEST_IN_PROCESS": "false",
            "SCHEDLENS_BIND_MODE": "simulated",
            "SCHEDLENS_CONFIG": str(REPO / "deploy" / "profiles.demo.yaml"),
            "SCHEDLENS_CLUSTER_FILE": str(cluster_file),
        }
    )
    yield server, Spool(tmp_path / "spool")
    server.stop()


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("node_cache_capable", [True, False], ids=["NodeNames", "Nodes"])
def test_simulated_pods_are_placed_over_one_connection_and_every_cycle_is_recorded(demo_server, node_cache_capable):
    server, spool = demo_server
    client = ExtenderClient(f"{server.url}/extender/default")
    simulator = KubeSchedulerSimulator(client, make_cluster(30), node_cache_capable=node_cache_capable, weight=5)
    stats = simulator.run(40)
    client.close()

    assert stats.errors == 0
    assert stats.bound >= 30, "most synthetic pods fit somewhere"
    assert len(stats.placements) > 5, "pods spread over the quiet nodes rather than one"
    assert client.connections_opened == 1, "keep-alive: one connection for every call"

    ingest_everything(spool)
    assert SchedulingCycle.objects.count() == stats.pods
    assert SchedulingCycle.objects.filter(outcome=Outcome.BOUND).count() == stats.bound
    assert SchedulingCycle.objects.filter(outcome=Outcome.UNSCHEDULABLE).count() == stats.unschedulable
    mode = "names" if node_cache_capable else "nodes"
    assert set(SchedulingCycle.objects.values_list("node_mode", flat=True)) == {mode}
    bound_to = SchedulingCycle.objects.filter(outcome=Outcome.BOUND).values_list("chosen_node", flat=True)
    assert sorted(bound_to) == sorted(n for n, c in stats.placements.items() for _ in range(c))


def test_simulate_lists_the_profiles_of_the_configuration_it_runs_with(settings, tmp_path):
    """``make run`` fills its demo history through these, whatever the operator's SCHEDLENS_CONFIG names them."""
    import io

    config = tmp_path / "mine.yaml"
    config.write_text("profiles:\n- name: mine\n- name: gpu-heavy\n", encoding="utf-8")
    settings.SCHEDLENS_CONFIG = str(config)
    out = io.StringIO()
    call_command("simulate", list_profiles=True, stdout=out)
    assert out.getvalue().split() == ["mine", "gpu-heavy"]
