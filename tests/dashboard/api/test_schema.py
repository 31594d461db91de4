"""The OpenAPI schema: committed and current, served, and holding up against generated requests."""

from __future__ import annotations

import io
from collections.abc import Iterator
from datetime import timedelta

import pytest
import schemathesis
import yaml
from django.core.management import call_command
from django.core.signals import request_finished, request_started
from django.core.wsgi import get_wsgi_application
from django.db import close_old_connections
from hypothesis import HealthCheck, Phase, given
from hypothesis import settings as hypothesis_settings
from schemathesis.checks import not_a_server_error
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    response_schema_conformance,
    status_code_conformance,
)

from tests.support.api_client import token_client
from tests.support.kube_scheduler import NODES, T0
from tests.support.paths import REPO

COMMITTED = REPO / "docs" / "openapi.yaml"
REGENERATE = ".venv/bin/python manage.py spectacular --file docs/openapi.yaml"
EXAMPLES_PER_OPERATION = 30


def test_the_committed_schema_is_the_one_the_code_generates():
    out = io.StringIO()
    call_command("spectacular", "--validate", "--fail-on-warn", stdout=out)
    assert COMMITTED.read_text(encoding="utf-8") == out.getvalue(), f"docs/openapi.yaml is stale: run {REGENERATE}"


@pytest.mark.django_db
def test_the_schema_is_served_to_auditors(api):
    response = api.get("/api/schema/", HTTP_ACCEPT="application/vnd.oai.openapi+json")
    assert response.status_code == 200
    assert "/api/v1/why/" in response.json()["paths"]


@pytest.fixture
def wsgi_app() -> Iterator[object]:
    """The real WSGI application, minus the per-request connection recycling that would end the test's
    transaction (Django's test client leaves it out the same way)."""
    request_started.disconnect(close_old_connections)
    request_finished.disconnect(close_old_connections)
    try:
        yield get_wsgi_application()
    finally:
        request_started.connect(close_old_connections)
        request_finished.connect(close_old_connections)


@pytest.mark.django_db
def test_generated_requests_with_an_auditor_token_never_get_a_500(auditor, kube_scheduler, wsgi_app, settings):
    rates = {"anon": "1000/second", "user": "1000/second", "audit-verify": "1000/second"}
    rates["replay-start"] = "1000/second"
    settings.REST_FRAMEWORK = {**settings.REST_FRAMEWORK, "DEFAULT_THROTTLE_RATES": rates}
    for i in range(3):
        kube_scheduler.schedule(at=T0 + timedelta(minutes=i), name=f"web-{i}")
    kube_scheduler.schedule(at=T0, name="gpu-1", gpu=True, profile="gpu-aware", nodes=[*NODES, "node-6"])
    authorization = token_client(auditor)._credentials["HTTP_AUTHORIZATION"]
    schema = schemathesis.openapi.from_dict(yaml.safe_load(COMMITTED.read_text(encoding="utf-8")))
    checks = [not_a_server_error, status_code_conformance, content_type_conformance, response_schema_conformance]

    operations = [result.ok() for result in schema.get_all_operations()]
    # 14 + the history replays' list, detail and start + the pending list and pod + a cycle's outcome and the balance
    # + the profile versions' list and one
    assert len(operations) == 23
    for operation in operations:

        @given(case=operation.as_strategy())
        @hypothesis_settings(
            max_examples=EXAMPLES_PER_OPERATION,
            deadline=None,
            database=None,
            phases=[Phase.explicit, Phase.generate],
            suppress_health_check=list(HealthCheck),
        )
        def exercise(case) -> None:
            response = case.call(app=wsgi_app, headers={"Authorization": authorization})
            case.validate_response(response, checks=checks)

        exercise()
