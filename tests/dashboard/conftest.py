"""Fixtures of the app's tests: a per-test runtime, personas with tokens, the audit API's settings, and the real
Redis and Celery worker of the traffic prefetch.

- Redis is the suite's (``REDIS_URL``, db 15 under ``make test``). Each test gets its own key prefix and
  deletes everything under it at start and end: that is this suite's "flush", and unlike ``FLUSHDB`` it
  leaves alone the Celery broker queue living in the same database and any other suite running beside us.
- The Celery worker is a real one (``celery.contrib.testing.worker.start_worker``: the worker machinery in a
  thread, consuming from Redis), on a queue of its own; never eager mode. Tests wait for its effects by
  polling with a deadline.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest
import redis
from celery.contrib.testing.worker import start_worker
from celery.signals import task_postrun
from django.contrib.auth.models import Group, User
from django.core.cache import cache
from django.db import connections
from rest_framework.test import APIClient

from dashboard import runtime as runtime_module
from dashboard.audit.auditors import AUDITOR_GROUP
from tests.support.api_client import token_client
from tests.support.inputs import traffic_store
from tests.support.kube_scheduler import PROFILES


@pytest.fixture
def runtime_without_traffic(settings, tmp_path, monkeypatch):
    """A fresh per-test runtime: its own spool, the demo binder, no traffic refreshed yet."""
    settings.SCHEDLENS_SPOOL_DIR = tmp_path / "spool"
    settings.SCHEDLENS_INGEST_IN_PROCESS = False
    settings.SCHEDLENS_BIND_MODE = "simulated"
    settings.SCHEDLENS_CONFIG = ""
    settings.SCHEDLENS_CLUSTER_FILE = ""
    runtime = runtime_module.Runtime()
    monkeypatch.setattr(runtime_module, "_runtime", runtime)
    yield runtime
    runtime.spool.close()


@pytest.fixture
def runtime(runtime_without_traffic):
    """:func:`runtime_without_traffic` with traffic the test controls."""
    runtime = runtime_without_traffic
    quiet = traffic_store({"node-1": 4.0e6, "node-2": 1.0e6, "node-3": 2.0e6})
    runtime.traffic.put(quiet.latest(next(iter(runtime.profiles["default"].traffic_queries()))))
    runtime.extender.traffic = runtime.traffic
    return runtime


# --- the audit API: its settings and personas ------------------------------------------------------------------


@pytest.fixture
def api_settings(settings, tmp_path) -> Iterator[None]:
    """The profiles of ``tests.support.kube_scheduler``, and throttle counters that start at zero."""
    config = tmp_path / "profiles.yaml"
    config.write_text(PROFILES, encoding="utf-8")
    settings.SCHEDLENS_CONFIG = str(config)
    cache.clear()
    yield
    cache.clear()


@pytest.fixture
def auditor(db) -> User:
    user = User.objects.create_user("ada-auditor")
    user.groups.add(Group.objects.get_or_create(name=AUDITOR_GROUP)[0])
    return user


@pytest.fixture
def outsider(db) -> User:
    """Authenticated, active, not an auditor."""
    return User.objects.create_user("oscar-outsider")


@pytest.fixture
def superuser(db) -> User:
    return User.objects.create_superuser("sam-super", password="not-used")


@pytest.fixture
def api(auditor) -> APIClient:
    """An auditor's token client: what most tests read through."""
    return token_client(auditor)


@pytest.fixture
def fast_api(api: APIClient, settings) -> APIClient:
    """The auditor's client, with throttles out of the way (a hundred-odd requests in one test)."""
    rates = {"anon": "100000/second", "user": "100000/second", "audit-verify": "100000/second"}
    settings.REST_FRAMEWORK = {**settings.REST_FRAMEWORK, "DEFAULT_THROTTLE_RATES": rates}
    return api


# --- Redis and Celery of the traffic prefetch ------------------------------------------------------------------


@pytest.fixture
def redis_prefix(settings) -> Iterator[str]:
    """A key prefix of this test's own, empty at start and deleted at the end."""

    def delete_prefix(client: redis.Redis, prefix: str) -> None:
        keys = list(client.scan_iter(match=f"{prefix}*", count=500))
        if keys:
            client.delete(*keys)

    prefix = f"schedlens-test:{uuid.uuid4().hex[:12]}:"
    settings.SCHEDLENS_REDIS_PREFIX = prefix
    client = redis.Redis.from_url(settings.REDIS_URL)
    delete_prefix(client, prefix)
    yield prefix
    delete_prefix(client, prefix)
    client.close()


def _close_connections(**kwargs: object) -> None:
    # The worker thread's database connections would otherwise outlive the test database.
    connections.close_all()


@pytest.fixture(scope="session")
def celery_worker() -> Iterator[object]:
    """A real Celery worker consuming from Redis, in a thread of this process, on a queue of its own."""
    from config.celery import app

    app.conf.task_default_queue = f"schedlens-test-{uuid.uuid4().hex[:12]}"
    task_postrun.connect(_close_connections, weak=False)
    try:
        with start_worker(app, pool="solo", perform_ping_check=False, shutdown_timeout=30.0, loglevel="WARNING"):
            yield app
    finally:
        task_postrun.disconnect(_close_connections)
