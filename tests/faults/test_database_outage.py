"""PostgreSQL unreachable, reset and hung under load: no verb waits, and afterwards every record is in the database
exactly once, in the order kube-scheduler made the calls.

The database is reached through a TCP proxy (``tests/faults/tcp_proxy.py``) the test breaks; the suite's PostgreSQL
itself is never touched. Both the web process and the ingester (``manage.py ingest_spool --follow``, as deployed)
get the proxy's address, which also proves the verbs never open a database connection.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from dashboard.audit.chain import audit_chain_verify
from dashboard.models import VerbCall
from dashboard.spool import Spool
from scheduler_core.cli.simulator import SyntheticCluster
from tests.faults.tcp_proxy import TcpProxy
from tests.support.load import PacedLoad
from tests.support.processes import Gunicorn, database_url, manage, wait_caught_up, wait_for

pytestmark = pytest.mark.django_db(transaction=True)

RATE = 40.0
"""Pods per second (each a filter, usually a prioritize, and a bind)."""
VERB_BUDGET_SECONDS = 1.0
"""Far below kube-scheduler's 5 s timeout; a verb waiting on the database would take seconds or forever."""
PHASE_PODS = 40
MAX_PODS = 4000


@pytest.mark.parametrize("backlog", ["2000", "0"], ids=["prepared-in-a-thread", "prepared-in-processes"])
def test_verbs_answer_through_a_database_outage_and_every_record_lands_once_in_order(
    settings, tmp_path: Path, production_env: dict[str, str], cluster: SyntheticCluster, backlog: str
) -> None:
    db = settings.DATABASES["default"]
    with TcpProxy(int(db["PORT"] or 5432)) as proxy:
        # The outages leave a few hundred records behind: a backlog of 0 has the preparing processes take them.
        env = {
            **production_env,
            "DATABASE_URL": database_url(db, port=proxy.port),
            "SCHEDLENS_INGEST_PREPARE_BACKLOG": backlog,
        }
        server = Gunicorn(env, tmp_path / "gunicorn.log")
        ingester = manage(["ingest_spool", "--follow", "--interval", "0.1"], env, tmp_path / "ingest.log")
        spool = Spool(env["SCHEDLENS_SPOOL_DIR"])
        # Bounded (it stops by itself after MAX_PODS), and stopped once the phases below are done.
        load = PacedLoad(f"{server.url}/extender/default", cluster, rate=RATE, pods=MAX_PODS).start()

        def drained() -> None:
            wait_for(lambda: spool.depth() == 0, what="the ingester to drain the spool", timeout=60)

        try:
            load.wait_started(PHASE_PODS)
            wait_caught_up(spool)

            proxy.mode = "refuse"  # PostgreSQL unreachable: connections refused
            start = load.started
            load.wait_started(start + PHASE_PODS)
            assert spool.depth() >= PHASE_PODS, "records wait in the spool while the database is unreachable"
            proxy.mode = "pass"
            wait_caught_up(spool)

            proxy.mode = "reset"  # every open connection torn down (a restart, a failover)
            proxy.mode = "pass"
            load.wait_started(load.started + PHASE_PODS)
            wait_caught_up(spool)

            proxy.mode = "hang"  # connections stay open, nothing answers (SIGSTOP, a black hole)
            start = load.started
            load.wait_started(start + PHASE_PODS)
            assert spool.depth() >= PHASE_PODS, "records wait in the spool while the database hangs"
            proxy.mode = "pass"
            load.stop.set()
            result = load.join(timeout=60)
            drained()
        finally:
            load.stop.set()
            ingester.stop()
            server.stop()
        assert "ingest failed, will retry" in ingester.output(), "the outage was seen by the ingester"

    assert result.errors == []
    assert result.non_2xx == []
    slowest = max(call.seconds for call in result.calls)
    assert slowest < VERB_BUDGET_SECONDS, f"a verb took {slowest:.3f} s"

    asked = [(call.uid, call.verb) for call in result.calls]
    stored = list(VerbCall.objects.order_by("id").values_list("cycle__pod_uid", "verb"))
    assert len(stored) == len(asked) == len(set(stored)), "every call recorded exactly once"
    assert stored == asked, "and in the order the calls were made"
    assert audit_chain_verify().ok
