"""The cost-per-pod benchmark (``benchmarks/cost_per_pod.py``) at a tiny size, and its kube-scheduler arithmetic.

Its figures are only as good as what it drives: this checks that the candidates are what kube-scheduler v1.28 sends
(``numFeasibleNodesToFind``, a new window and order per pod), and that a short run against the deployed layout
(gunicorn, the ingester, binds through the Kubernetes-shaped API server) binds every pod, makes the requests it
counts, and reads the CPU of every process. No timings are asserted.
"""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from benchmarks.common import REPO
from benchmarks.cost_driver import Candidates, num_feasible_nodes_to_find
from benchmarks.cost_per_pod import run_size
from benchmarks.cost_report import markdown
from tests.support.processes import database_url


@pytest.mark.parametrize(
    ("nodes", "names"),
    [(10, 10), (99, 99), (100, 100), (200, 100), (1000, 420), (2000, 680), (5000, 500), (6000, 300), (20000, 1000)],
)
def test_the_candidates_are_as_many_as_kube_scheduler_s_adaptive_percentage_finds(nodes: int, names: int) -> None:
    assert num_feasible_nodes_to_find(nodes) == names


def test_every_pod_gets_the_next_window_of_nodes_in_an_order_of_its_own() -> None:
    names = [f"node-{i:04d}" for i in range(1000)]
    candidates = Candidates(names, random.Random(1))

    first, second, third = candidates.next(), candidates.next(), candidates.next()

    assert len(first) == len(second) == len(third) == 420
    assert len(set(first)) == len(set(second)) == len(set(third)) == 420
    # 16 goroutines take chunks of 31 nodes in turn from nextStartNodeIndex (0, then 420, 840: it moves on by the 420
    # nodes processed, every node being feasible) until 420 are found: at most 16 chunks are unfinished then.
    assert set(first) <= set(names[: 420 + 16 * 31])
    assert set(second) <= set(names[420:] + names[: 420 + 16 * 31 - 580])
    assert len(set(second) & set(names[420:840])) > 420 * 3 / 4
    assert len(set(third) & set(names[840:] + names[:260])) > 420 * 3 / 4  # the index wraps around
    assert len({tuple(first), tuple(second), tuple(third)}) == 3
    assert first != sorted(first), "the goroutines' order, not the node list's"


@pytest.mark.django_db(transaction=True)
def test_a_tiny_run_binds_every_pod_and_accounts_for_every_process(settings, tmp_path: Path) -> None:
    result = run_size(
        30,
        [("as configured", REPO, {})],
        pods=12,
        rounds=2,
        concurrent_pods=6,
        bind_threads=2,
        workdir=tmp_path,
        database_url=database_url(settings.DATABASES["default"]),
        progress=lambda _: None,
    )

    (phases,) = result.phases
    assert phases.loop.errors == []
    assert phases.pods == 12
    assert phases.loop.requests["filter"] == phases.loop.requests["bind"] == 12
    assert phases.bound == 12, "every pod bound in the API server"
    assert phases.api["bindings"] == 12
    assert {"gunicorn master", "gunicorn worker 1", "gunicorn worker 2", "ingester"} <= set(phases.total)
    assert all(seconds >= 0 for seconds in phases.total.values())
    assert sum(phases.verbs.values()) > 0, "the verbs' CPU was read"
    (concurrent,) = result.concurrent
    assert concurrent.errors == []
    assert len(concurrent.cycle_ms) == len(concurrent.filter_ms) == 6
    assert "| 30 |" in "\n".join(markdown([result], "test", 0.0, 2))
