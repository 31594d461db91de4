"""The extender's URL prefix leads to the four verbs and nowhere else.

kube-scheduler's ``urlPrefix`` is plain string concatenation (protocol doc §2.1) and the dashboard and API share
the extender's port, so: no dot segments, encoded slashes, doubled slashes, odd profile names or path parameters
under ``/extender/`` reach the dashboard or the API. Sent raw to gunicorn, so no client normalizes the path
first. Any API route answers an anonymous request 401 with ``WWW-Authenticate`` and any dashboard page redirects
to the login: neither may ever come back from under ``/extender/``.
"""

from __future__ import annotations

import http.client
import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from dashboard.audit.auditors import auditor_token_issue
from dashboard.ingest.spool_ingest import spool_ingest
from dashboard.models import SchedulingCycle
from dashboard.spool import Spool
from scheduler_core.cli.simulator import make_cluster
from tests.support.processes import Gunicorn, database_url, production_environment, wait_for

TRICKS = [
    "/extender/default/../api/v1/cycles/",
    "/extender/default/../../api/v1/cycles/",
    "/extender/default/filter/../../../api/v1/cycles/",
    "/extender/%2e%2e/%2e%2e/api/v1/cycles/",
    "/extender/default/%2e%2e/%2e%2e/api/v1/cycles/",
    "/extender/..%2F..%2Fapi%2Fv1%2Fcycles%2F/filter",
    "/extender/default%2F..%2F..%2Fapi%2Fv1%2Fcycles/filter",
    "/extender//api/v1/cycles/",
    "/extender/default//api/v1/cycles/",
    "//api/v1/cycles/",
    "/extender/default/filter;/api/v1/cycles/",
    "/extender/default/filter%00/api/v1/cycles/",
    "/extender/default/filter/api/v1/cycles/",
    "/extender/default/admin/",
    "/extender/default/../admin/",
    "/extender/default/..%2Faccounts%2Flogin%2F",
    "/extender/api/v1/cycles/",
    "/extender/default/filter?next=/api/v1/cycles/",
]
ODD_PROFILES = ["..", ".", "%2e%2e", "%00", "api", "admin", "..%2F..", "%252e%252e"]


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Gunicorn, Spool]]:
    directory = tmp_path_factory.mktemp("isolation")
    cluster_file = directory / "cluster.json"
    cluster_file.write_text(json.dumps(make_cluster(3).document()))
    env = production_environment(directory, cluster_file)
    gunicorn = Gunicorn(env, directory / "gunicorn.log")
    yield gunicorn, Spool(env["SCHEDLENS_SPOOL_DIR"])
    gunicorn.stop()


def raw(server: Gunicorn, method: str, path: str, token: str = "") -> http.client.HTTPResponse:
    conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=10)
    conn.putrequest(method, path, skip_host=True, skip_accept_encoding=True)
    conn.putheader("Host", f"127.0.0.1:{server.port}")
    if token:
        conn.putheader("Authorization", f"Token {token}")
    conn.putheader("Content-Type", "application/json")
    body = b'{"Pod":{},"Nodes":null,"NodeNames":["a"]}'
    conn.putheader("Content-Length", str(len(body)))
    conn.endheaders(body)
    response = conn.getresponse()
    response.body = response.read()  # type: ignore[attr-defined]
    conn.close()
    return response


@pytest.mark.django_db(transaction=True)
def test_an_auditor_token_reads_the_api_when_asked_directly(settings, tmp_path: Path, production_env) -> None:
    env = {**production_env, "DATABASE_URL": database_url(settings.DATABASES["default"])}
    gunicorn = Gunicorn(env, tmp_path / "gunicorn.log")
    try:
        token = auditor_token_issue(username="ada-auditor").key
        assert raw(gunicorn, "GET", "/api/v1/cycles/").status == 401, "and anonymously gets a 401"
        for path in TRICKS[:6]:
            response = raw(gunicorn, "GET", path, token)
            assert response.status in (400, 404), path
            assert b'"results"' not in response.body  # type: ignore[attr-defined]
        response = raw(gunicorn, "GET", "/api/v1/cycles/", token)
    finally:
        gunicorn.stop()
    assert response.status == 200
    assert "results" in json.loads(response.body)  # type: ignore[attr-defined]


def test_the_api_and_the_dashboard_show_themselves_to_an_anonymous_client(server) -> None:
    gunicorn, _ = server
    api = raw(gunicorn, "GET", "/api/v1/cycles/")
    assert (api.status, api.headers["WWW-Authenticate"]) == (401, "Token")
    dashboard = raw(gunicorn, "GET", "/")
    assert dashboard.status == 302
    assert dashboard.headers["Location"].startswith("/accounts/login/")


@pytest.mark.parametrize("path", TRICKS)
@pytest.mark.parametrize("method", ["GET", "POST"])
def test_no_path_under_the_extender_prefix_reaches_the_api_or_the_dashboard(server, method: str, path: str) -> None:
    gunicorn, _ = server
    response = raw(gunicorn, method, path)
    assert response.status in (400, 404, 405, 415) or (response.status == 200 and "?next=" in path), response.status
    assert "WWW-Authenticate" not in response.headers, "an API route answered"
    assert "Location" not in response.headers, "a dashboard page answered"
    assert b"csrfmiddlewaretoken" not in response.body  # type: ignore[attr-defined]


@pytest.mark.django_db
@pytest.mark.parametrize("profile", ODD_PROFILES)
def test_odd_profile_names_are_unknown_profiles_answered_404_and_recorded(server, profile: str) -> None:
    gunicorn, spool = server
    spool_ingest(spool=spool, confirm_grace_seconds=0)  # what earlier tests left
    SchedulingCycle.objects.all().delete()
    response = raw(gunicorn, "POST", f"/extender/{profile}/filter")
    status, data = response.status, response.body  # type: ignore[attr-defined]
    if status == 404 and data.startswith(b"{"):
        assert json.loads(data)["error"].startswith("unknown profile")
        wait_for(lambda: spool.depth() == 1 and spool.read_rows(1)[0].answered, what="the refusal recorded")
        assert spool_ingest(spool=spool) == 1
        assert SchedulingCycle.objects.get().error.startswith("filter: unknown profile")
    else:
        assert status in (400, 404), (status, data[:200])  # the path itself did not resolve
        assert b'"results"' not in data
