"""Fixtures of the fault suite: a synthetic cluster, the environment of a production-like schedlens process.

The processes under test (gunicorn, the spool ingester, Celery workers) are real subprocesses started from
``tests/faults/services.py``; the database they write is the test database, so tests using them need a committed
database (``django_db(transaction=True)``) and stop them before it is flushed.
"""

from __future__ import annotations

import json
import secrets
from pathlib import Path

import pytest

from scheduler_core.simulator import SyntheticCluster, make_cluster
from tests.traffic.conftest import own_prometheus, prometheus_url, traffic_data  # noqa: F401  (fixtures)

CLUSTER_NODES = 12


@pytest.fixture(scope="session")
def cluster() -> SyntheticCluster:
    return make_cluster(CLUSTER_NODES)


@pytest.fixture
def cluster_file(tmp_path: Path, cluster: SyntheticCluster) -> Path:
    path = tmp_path / "cluster.json"
    path.write_text(json.dumps(cluster.document()))
    return path


@pytest.fixture
def production_env(tmp_path: Path, cluster_file: Path) -> dict[str, str]:
    return production_environment(tmp_path, cluster_file)


def production_environment(directory: Path, cluster_file: Path) -> dict[str, str]:
    """What a web replica runs with in the cluster, minus the cluster: DEBUG off, a real secret key, the ingest
    in its own process, simulated binds against the synthetic cluster, built-in profile, synthetic traffic."""
    return {
        "DJANGO_DEBUG": "false",
        "DJANGO_SECRET_KEY": secrets.token_urlsafe(50),
        "SCHEDLENS_SPOOL_DIR": str(directory / "spool"),
        "SCHEDLENS_INGEST_IN_PROCESS": "false",
        "SCHEDLENS_BIND_MODE": "simulated",
        "SCHEDLENS_CLUSTER_FILE": str(cluster_file),
        "SCHEDLENS_CLUSTER_SOURCE": "file",
        "SCHEDLENS_CONFIG": "",
        "SCHEDLENS_TRAFFIC_BACKEND": "inprocess",
        "PROMETHEUS_URL": "",
        # As deployed: gunicorn's workers meet in an empty directory (an empty value would mean the cwd).
        "PROMETHEUS_MULTIPROC_DIR": str(_empty(directory / "prometheus-multiproc")),
    }


def _empty(path: Path) -> Path:
    path.mkdir(parents=True, exist_ok=True)
    return path
