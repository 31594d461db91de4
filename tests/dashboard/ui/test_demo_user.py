"""The demo login exists only where binds are simulated, and there it also reads the audit API."""

from __future__ import annotations

import io
import re

import pytest
from django.contrib.auth import authenticate
from django.core.management import CommandError, call_command

from dashboard.audit.auditors import AUDITOR_GROUP
from dashboard.ui.middleware import POLICY

pytestmark = pytest.mark.django_db


def test_the_demo_gets_a_demo_login(settings, capsys):
    settings.SCHEDLENS_BIND_MODE = "simulated"
    call_command("ensure_demo_user")
    call_command("ensure_demo_user")  # idempotent: resets the password instead of failing
    user = authenticate(username="demo", password="demo")
    assert user is not None
    assert user.is_staff
    assert "user demo, password demo" in capsys.readouterr().out


def test_a_real_deployment_refuses_the_demo_login(settings):
    settings.SCHEDLENS_BIND_MODE = "kubernetes"
    with pytest.raises(CommandError, match="SCHEDLENS_BIND_MODE=simulated"):
        call_command("ensure_demo_user")
    assert authenticate(username="demo", password="demo") is None


def test_the_demo_login_reads_the_audit_api_as_an_auditor(settings, client):
    """``make run``'s demo/demo opens /api/docs/ and the browsable API: the command makes it an auditor."""
    settings.SCHEDLENS_BIND_MODE = "simulated"
    call_command("ensure_demo_user", stdout=io.StringIO())
    call_command("ensure_demo_user", stdout=io.StringIO())
    user = authenticate(username="demo", password="demo")
    assert user is not None
    assert list(user.groups.values_list("name", flat=True)) == [AUDITOR_GROUP]

    assert client.login(username="demo", password="demo")
    assert client.get("/api/v1/cycles/", HTTP_ACCEPT="application/json").status_code == 200
    browsable = client.get("/api/v1/cycles/", HTTP_ACCEPT="text/html")
    assert browsable.status_code == 200
    assert browsable["Content-Type"].startswith("text/html")
    assert client.get("/api/schema/").status_code == 200
    docs = client.get("/api/docs/")
    assert docs.status_code == 200
    assert '<script src="/api/docs/?script="></script>' in docs.content.decode()  # Swagger UI's init, not inline
    script = client.get("/api/docs/?script=")
    assert script.status_code == 200
    assert script["Content-Type"].startswith("application/javascript")


def test_the_browsable_api_and_swagger_ui_carry_no_inline_style_or_script(settings, client):
    """What the Content-Security-Policy would refuse, checked in the HTML itself (the browser test sees it too)."""
    settings.SCHEDLENS_BIND_MODE = "simulated"
    call_command("ensure_demo_user", stdout=io.StringIO())
    assert client.login(username="demo", password="demo")
    for path in ("/api/v1/cycles/", "/api/v1/nodes/?ordering=-placements", "/api/docs/"):
        response = client.get(path, HTTP_ACCEPT="text/html")
        assert response.status_code == 200, path
        assert response["Content-Security-Policy"] == POLICY, path
        body = response.content.decode()
        assert not re.search(r"<style\b", body, flags=re.IGNORECASE), path
        assert not re.search(r"\sstyle\s*=", body, flags=re.IGNORECASE), path
        assert not re.search(r"<script(?![^>]*\bsrc=)(?![^>]*application/json)", body), path
    assert "unsafe-inline" not in POLICY
