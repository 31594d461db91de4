"""The ingester's preparing processes (``ingest_spool --follow``, ``dashboard.ingest.call_builders``) killed.

A preparing process SIGKILLed (the OOM killer's way) under load: the ingester starts new ones and every record
still lands once, in the order kube-scheduler made the calls. The ingester itself SIGKILLed: its preparing
processes do not outlive it.
"""

from __future__ import annotations

import os
import signal
from pathlib import Path

import pytest

from dashboard.audit.chain import audit_chain_verify
from dashboard.models import VerbCall
from dashboard.spool import Spool
from scheduler_core.cli.simulator import SyntheticCluster
from tests.support.load import PacedLoad
from tests.support.processes import Gunicorn, Process, children, database_url, manage, wait_caught_up, wait_for

pytestmark = pytest.mark.django_db(transaction=True)

RATE = 40.0
PHASE_PODS = 40


def preparing_processes(ingester: Process) -> list[int]:
    """The ingester's spawned preparing processes (not multiprocessing's resource tracker)."""
    found = []
    for pid in children(ingester.pid):
        try:
            command = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if any(b"spawn_main" in part for part in command):
            found.append(pid)
    return found


def alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return state[state.rindex(")") + 2] != "Z"  # a zombie has exited; only its parent has not reaped it


def test_a_killed_preparing_process_is_replaced_and_every_record_lands_once_in_order(
    settings, tmp_path: Path, production_env: dict[str, str], cluster: SyntheticCluster
) -> None:
    database = database_url(settings.DATABASES["default"])
    # Every pass prepares in the processes, not only once behind.
    env = {**production_env, "DATABASE_URL": database, "SCHEDLENS_INGEST_PREPARE_BACKLOG": "0"}
    server = Gunicorn(env, tmp_path / "gunicorn.log")
    ingester = manage(["ingest_spool", "--follow", "--interval", "0.1"], env, tmp_path / "ingest.log")
    spool = Spool(env["SCHEDLENS_SPOOL_DIR"])
    load = PacedLoad(f"{server.url}/extender/default", cluster, rate=RATE, pods=4000).start()

    try:
        load.wait_started(PHASE_PODS)
        wait_caught_up(spool)
        before = wait_for(lambda: preparing_processes(ingester), what="the preparing processes", timeout=30)

        os.kill(before[0], signal.SIGKILL)
        load.wait_started(load.started + PHASE_PODS)
        wait_caught_up(spool)
        replaced = preparing_processes(ingester)
        load.stop.set()
        result = load.join(timeout=60)
        wait_for(lambda: spool.depth() == 0, what="the ingester to drain the spool", timeout=60)
    finally:
        load.stop.set()
        ingester.stop()
        server.stop()

    assert "will retry with new preparing processes" in ingester.output()
    assert replaced, "new preparing processes run"
    assert before[0] not in replaced
    assert result.errors == []
    assert result.non_2xx == []
    asked = [(call.uid, call.verb) for call in result.calls]
    stored = list(VerbCall.objects.order_by("id").values_list("cycle__pod_uid", "verb"))
    assert len(stored) == len(asked) == len(set(stored)), "every call recorded exactly once"
    assert stored == asked, "and in the order the calls were made"
    assert audit_chain_verify().ok


def test_the_preparing_processes_do_not_outlive_a_killed_ingester(
    settings, tmp_path: Path, production_env: dict[str, str]
) -> None:
    database = database_url(settings.DATABASES["default"])
    env = {**production_env, "DATABASE_URL": database, "SCHEDLENS_INGEST_PREPARERS": "2"}
    ingester = manage(["ingest_spool", "--follow", "--interval", "0.1"], env, tmp_path / "ingest.log")
    try:
        workers = wait_for(
            lambda: (found := preparing_processes(ingester)) and len(found) == 2 and found,
            what="the preparing processes",
            timeout=30,
        )
        ingester.kill(signal.SIGKILL)
        wait_for(lambda: not any(alive(pid) for pid in workers), what="the preparing processes to exit", timeout=30)
    finally:
        ingester.stop()
