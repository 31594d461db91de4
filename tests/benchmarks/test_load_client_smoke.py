"""A short run of the load study (``python -m benchmarks.load latency``) against gunicorn, as its user runs it.

The benchmark's figures are only as good as its client: this checks, on a few pods, that each scheduling cycle
is answered, that binds (posted from the client's bind process) all arrive, and that keep-alive holds.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
BIND_THREADS = 4
"""The client's bind pool (``benchmarks.load.client.BIND_THREADS``): its connections come on top of the loop's."""

LINE = re.compile(
    r"(?P<nodes>\d+) nodes (?P<mode>names|nodes)\s*:.* pods (?P<pods>\d+) requests (?P<requests>\d+) "
    r"prioritize (?P<prioritize>\d+) binds (?P<binds>\d+) errors (?P<errors>\d+) "
    r"connections (?P<connections>\d+) reconnections (?P<reconnections>\d+)"
)


def test_the_load_client_schedules_binds_and_keeps_its_connections() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "benchmarks.load", "latency", "--nodes", "30", "--pods", "25"],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    runs = {m["mode"]: {k: int(v) for k, v in m.groupdict().items() if k != "mode"} for m in LINE.finditer(done.stdout)}
    assert set(runs) == {"names", "nodes"}, done.stdout  # NodeNames, then full Nodes
    assert runs["names"]["pods"] == 25
    assert runs["nodes"]["pods"] == 6  # full Nodes: a quarter of the pods, at least 5
    for mode, run in runs.items():
        assert run["nodes"] == 30
        assert run["errors"] == 0, (mode, done.stdout)
        assert run["binds"] > 0, "binds were posted and answered"
        assert run["requests"] == run["pods"] + run["prioritize"] + run["binds"], (mode, run)  # one filter per pod
        assert run["reconnections"] == 0
        assert run["connections"] <= 1 + BIND_THREADS
