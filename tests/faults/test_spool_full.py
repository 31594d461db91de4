"""The spool's disk full or unwritable: the configured behaviour, never a silent drop.

``SCHEDLENS_SPOOL_FAILURE=fail`` (default) answers 503, so kube-scheduler's ``ignorable`` decides;
``answer`` answers anyway. Both write the whole record to the log at ERROR and count
``schedlens_spool_append_failures_total``. The disk is a real tmpfs of 1 MiB filled to the last byte (mounting
needs root; elsewhere these tests are skipped, saying so).
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import sqlite3
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from prometheus_client import REGISTRY

from dashboard import runtime as runtime_module
from dashboard.spool import Spool
from scheduler_core.extender.record.spool_codec import decode_event
from tests.support.inputs import traffic_store
from tests.support.processes import Gunicorn, tmpfs, wait_for

JSON = "application/json"


def _can_mount(tmp_path: Path) -> bool:
    if os.geteuid() != 0:
        return False
    try:
        with tmpfs(tmp_path / "probe", "64k"):
            return True
    except subprocess.CalledProcessError:
        return False


@pytest.fixture
def spool_disk(tmp_path: Path) -> Iterator[Path]:
    if not _can_mount(tmp_path):
        pytest.skip("mounting a tmpfs needs root (CAP_SYS_ADMIN)")
    with tmpfs(tmp_path / "spool-disk", "1m") as path:
        yield path


@contextlib.contextmanager
def full(disk: Path) -> Iterator[None]:
    """Fill ``disk`` to the last byte; free it again at exit."""
    filler = disk / "filler"
    fd = os.open(filler, os.O_WRONLY | os.O_CREAT)
    try:
        with contextlib.suppress(OSError):  # ENOSPC: full
            while True:
                os.write(fd, b"\0" * 4096)
    finally:
        os.close(fd)
    try:
        yield
    finally:
        filler.unlink()


@pytest.fixture
def runtime(settings, spool_disk: Path, monkeypatch):
    settings.SCHEDLENS_SPOOL_DIR = spool_disk / "spool"
    settings.SCHEDLENS_INGEST_IN_PROCESS = False
    settings.SCHEDLENS_BIND_MODE = "simulated"
    settings.SCHEDLENS_CONFIG = ""
    settings.SCHEDLENS_CLUSTER_FILE = ""
    runtime = runtime_module.Runtime()
    quiet = traffic_store({"node-1": 4.0e6, "node-2": 1.0e6})
    runtime.traffic.put(quiet.latest(next(iter(runtime.profiles["default"].traffic_queries()))))
    runtime.extender.traffic = runtime.traffic
    monkeypatch.setattr(runtime_module, "_runtime", runtime)
    yield runtime
    runtime.spool.close()  # before the tmpfs goes: its checkpoint thread would outlive the test


def body(uid: str) -> bytes:
    pod = {"metadata": {"name": uid, "namespace": "shop", "uid": uid}}
    return json.dumps({"Pod": pod, "Nodes": None, "NodeNames": ["node-1", "node-2"]}).encode()


def failures(policy: str) -> float:
    return REGISTRY.get_sample_value("schedlens_spool_append_failures_total", {"verb": "filter", "policy": policy}) or 0


def spooled_uids(runtime) -> list[str]:
    return [decode_event(data).pod_uid for _, data in runtime.spool.read_batch(1000)]


def test_a_full_spool_disk_fails_the_call_with_503_and_logs_the_whole_record(client, runtime, spool_disk, caplog):
    assert client.post("/extender/default/filter", body("before"), content_type=JSON).status_code == 200
    alarms = failures("fail")
    with full(spool_disk), caplog.at_level(logging.ERROR, logger="dashboard.extender.calls"):
        response = client.post("/extender/default/filter", body("while-full"), content_type=JSON)

        assert response.status_code == 503
        assert json.loads(response.content) == {"error": "schedlens could not record this call (spool unavailable)"}
        assert failures("fail") == alarms + 1
        (logged,) = [r for r in caplog.records if "could not append the filter record" in r.getMessage()]
        assert '"pod_uid":"while-full"' in logged.getMessage(), "the record itself is in the log"
        assert "database or disk is full" in logged.exc_text

    assert client.post("/extender/default/filter", body("after"), content_type=JSON).status_code == 200
    assert spooled_uids(runtime) == ["before", "after"]


def test_with_the_answer_policy_the_call_is_answered_and_the_alarm_raised(
    client, runtime, spool_disk, settings, caplog
):
    settings.SCHEDLENS_SPOOL_FAILURE = "answer"
    alarms = failures("answer")
    with full(spool_disk), caplog.at_level(logging.ERROR, logger="dashboard.extender.calls"):
        response = client.post("/extender/default/filter", body("while-full"), content_type=JSON)

        assert response.status_code == 200
        assert json.loads(response.content)["NodeNames"] == ["node-1", "node-2"]
        assert failures("answer") == alarms + 1
        assert any('"pod_uid":"while-full"' in r.getMessage() for r in caplog.records)
    assert spooled_uids(runtime) == []


def test_the_alarm_is_exported_on_metrics(client, runtime, spool_disk):
    with full(spool_disk):
        client.post("/extender/default/filter", body("while-full"), content_type=JSON)
    text = client.get("/metrics").content.decode()
    assert 'schedlens_spool_append_failures_total{policy="fail",verb="filter"}' in text


def readiness(client) -> tuple[int, str]:
    response = client.get("/readyz")
    return response.status_code, json.loads(response.content).get("reason", "")


def test_readyz_is_503_while_appends_fail_and_200_again_once_one_succeeds(client, runtime, spool_disk):
    assert client.post("/extender/default/filter", body("before"), content_type=JSON).status_code == 200
    assert readiness(client) == (200, "")
    with full(spool_disk):
        assert readiness(client) == (200, ""), "a full disk alone is not seen: the probe writes nothing"
        assert client.post("/extender/default/filter", body("while-full"), content_type=JSON).status_code == 503

        status, reason = readiness(client)
        assert status == 503
        assert reason.startswith("spool cannot take appends: ")
        assert "database or disk is full" in reason
        assert runtime.spool.probe_write() is False, "no write of the failed record's size fits yet"
        assert readiness(client)[0] == 503

    assert client.post("/extender/default/filter", body("after"), content_type=JSON).status_code == 200
    assert readiness(client) == (200, "")
    assert spooled_uids(runtime) == ["before", "after"]


def test_readyz_recovers_without_any_verb_once_space_is_freed(client, runtime, spool_disk):
    # Unready, the replica leaves its Service: no verb would come to clear the failure. The checkpoint thread's
    # write probe does, and it writes a row only while the spool is failing.
    assert client.post("/extender/default/filter", body("before"), content_type=JSON).status_code == 200
    with full(spool_disk):
        assert client.post("/extender/default/filter", body("while-full"), content_type=JSON).status_code == 503
        assert readiness(client)[0] == 503
    assert runtime.spool.checkpoint_thread is not None
    assert runtime.spool.checkpoint_thread.is_alive()
    wait_for(lambda: readiness(client)[0] == 200, what="the checkpoint thread to find the spool writable again")
    assert spooled_uids(runtime) == ["before"], "the probe leaves no record behind"


def test_a_spool_that_cannot_be_written_at_all_keeps_the_server_from_starting(
    tmp_path: Path, spool_disk: Path, production_env: dict[str, str]
) -> None:
    readonly = tmp_path / "readonly"
    with tmpfs(readonly, "64k"):
        subprocess.run(["mount", "-o", "remount,ro", str(readonly)], check=True)
        env = {**production_env, "SCHEDLENS_SPOOL_DIR": str(readonly / "spool")}
        with pytest.raises(RuntimeError) as caught:
            Gunicorn(env, tmp_path / "gunicorn.log")
    assert f"the spool at {readonly / 'spool' / 'spool.sqlite3'} cannot be written" in str(caught.value)


def test_a_record_set_aside_on_a_full_disk_fails_with_the_disk_error_and_moves_once_there_is_space(spool_disk):
    # Setting a record aside copies it into the rejected table: on a full disk SQLite fails that statement and rolls
    # the transaction back by itself. The caller must see why, not "cannot rollback - no transaction is active".
    spool = Spool(spool_disk / "spool")
    try:
        refused = spool.append(b"r" * 200_000)  # a copy of this cannot fit once the disk is full
        spool.append(b"next")
        with full(spool_disk), pytest.raises(sqlite3.OperationalError, match="database or disk is full"):
            spool.reject(refused, "the database refused it")

        spool.reject(refused, "the database refused it")  # the connection is usable again: no transaction left open
        assert [(row_id, error) for row_id, _, error in spool.rejected()] == [(refused, "the database refused it")]
        assert [row.data for row in spool.read_rows(10)] == [b"next"]
    finally:
        spool.close()  # before the tmpfs goes
