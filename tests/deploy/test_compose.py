"""docker-compose.yml: the stack the README promises, with commands, files and volumes that exist."""

from __future__ import annotations

import re
import shlex

import yaml

from tests.deploy.manifests import REPO, command_problems, known_environment_variables

COMPOSE = yaml.safe_load((REPO / "docker-compose.yml").read_text())
SERVICES = COMPOSE["services"]


def command_of(service: dict) -> list[str]:
    command = service.get("command") or []
    return shlex.split(command) if isinstance(command, str) else list(command)


def test_the_stack_has_every_role_and_its_dependencies() -> None:
    assert {
        "web",
        "ingest",
        "worker",
        "beat",
        "watcher",
        "migrate",
        "postgres",
        "redis",
        "prometheus",
        "node-exporter",
    } <= set(SERVICES)


def test_every_command_names_an_existing_management_command_module_or_celery_app() -> None:
    for name, service in SERVICES.items():
        if "build" in service:
            assert command_problems(command_of(service)) == [], name


def test_every_manage_py_command_is_a_management_command() -> None:
    from django.core.management import get_commands

    named = [
        command_of(s)[command_of(s).index("manage.py") + 1] for s in SERVICES.values() if "manage.py" in command_of(s)
    ]

    assert set(named) <= set(get_commands())
    assert {"migrate", "ingest_spool", "watch_placements"} <= set(named)


def test_long_running_services_have_healthchecks() -> None:
    for name in ("web", "worker", "postgres", "redis", "prometheus", "node-exporter"):
        assert SERVICES[name]["healthcheck"]["test"], name


def test_the_image_is_built_from_this_repository_and_its_files_exist() -> None:
    assert (REPO / "Dockerfile").is_file()
    for line in (REPO / "Dockerfile").read_text().splitlines():
        if line.startswith("COPY ") and "--from" not in line:
            for source in line.split()[1:-1]:
                if not source.endswith("*"):
                    assert (REPO / source).exists(), source


def test_bind_mounts_exist_and_named_volumes_are_declared() -> None:
    declared = set(COMPOSE.get("volumes") or {})
    for name, service in SERVICES.items():
        for volume in service.get("volumes") or []:
            source = volume.split(":", 1)[0]
            if source.startswith("./"):
                assert (REPO / source).exists(), (name, source)
            elif not source.startswith(("/", "~", "$")):
                assert source in declared, (name, source)


def test_the_watcher_only_runs_where_there_is_a_cluster() -> None:
    watcher = SERVICES["watcher"]

    assert watcher["profiles"] == ["cluster"]
    assert any(v.endswith(":/etc/schedlens/kubeconfig:ro") for v in watcher["volumes"])


def test_the_shared_environment_sets_only_variables_schedlens_reads() -> None:
    environment = COMPOSE["x-schedlens-env"]

    assert set(environment) - known_environment_variables() - {"KUBECONFIG"} == set()


def test_the_dockerfile_serves_on_all_interfaces() -> None:
    dockerfile = (REPO / "Dockerfile").read_text()

    assert re.search(r"HOST=0\.0\.0\.0", dockerfile), "gunicorn's 127.0.0.1 default is unreachable from outside"
