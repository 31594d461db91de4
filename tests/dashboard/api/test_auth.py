"""Who may read the audit API, and that nobody can write through it (but start a history replay)."""

from __future__ import annotations

import io

import pytest
from django.contrib.auth.models import User
from django.core.management import call_command
from django.urls import URLPattern, URLResolver, get_resolver
from rest_framework.authtoken.models import Token
from rest_framework.test import APIClient

from dashboard.api.views import api_not_found
from dashboard.placements.models import WaitingPod
from tests.support.api_client import token_client
from tests.support.kube_scheduler import T0

WRITES = ["post", "put", "patch", "delete"]


@pytest.fixture
def routes(kube_scheduler) -> list[str]:
    """Every GET route of the API, with real ids."""
    cycle = kube_scheduler.schedule(at=T0, name="web-1")
    WaitingPod.objects.create(
        pod_uid="uid-waiting", pod_namespace="shop", pod_name="waiting-1", waiting_since=T0, seen_at=T0
    )
    return [
        "/api/v1/cycles/",
        f"/api/v1/cycles/{cycle.id}/",
        "/api/v1/cycles/export.csv",
        "/api/v1/cycles/export.ndjson",
        "/api/v1/nodes/",
        "/api/v1/nodes/node-2/",
        "/api/v1/profiles/",
        "/api/v1/profiles/default/",
        "/api/v1/why/?namespace=shop&name=web-1",
        "/api/v1/pending/",
        "/api/v1/pending/shop/waiting-1/",
        "/api/v1/audit/verify",
        "/api/schema/",
        "/api/docs/",
    ]


@pytest.mark.django_db
def test_anonymous_requests_get_401_with_a_token_challenge(routes):
    client = APIClient()
    for route in routes:
        response = client.get(route)
        assert response.status_code == 401, route
        assert response["WWW-Authenticate"] == "Token", route


@pytest.mark.django_db
def test_a_bad_token_gets_401(routes):
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION="Token " + "0" * 40)
    assert client.get(routes[0]).status_code == 401


@pytest.mark.django_db
def test_an_authenticated_user_outside_the_auditor_group_gets_403(routes, outsider):
    client = token_client(outsider)
    for route in routes:
        response = client.get(route)
        assert response.status_code == 403, route
        if route.startswith("/api/v1/"):
            assert "auditor" in response.json()["error"], route


@pytest.mark.django_db
@pytest.mark.parametrize("persona", ["auditor", "superuser"])
def test_auditors_and_superusers_read_every_route(routes, persona, request):
    client = token_client(request.getfixturevalue(persona))
    for route in routes:
        assert client.get(route).status_code == 200, route


@pytest.mark.django_db
def test_an_auditor_session_reads_like_a_token(routes, auditor):
    client = APIClient()
    client.force_login(auditor)
    assert client.get(routes[0]).status_code == 200


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("persona", "expected"), [(None, 401), ("outsider", 403), ("auditor", 405), ("superuser", 405)]
)
def test_every_write_method_is_refused_for_everyone(routes, persona, expected, request):
    client = token_client(request.getfixturevalue(persona) if persona else None)
    for route in routes:
        for method in WRITES:
            response = getattr(client, method)(route, {"outcome": "bound"}, format="json")
            assert response.status_code == expected, (method, route)


def _api_patterns(patterns: list, prefix: str = "") -> list[tuple[str, object]]:
    found: list[tuple[str, object]] = []
    for pattern in patterns:
        if isinstance(pattern, URLResolver):
            found += _api_patterns(pattern.url_patterns, prefix + str(pattern.pattern))
        elif isinstance(pattern, URLPattern):
            found.append((prefix + str(pattern.pattern), pattern.callback))
    return [(route, view) for route, view in found if route.startswith("api/")]


def test_no_api_route_has_a_write_handler():
    routes = _api_patterns(get_resolver().url_patterns)
    assert len(routes) >= 10
    for route, view in routes:
        actions = getattr(view, "actions", None)
        if view is api_not_found:
            continue  # answers 404 to everything
        if actions is not None:  # a viewset: the methods its router mapped
            # The one write: starting a history replay, which writes nothing but the replay's row.
            allowed = {"get", "head", "options"} | ({"post"} if route == "api/v1/^replays/$" else set())
            assert set(actions) <= allowed, route
        else:
            view_class = view.cls  # type: ignore[attr-defined]
            assert not [m for m in WRITES if hasattr(view_class, m)], route


@pytest.mark.django_db
def test_throttling_answers_429_with_retry_after_past_the_user_rate(api, settings, routes):
    settings.REST_FRAMEWORK = {
        **settings.REST_FRAMEWORK,
        "DEFAULT_THROTTLE_RATES": {**settings.REST_FRAMEWORK["DEFAULT_THROTTLE_RATES"], "user": "2/minute"},
    }
    assert [api.get(routes[0]).status_code for _ in range(3)] == [200, 200, 429]
    assert int(api.get(routes[0])["Retry-After"]) > 0


@pytest.mark.django_db
def test_verification_has_its_own_tighter_budget(api, settings, routes):
    settings.REST_FRAMEWORK = {
        **settings.REST_FRAMEWORK,
        "DEFAULT_THROTTLE_RATES": {**settings.REST_FRAMEWORK["DEFAULT_THROTTLE_RATES"], "audit-verify": "1/hour"},
    }
    assert [api.get("/api/v1/audit/verify").status_code for _ in range(2)] == [200, 429]
    assert api.get(routes[0]).status_code == 200, "other routes keep the user budget"


@pytest.mark.django_db
def test_create_audit_token_makes_an_auditor_and_prints_a_working_token(routes):
    out = io.StringIO()
    call_command("create_audit_token", "carol", stdout=out, stderr=io.StringIO())
    key = out.getvalue().strip()
    assert User.objects.get(username="carol").groups.filter(name="auditor").exists()
    assert not User.objects.get(username="carol").has_usable_password()
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {key}")
    assert client.get(routes[0]).status_code == 200


@pytest.mark.django_db
def test_create_audit_token_returns_the_same_token_until_rotated():
    def issue(*flags: str) -> str:
        out = io.StringIO()
        call_command("create_audit_token", "carol", *flags, stdout=out, stderr=io.StringIO())
        return out.getvalue().strip()

    first = issue()
    assert issue() == first
    rotated = issue("--rotate")
    assert rotated != first
    assert list(Token.objects.values_list("key", flat=True)) == [rotated]


@pytest.mark.django_db
def test_an_existing_user_joins_the_auditor_group_and_keeps_their_password(outsider):
    outsider.set_password("kept")
    outsider.save()
    call_command("create_audit_token", outsider.username, stdout=io.StringIO(), stderr=io.StringIO())
    outsider.refresh_from_db()
    assert outsider.check_password("kept")
    assert outsider.groups.filter(name="auditor").exists()


@pytest.mark.django_db
def test_the_docs_page_loads_its_assets_from_the_app_not_a_cdn(auditor):
    client = APIClient()
    client.force_login(auditor)
    page = client.get("/api/docs/").content.decode()
    assert "drf_spectacular_sidecar/swagger-ui-dist" in page
    assert "cdn." not in page
    assert "unpkg" not in page


@pytest.mark.django_db
def test_an_unknown_api_path_is_a_json_404(api):
    response = api.get("/api/v1/cycles/not.a.cycle/")
    assert response.status_code == 404
    assert response.json() == {"error": "no such API route"}
