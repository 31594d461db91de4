"""Probes, scrapes and the health page read the spool's backlog by index, never counting its rows.

They come every few seconds from every kubelet and Prometheus, and the spool is largest exactly when they matter (a
database outage): a ``COUNT(*)``, or a ``min(id), max(id)`` that SQLite answers by a scan, reads all of it each time.
The statements are caught with SQLite's trace callback on the process's spool connection (the test client runs the
views in this thread) and each one's plan is asked of SQLite.
"""

from __future__ import annotations

import contextlib
import json
import sqlite3

import pytest
from django.urls import reverse
from prometheus_client.parser import text_string_to_metric_families

from dashboard.spool import Spool

PROBES = ["/healthz", "/readyz", "/metrics", reverse("ui:health")]


@pytest.fixture
def waiting(runtime) -> int:
    """Three records waiting (two of five already ingested and deleted, as the ingester leaves a spool)."""
    for n in range(5):
        runtime.spool.append(b"record %d" % n)
    runtime.spool.delete_through(2)
    assert runtime.spool.depth() == runtime.spool.backlog() == 3
    return 3


@pytest.fixture
def signed_in(client, django_user_model):
    client.force_login(django_user_model.objects.create_user(username="pat", password="not-used-here"))
    return client


@pytest.fixture
def spool_statements(runtime, monkeypatch) -> list[str]:
    """Every statement run on the runtime's spool from here on; and no other spool may be opened meanwhile."""
    statements: list[str] = []
    runtime.spool._conn().set_trace_callback(statements.append)
    opened: list[object] = []
    original = Spool.__init__

    def counted(self: Spool, directory: object) -> None:
        opened.append(directory)
        original(self, directory)  # type: ignore[arg-type]

    monkeypatch.setattr(Spool, "__init__", counted)
    yield statements
    runtime.spool._conn().set_trace_callback(None)
    assert opened == [], "the page or probe opened a spool of its own instead of using the process's"


def plan(spool: Spool, statement: str) -> list[str]:
    with contextlib.closing(sqlite3.connect(spool.path)) as conn:
        return [row[3] for row in conn.execute(f"EXPLAIN QUERY PLAN {statement}")]


@pytest.mark.django_db
@pytest.mark.parametrize("path", PROBES)
def test_a_probe_reads_the_spool_by_index_and_counts_nothing(signed_in, runtime, waiting, spool_statements, path):
    response = signed_in.get(path)

    assert response.status_code == 200
    reads = [s for s in spool_statements if "events" in s]
    assert not [s for s in reads if "count(" in s.lower()], "a probe must not count the spool's rows"
    for statement in reads:
        steps = plan(runtime.spool, statement)
        assert not [step for step in steps if step.startswith("SCAN events")], f"{statement} scans: {steps}"


def metric(text: str, name: str) -> float:
    return next(s.value for f in text_string_to_metric_families(text) for s in f.samples if s.name == name)


@pytest.mark.django_db
def test_the_probes_and_the_health_page_show_the_backlog(signed_in, runtime, waiting, spool_statements):
    assert json.loads(signed_in.get("/readyz").content)["spool_depth"] == waiting
    assert metric(signed_in.get("/metrics").content.decode(), "schedlens_spool_depth") == waiting
    assert f"{waiting} records waiting" in signed_in.get(reverse("ui:health")).content.decode()

    runtime.spool.append(b"one more")
    assert json.loads(signed_in.get("/readyz").content)["spool_depth"] == waiting + 1
    assert runtime.spool.depth() == waiting + 1


@pytest.mark.django_db
def test_without_a_runtime_the_health_page_says_this_process_holds_no_spool(signed_in, monkeypatch):
    from dashboard import runtime as runtime_module

    monkeypatch.setattr(runtime_module, "_runtime", None)  # a process that never built one (a shell, a test)
    page = signed_in.get(reverse("ui:health")).content.decode()
    assert "this process runs no extender, so it holds no spool" in page
