"""The demo login exists only where binds are simulated."""

from __future__ import annotations

import pytest
from django.contrib.auth import authenticate
from django.core.management import CommandError, call_command

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
