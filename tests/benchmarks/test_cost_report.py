"""The cost-per-pod report's arithmetic (``benchmarks.cost.report.figures``), on figures given: what a pod costs in
all, and how that reads against the no-op extender's."""

from __future__ import annotations

import pytest

from benchmarks.cost.measure import Concurrent, Phases, SizeResult
from benchmarks.cost.report import figures, markdown


def phases(label: str, pods: int, **cpu: dict[str, float]) -> Phases:
    found = Phases(label, pods=pods, names=[420] * pods, **cpu)
    found.loop.filter_ms = [1.0] * pods
    return found


SCHEDLENS = phases(
    "as configured",
    100,
    verbs={
        "gunicorn worker 1": 0.200,
        "ingester": 0.050,
        "placement watcher": 0.0,
        "PostgreSQL backends": 0.010,
        "Kubernetes-shaped API server": 0.0,
    },
    binds={
        "gunicorn worker 1": 0.100,
        "ingester": 0.020,
        "placement watcher": 0.0,
        "PostgreSQL backends": 0.0,
        "Kubernetes-shaped API server": 0.030,
    },
    rest={
        "gunicorn worker 1": 0.0,
        "ingester": 0.130,
        "placement watcher": 0.040,
        "PostgreSQL backends": 0.020,
        "Kubernetes-shaped API server": 0.030,
    },
)
NOOP = phases(
    "extender=noop",
    100,
    verbs={"no-op extender (Go)": 0.030, "Kubernetes-shaped API server": 0.0},
    binds={"no-op extender (Go)": 0.020, "Kubernetes-shaped API server": 0.030},
    rest={"no-op extender (Go)": 0.0, "Kubernetes-shaped API server": 0.0},
)


def test_the_total_counts_the_verbs_the_bind_the_ingest_the_watcher_and_postgresql() -> None:
    size = SizeResult(1000, [SCHEDLENS], [], ["as configured"])
    f = figures(size, SCHEDLENS)

    assert f["verbs"] == pytest.approx(2.0)  # 0.200 s over 100 pods
    assert f["bind"] == pytest.approx(1.0)
    assert f["ingest"] == pytest.approx(2.0)  # the ingester over every phase: 0.200 s
    assert f["postgres"] == pytest.approx(0.3)
    assert f["watcher"] == pytest.approx(0.4)
    assert f["total"] == pytest.approx(5.7)
    assert f["api server"] == pytest.approx(0.6), "reported beside the total, not in it"


def test_with_a_concurrent_run_its_ingest_and_postgresql_count() -> None:
    concurrent = Concurrent(
        "as configured",
        pods=50,
        cpu={
            "gunicorn worker 1": 0.150,
            "ingester": 0.050,
            "placement watcher": 0.010,
            "PostgreSQL backends": 0.025,
            "Kubernetes-shaped API server": 0.02,
        },
    )
    f = figures(SizeResult(1000, [SCHEDLENS], [concurrent], ["as configured"]), SCHEDLENS)

    assert f["ingest"] == pytest.approx(1.0)
    assert f["postgres"] == pytest.approx(0.5)
    assert f["watcher"] == pytest.approx(0.2)
    assert f["total"] == pytest.approx(2.0 + 1.0 + 1.0 + 0.2 + 0.5)
    assert f["concurrent"] == pytest.approx(3.0 + 1.0 + 0.2 + 0.5)
    assert f["api server"] == pytest.approx(0.4)


def test_each_total_reads_against_the_no_op_extender_s_of_the_same_run() -> None:
    size = SizeResult(1000, [NOOP, SCHEDLENS], [], ["extender=noop", "as configured"], noop="extender=noop")

    floor = figures(size, NOOP)
    assert floor["total"] == pytest.approx(0.5)
    assert floor["versus no-op"] != floor["versus no-op"], "the floor is not read against itself"
    f = figures(size, SCHEDLENS)
    assert f["versus no-op"] == pytest.approx(5.7 / 0.5)
    assert f["api server versus no-op"] == pytest.approx(0.6 - 0.3)

    text = "\n".join(markdown([size], "$ cmd", 1.0, 4))
    row = next(line for line in text.splitlines() if line.startswith("| 1000 | as configured |"))
    assert "| 0.40 | 0.30 | **5.70** | 11.4× |" in row
    assert "| 0.60 (+0.30) |" in row
