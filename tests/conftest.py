"""Fixtures of the whole suite, and those tests of more than one directory use: the protocol captures, cycles
recorded like kube-scheduler's, a production-like environment, and a real Prometheus holding counters the tests wrote.

Helpers are in ``tests/support``; a fixture used by one directory only lives in that directory's conftest."""

from __future__ import annotations

import faulthandler
import json
import os
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from scheduler_core.cli.simulator import SyntheticCluster, make_cluster
from tests.support.kube_scheduler import TRAFFIC, KubeScheduler
from tests.support.paths import CAPTURES
from tests.support.processes import free_port, production_environment
from tests.support.prometheus_data import TrafficData, make_traffic_data
from tests.support.prometheus_server import (
    PrometheusServer,
    PrometheusUnavailable,
    Series,
    require_binaries,
    start_prometheus,
)

# The explanation property tests' shared helpers are plain modules: have pytest rewrite their asserts too, so a
# failure shows the values compared.
pytest.register_assert_rewrite("tests.support.explained_cycles", "tests.support.explanation_checks")

# A `make run` or `make serve` of the checkout names its state directory in var/current, which manage.py follows
# (config.server_env): the tests' commands and scripts use a root of their own, never the developer's servers.
TESTS_VAR_ROOT = Path(tempfile.mkdtemp(prefix="schedlens-tests-var-"))
os.environ["SCHEDLENS_VAR_ROOT"] = str(TESTS_VAR_ROOT)


@pytest.fixture(autouse=True)
def _no_server_env_shared_between_tests() -> Iterator[None]:
    """A test that starts ``make run`` or ``make serve`` gives it a root of its own: one left in the shared root
    would fill the variables of every later test's ``manage.py``."""
    yield
    pointer = TESTS_VAR_ROOT / "current"
    if pointer.exists():
        pointer.unlink()
        pytest.fail("a script wrote var/current in the tests' shared root: give it SCHEDLENS_VAR_ROOT=tmp_path")


EXIT_DEADLINE_SECONDS = 300
"""After the last test: time for the process to exit before every thread's stack is printed and it is ended."""


def pytest_unconfigure(config: pytest.Config) -> None:
    # A thread or child process that never ends would keep the run alive until CI kills it, silently: name it
    # instead (and fail, exit status 1), whatever the tests' outcome.
    faulthandler.dump_traceback_later(EXIT_DEADLINE_SECONDS, exit=True, file=sys.__stderr__)


@pytest.fixture
def captures() -> Path:
    assert CAPTURES.is_dir(), f"the kube-scheduler captures are expected at {CAPTURES}"
    return CAPTURES


# --- cycles recorded like kube-scheduler's (the audit API, the audit chain, the kubectl plugin) -----------------------


@pytest.fixture
def kube_scheduler() -> KubeScheduler:
    return KubeScheduler(dict(TRAFFIC))


# --- a production-like schedlens process (the fault tests, the extender's isolation) ------------------------------

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


# --- a real Prometheus holding the counters of ``tests/support/prometheus_data.py`` ---------------------------------


def _start(series: tuple[Series, ...], workdir: Path) -> PrometheusServer:
    try:
        require_binaries()
        return start_prometheus(series, workdir)
    except PrometheusUnavailable as exc:
        pytest.fail(str(exc), pytrace=False)


# Module scope, not session: the data lie around the moment they were made (a reset 150 s before it, samples until
# 10 minutes after), and the tests query "now". Shared by a whole session, a module running minutes after the first
# one queried data that had moved out of its window.
@pytest.fixture(scope="module")
def traffic_data() -> TrafficData:
    return make_traffic_data(int(time.time()))


@pytest.fixture(scope="module")
def prometheus_url(traffic_data: TrafficData, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """URL of a Prometheus holding :func:`traffic_data`, shared by a test module; tests must not disturb it."""
    server = _start(traffic_data.series, tmp_path_factory.mktemp("prometheus"))
    yield server.url
    server.stop()


@pytest.fixture
def own_prometheus(traffic_data: TrafficData, tmp_path: Path) -> Iterator[PrometheusServer]:
    """A Prometheus of the test's own, for tests that pause or stop it."""
    server = _start(traffic_data.series, tmp_path)
    yield server
    server.stop()


@pytest.fixture
def closed_port_url() -> str:
    """A loopback URL where nothing listens, so connecting is refused at once."""
    return f"http://127.0.0.1:{free_port()}"
