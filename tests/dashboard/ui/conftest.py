"""Dashboard view-test fixtures: the demo profiles, a recorder of real cycles, a signed-in operator."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.recording import Recorder, use_demo_profiles


@pytest.fixture
def dashboard_settings(settings, tmp_path: Path):
    use_demo_profiles(settings, tmp_path / "spool")
    return settings


@pytest.fixture
def recorder(dashboard_settings) -> Recorder:
    return Recorder()


@pytest.fixture
def operator(django_user_model):
    return django_user_model.objects.create_user(username="olga", password="correct horse battery staple")


@pytest.fixture
def signed_in(client, operator):
    client.force_login(operator)
    return client
