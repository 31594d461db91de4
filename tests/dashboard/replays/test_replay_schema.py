"""The replays' part of the committed OpenAPI schema holds up against generated requests
(as ``tests/dashboard/api/test_schema.py`` checks the rest): never a 500,
only the documented statuses, bodies as documented."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import schemathesis
import yaml
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

from dashboard.replays.models import HistoryReplay
from dashboard.replays.services import history_replay_run, history_replay_start
from tests.support.paths import REPO

COMMITTED = REPO / "docs" / "openapi.yaml"


@pytest.fixture
def wsgi_app() -> Iterator[object]:
    request_started.disconnect(close_old_connections)
    request_finished.disconnect(close_old_connections)
    try:
        yield get_wsgi_application()
    finally:
        request_started.connect(close_old_connections)
        request_finished.connect(close_old_connections)


@pytest.mark.django_db
def test_generated_requests_to_the_replays_never_get_a_500(api, recorded, wsgi_app, settings):
    rates = {"anon": "1000/second", "user": "1000/second", "audit-verify": "1/second", "replay-start": "1000/second"}
    settings.REST_FRAMEWORK = {**settings.REST_FRAMEWORK, "DEFAULT_THROTTLE_RATES": rates}
    done = history_replay_run(history_replay_start(selection={"last": "5"}, candidate_profile="default").pk)
    authorization = api._credentials["HTTP_AUTHORIZATION"]
    schema = schemathesis.openapi.from_dict(yaml.safe_load(COMMITTED.read_text(encoding="utf-8")))
    checks = [not_a_server_error, status_code_conformance, content_type_conformance, response_schema_conformance]
    operations = [r.ok() for r in schema.get_all_operations() if r.ok().path.startswith("/api/v1/replays/")]
    assert sorted(f"{o.method.upper()} {o.path}" for o in operations) == [
        "GET /api/v1/replays/",
        "GET /api/v1/replays/{id}/",
        "POST /api/v1/replays/",
    ]
    for operation in operations:

        @given(case=operation.as_strategy())
        @hypothesis_settings(
            max_examples=40,
            deadline=None,
            database=None,
            phases=[Phase.explicit, Phase.generate],
            suppress_health_check=list(HealthCheck),
        )
        def exercise(case) -> None:
            if "id" in (case.path_parameters or {}) and case.path_parameters["id"] == 0:
                case.path_parameters["id"] = done.pk  # now and then, one that exists, with its report
            response = case.call(app=wsgi_app, headers={"Authorization": authorization})
            case.validate_response(response, checks=checks)

        exercise()
    assert HistoryReplay.objects.filter(status="done").exists()
