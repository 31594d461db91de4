"""The audit record is append-only and its readers build no query from what a client sent.

Static guards over the source (NetBox-style: a new code path that breaks the rule fails the suite) and behaviour
checks: the admin cannot change or delete a call, staff without the auditor group read nothing, and nobody
writes through the API. The hash chain itself is verified by ``tests/dashboard/audit/test_audit_chain.py`` and after the
fault runs (``tests/faults/test_database_outage.py``, the soak).
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import pytest
from django.contrib.auth.models import Group, User
from rest_framework.test import APIClient

from dashboard.audit.auditors import AUDITOR_GROUP
from dashboard.models import SchedulingCycle, VerbCall
from tests.support.kube_scheduler import T0
from tests.support.paths import REPO

DASHBOARD = REPO / "dashboard"
PRUNE = ("dashboard/services/retention.py", "cycles_prune")
"""The one function allowed to delete calls and cycles: retention, after verifying the stretch it removes."""
MUTATORS = {"update", "delete", "bulk_update", "save", "update_or_create", "raw", "extra"}


def _parse_all() -> list[tuple[str, ast.Module]]:
    return [
        (str(path.relative_to(REPO)), ast.parse(path.read_text(encoding="utf-8")))
        for path in sorted(DASHBOARD.rglob("*.py"))
        if "migrations" not in path.parts
    ]


# Parsed once, at collection: CPython 3.11's ast.parse can raise "AST constructor recursion depth mismatch"
# later in a process where some test provoked (and caught) a RecursionError, as the deep-nesting tests do.
SOURCES = _parse_all()


def _sources() -> Iterator[tuple[str, ast.Module]]:
    yield from SOURCES


def _calls_in_functions(tree: ast.Module) -> Iterator[tuple[str, ast.Call]]:
    """Every call, with the name of the function (or method) it is made in."""
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            for inner in ast.walk(node):
                if isinstance(inner, ast.Call):
                    yield node.name, inner


def _receiver(call: ast.Call) -> str:
    return ast.unparse(call.func.value) if isinstance(call.func, ast.Attribute) else ""


def test_stored_calls_are_never_changed_or_deleted_outside_retention() -> None:
    offenders = []
    for path, tree in _sources():
        for function, call in _calls_in_functions(tree):
            if not isinstance(call.func, ast.Attribute) or call.func.attr not in MUTATORS:
                continue
            receiver = _receiver(call)
            touches_calls = "VerbCall" in receiver or receiver.endswith(".calls") or ".calls." in receiver
            if not touches_calls and receiver not in {"call"}:
                continue
            if (path, function) == PRUNE:
                continue
            offenders.append(f"{path}:{call.lineno} {function}: {ast.unparse(call)[:100]}")
    assert offenders == [], "the record of calls is append-only"


def test_cycles_are_deleted_only_by_retention() -> None:
    offenders = [
        f"{path}:{call.lineno} {function}: {ast.unparse(call)[:100]}"
        for path, tree in _sources()
        for function, call in _calls_in_functions(tree)
        if isinstance(call.func, ast.Attribute)
        and call.func.attr == "delete"
        and ("SchedulingCycle" in _receiver(call) or _receiver(call) == "cycle")
        and (path, function) != PRUNE
    ]
    assert offenders == []


def test_no_sql_statement_in_the_code_updates_or_deletes_the_record() -> None:
    tables = (VerbCall._meta.db_table, SchedulingCycle._meta.db_table)
    for path, tree in _sources():
        for node in ast.walk(tree):
            if isinstance(node, ast.Constant) and isinstance(node.value, str):
                text = node.value.lower()
                for table in tables:
                    for verb in ("update", "delete from"):
                        assert f"{verb} {table}" not in text, path


def _mentions_client_input(node: ast.AST) -> bool:
    text = ast.unparse(node)
    return any(word in text for word in ("request", "query_params", ".GET", ".POST", ".data"))


def test_no_query_is_built_from_raw_client_keys() -> None:
    """``filter(**request.GET)``-style code lets a client choose the lookup (``password__startswith=``…)."""
    offenders = []
    for path, tree in _sources():
        for node in ast.walk(tree):
            if not isinstance(node, ast.Call) or not isinstance(node.func, ast.Attribute):
                continue
            if node.func.attr in {"filter", "exclude", "get", "annotate", "values", "values_list", "order_by"}:
                splats = [kw.value for kw in node.keywords if kw.arg is None]
                if any(_mentions_client_input(value) for value in splats):
                    offenders.append(f"{path}:{node.lineno}: {ast.unparse(node)[:100]}")
                if node.func.attr in {"order_by", "values", "values_list"} and any(
                    _mentions_client_input(arg) for arg in node.args
                ):
                    offenders.append(f"{path}:{node.lineno}: {ast.unparse(node)[:100]}")
            if node.func.attr in {"raw", "extra"} and "objects" in _receiver(node):
                offenders.append(f"{path}:{node.lineno}: {ast.unparse(node)[:100]}")
    assert offenders == []


def test_the_guards_see_the_code_they_guard() -> None:
    names = {function for _, tree in _sources() for function, _ in _calls_in_functions(tree)}
    assert {"cycles_prune", "append", "cycles_ingest_events"} <= names
    assert len(list(_sources())) > 40


# --- behaviour ---------------------------------------------------------------------------------------------


@pytest.fixture
def recorded(kube_scheduler) -> SchedulingCycle:
    return kube_scheduler.schedule(at=T0, name="web-1")


@pytest.mark.django_db
def test_the_admin_shows_the_record_but_cannot_change_or_delete_it(client, recorded: SchedulingCycle) -> None:
    client.force_login(User.objects.create_superuser("root", password="not-used"))
    change = f"/admin/dashboard/schedulingcycle/{recorded.pk}/change/"
    assert client.get(change).status_code == 200
    assert client.post(change, {"outcome": "error", "chosen_node": "elsewhere"}).status_code == 403
    assert client.post(f"/admin/dashboard/schedulingcycle/{recorded.pk}/delete/", {"post": "yes"}).status_code == 403
    assert client.get("/admin/dashboard/verbcall/").status_code == 404, "calls have no admin of their own"
    recorded.refresh_from_db()
    assert recorded.chosen_node != "elsewhere"
    assert VerbCall.objects.filter(cycle=recorded).count() == 3


@pytest.mark.django_db
def test_staff_without_the_auditor_group_read_nothing_and_nobody_writes(recorded: SchedulingCycle) -> None:
    staff = User.objects.create_user("stan-staff", is_staff=True)
    client = APIClient()
    client.force_authenticate(staff)
    for route in ("/api/v1/cycles/", f"/api/v1/cycles/{recorded.pk}/", "/api/v1/audit/verify", "/api/schema/"):
        assert client.get(route).status_code == 403, route
    staff.groups.add(Group.objects.get_or_create(name=AUDITOR_GROUP)[0])
    assert client.get("/api/v1/cycles/").status_code == 200
    for method in ("post", "put", "patch", "delete"):
        response = getattr(client, method)(f"/api/v1/cycles/{recorded.pk}/", {"outcome": "bound"}, format="json")
        assert response.status_code == 405, method
    assert SchedulingCycle.objects.get(pk=recorded.pk).outcome == recorded.outcome


def test_this_file_is_where_the_guards_live() -> None:
    assert Path(__file__).name == "test_audit_record.py"
