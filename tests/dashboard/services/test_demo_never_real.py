"""Nothing of the demo reaches a real cluster: its published login neither starts a server nor logs in where binds
are real, and one database never holds both a demo's simulated history and a real cluster's chain."""

from __future__ import annotations

import io
import uuid

import pytest
from django.contrib.auth import authenticate, get_user_model
from django.core.management import call_command
from django.core.management.base import SystemCheckError

from dashboard.audit.chain import ChainOriginMismatch, chain_origin_conflict
from dashboard.ingest.spool_ingest import spool_ingest
from dashboard.models import ChainOrigin, VerbCall
from dashboard.services.demo_login import DEMO_PASSWORD, DEMO_USERNAME
from tests.support.extender_requests import args, call, pod

pytestmark = pytest.mark.django_db


def test_a_user_with_the_demos_password_stops_a_real_cluster_from_starting(settings):
    settings.SCHEDLENS_BIND_MODE = "simulated"
    call_command("ensure_demo_user", stdout=io.StringIO())
    call_command("check", databases=["default"], stdout=io.StringIO())  # the demo itself starts

    settings.SCHEDLENS_BIND_MODE = "kubernetes"
    with pytest.raises(SystemCheckError) as refused:
        call_command("check", databases=["default"], stdout=io.StringIO())
    message = str(refused.value)
    assert "schedlens.E002" in message
    assert f"user(s) {DEMO_USERNAME} have the demo's published password" in message
    assert "manage.py changepassword" in message, "it says what to do"
    with pytest.raises(SystemCheckError, match=r"schedlens\.E002"):
        call_command("migrate", skip_checks=False, stdout=io.StringIO())  # as manage.py migrate runs them


def test_any_user_with_the_demos_password_counts_and_a_new_password_lets_the_server_start(settings):
    settings.SCHEDLENS_BIND_MODE = "kubernetes"
    alice = get_user_model().objects.create_user("alice", password=DEMO_PASSWORD)
    get_user_model().objects.create_user("bob", password="a-password-of-bobs-own")
    with pytest.raises(SystemCheckError, match=r"user\(s\) alice have"):
        call_command("check", databases=["default"], stdout=io.StringIO())
    alice.set_password("another-one")
    alice.save()
    call_command("check", databases=["default"], stdout=io.StringIO())


def test_the_demos_password_never_logs_in_where_binds_are_real(settings, client):
    settings.SCHEDLENS_BIND_MODE = "simulated"
    call_command("ensure_demo_user", stdout=io.StringIO())
    assert authenticate(username=DEMO_USERNAME, password=DEMO_PASSWORD) is not None

    settings.SCHEDLENS_BIND_MODE = "kubernetes"  # the user was left behind on a real cluster's database
    assert authenticate(username=DEMO_USERNAME, password=DEMO_PASSWORD) is None
    response = client.post("/accounts/login/", {"username": DEMO_USERNAME, "password": DEMO_PASSWORD})
    assert response.status_code == 200, "the login form again, not a redirect into the dashboard"
    assert "_auth_user_id" not in client.session


def test_a_real_clusters_ingester_never_appends_to_the_demos_chain(client, runtime, settings):
    call(client, "filter", args(pod(str(uuid.uuid4())), ["node-1", "node-2"]))
    assert spool_ingest(spool=runtime.spool) == 1
    assert ChainOrigin.objects.get().binds == "simulated", "the first append says what the chain records"

    settings.SCHEDLENS_BIND_MODE = "kubernetes"
    assert "this database holds the demo's audit chain" in chain_origin_conflict()
    with pytest.raises(SystemCheckError, match=r"schedlens\.E003"):
        call_command("check", databases=["default"], stdout=io.StringIO())
    call(client, "filter", args(pod(str(uuid.uuid4())), ["node-1", "node-2"]))
    with pytest.raises(ChainOriginMismatch, match="give the real cluster a database of its own"):
        spool_ingest(spool=runtime.spool)
    assert VerbCall.objects.count() == 1, "nothing of the real cluster entered the demo's chain"
    assert runtime.spool.depth() == 1, "the record waits in the spool, neither stored nor set aside"
    assert runtime.spool.rejected() == []
