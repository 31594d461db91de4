"""The cost-per-pod study (``python -m benchmarks.cost``) at a tiny size, and the candidates it sends, as its user runs
them.

Its figures are only as good as what it drives: this checks that the candidates are what kube-scheduler v1.28 sends
(``numFeasibleNodesToFind``, a new window and order per pod: ``python -m benchmarks.cost.driver`` prints them), and
that a short run against the deployed layout (gunicorn, the ingester, binds through the Kubernetes-shaped API server)
binds every pod, makes the requests it counts, and reads the CPU of every process. No timings are asserted.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import uuid
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import pytest

REPO = Path(__file__).resolve().parents[2]


def candidates(nodes: int, pods: int) -> dict:
    done = subprocess.run(
        [sys.executable, "-m", "benchmarks.cost.driver", "--nodes", str(nodes), "--pods", str(pods)],
        cwd=REPO,
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    )
    return json.loads(done.stdout)


@pytest.mark.parametrize(
    ("nodes", "names"),
    [(10, 10), (99, 99), (100, 100), (200, 100), (1000, 420), (2000, 680), (5000, 500), (6000, 300), (20000, 1000)],
)
def test_the_candidates_are_as_many_as_kube_scheduler_s_adaptive_percentage_finds(nodes: int, names: int) -> None:
    sent = candidates(nodes, 1)
    assert sent["count"] == names
    assert len(sent["pods"][0]) == names


def test_every_pod_gets_the_next_window_of_nodes_in_an_order_of_its_own() -> None:
    names = [f"node-{i:04d}" for i in range(1000)]
    first, second, third = candidates(1000, 3)["pods"]

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


def admin_url() -> str:
    """The PostgreSQL server the tests use (``DATABASE_URL``), its ``postgres`` database: the run creates and drops
    its scratch databases there."""
    parts = urlsplit(os.environ.get("DATABASE_URL", "postgres://postgres@127.0.0.1:5432/postgres"))
    return urlunsplit(parts._replace(path="/postgres"))


def tiny_run(tmp_path: Path, *variants: str) -> str:
    """``python -m benchmarks.cost`` at 30 nodes and 40 pods (``--variant`` each of ``variants``): its results file,
    once the run succeeded and reported no error."""
    results = tmp_path / "results-cost.md"
    command = [
        *(sys.executable, "-m", "benchmarks.cost", "--nodes", "30", "--pods", "40", "--rounds", "2"),
        *("--concurrent-pods", "6", "--bind-pool", "2", "--floor-requests", "0"),
        *(arg for variant in variants for arg in ("--variant", variant)),
        *("--database-prefix", f"schedlens_smoke_{uuid.uuid4().hex[:8]}", "--write", str(results)),
    ]
    env = {**os.environ, "BENCH_ADMIN_DATABASE_URL": admin_url()}
    done = subprocess.run(command, cwd=REPO, env=env, capture_output=True, text=True, timeout=900)

    assert done.returncode == 0, done.stderr[-3000:]
    text = results.read_text()
    assert "errors**" not in text, text
    return text


def test_a_tiny_run_binds_every_pod_and_accounts_for_every_process(tmp_path: Path) -> None:
    text = tiny_run(tmp_path)
    phases = re.search(
        r"40 pods \((\d+) filter, (\d+) prioritize, (\d+) bind calls; (\d+) pods bound in the API server; "
        r"API requests per pod: ([^)]*)\)",
        text,
    )
    assert phases, text
    filters, _, binds, bound, api = phases.groups()
    assert filters == binds == "40"
    assert bound == "40", "every pod bound in the API server"
    assert "bindings 1.00" in api
    # | process | phase 1: filter + prioritize | phase 2: binds | between, drain | all | idle ms/s |
    cpu = {
        cells[0]: [float(c) for c in cells[1:]]
        for cells in ([c.strip() for c in row.strip("|").split("|")] for row in text.splitlines())
        if cells[0].startswith(("gunicorn", "ingester"))
    }
    assert {"gunicorn master", "gunicorn worker 1", "gunicorn worker 2", "ingester"} <= set(cpu), text
    assert all(ms >= 0 for row in cpu.values() for ms in row)
    # /proc counts CPU in 10 ms ticks: enough pods that the web workers' share cannot round to none.
    assert sum(row[3] for name, row in cpu.items() if name.startswith("gunicorn worker")) > 0, "the web CPU was read"
    assert re.search(r"6 pods at the loop's own pace", text), "the concurrent run"
    assert "| 30 |" in text


@pytest.mark.parametrize("floor", [False, True])
def test_the_ingest_parts_study_drains_real_cycles_and_reads_the_ingester_s_cpu(floor: bool) -> None:
    command = [
        *(sys.executable, "-m", "benchmarks.cost.ingest_parts", "--cycles", "12", "--rounds", "2", "--batch", "9"),
        *("--database", f"schedlens_smoke_ingest_{uuid.uuid4().hex[:8]}", "--profile", "5"),
        *(("--floor",) if floor else ()),
    ]
    env = {**os.environ, "BENCH_ADMIN_DATABASE_URL": admin_url()}
    done = subprocess.run(command, cwd=REPO, env=env, capture_output=True, text=True, timeout=600)

    assert done.returncode == 0, done.stderr[-3000:]
    found = re.search(r"ingester CPU ms per cycle \(12 cycles a round, (.*)\): median ([\d.]+) of 2", done.stdout)
    assert found, done.stdout
    assert ("the floor: copy, chain, commit" in found.group(1)) is floor
    assert float(found.group(2)) > 0
    assert ("_floor_ingest" if floor else "spool_ingest") in done.stdout, "the profile names what drained the spool"


@pytest.mark.parametrize("lists", [(), ("--fixed-window",)])
def test_the_verb_parts_study_runs_the_verbs_on_kube_scheduler_s_lists_and_reads_their_cpu(lists) -> None:
    command = [sys.executable, "-m", "benchmarks.cost.verb_parts", "--pods", "8", "--rounds", "2", "--nodes", "200"]
    done = subprocess.run([*command, *lists, "--profile", "5"], cwd=REPO, capture_output=True, text=True, timeout=600)

    assert done.returncode == 0, done.stderr[-3000:]
    found = re.search(r"verbs' CPU ms per pod \(.*8 pods a round, 200 nodes, (.*)\): median ([\d.]+) of 2", done.stdout)
    assert found, done.stdout
    assert found.group(1) == ("the same window for every pod" if lists else "kube-scheduler's windows")
    assert float(found.group(2)) > 0
    assert "scheduler_core/" in done.stdout, "the profile names the verbs' code"


@pytest.mark.parametrize("form", ["framed", "deriving"])
def test_the_record_parts_study_reads_each_verb_s_records_and_the_event_s_summary(form: str) -> None:
    command = [sys.executable, "-m", "benchmarks.cost.record_parts", "--cycles", "6", "--rounds", "2", "--nodes", "200"]
    env = {**os.environ, "SCHEDLENS_SPOOL_FORM": form}
    done = subprocess.run(command, cwd=REPO, env=env, capture_output=True, text=True, timeout=600)

    assert done.returncode == 0, done.stderr[-3000:]
    assert f"(6 cycles, 200 nodes, spool form {form}; median of 2)" in done.stdout, done.stdout
    rows = dict(re.findall(r"^\| (filter|prioritize|bind) \| (.+) \|$", done.stdout, re.MULTILINE))
    assert set(rows) == {"filter", "prioritize", "bind"}, done.stdout
    for verb, row in rows.items():
        size, *parts = (float(cell) for cell in row.split(" | "))
        assert size > 0, (verb, row)
        assert len(parts) == 3, (verb, row)
    found = re.search(r"The Explained Event's summary \(.*\): (\d+) us per cycle", done.stdout)
    assert found, done.stdout
    assert int(found.group(1)) > 0


def test_a_tiny_run_beside_the_no_op_extender_reads_schedlens_against_the_protocol_s_floor(tmp_path: Path) -> None:
    text = tiny_run(tmp_path, "extender=noop", "")
    # The no-op extender in Go was built, served the same calls and posted every Binding itself, and no Event.
    noop = re.search(r"### 30 nodes, extender=noop: every process.*?\n\n(.*?)\n\n", text, re.S)
    assert noop, text
    assert "40 filter, 40 prioritize, 40 bind calls; 40 pods bound in the API server" in noop.group(1)
    assert "API requests per pod: bindings 1.00)" in noop.group(1), "no Explained Event from the no-op"
    assert re.search(r"^\| no-op extender \(Go\) \|", text, re.M), "its CPU has a row of its own"
    assert re.search(r"^\| Kubernetes-shaped API server \|", text, re.M), "so has the API server's"
    # schedlens's total reads as a ratio to the no-op's (the arithmetic: test_cost_report.py).
    header = next(line for line in text.splitlines() if line.startswith("| nodes | variant |"))
    columns = [c.strip() for c in header.strip("|").split("|")]
    rows = {
        cells[1]: dict(zip(columns, cells, strict=True))
        for cells in ([c.strip() for c in line.strip("|").split("|")] for line in text.splitlines())
        if cells[0] == "30"
    }
    assert set(rows) == {"extender=noop", "as configured"}, text
    assert rows["as configured"]["total / no-op's"].endswith("×"), text
    assert rows["extender=noop"]["total / no-op's"] == ""
