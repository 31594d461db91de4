"""Production settings: ``manage.py check --deploy`` clean, secrets only from the environment or files, DEBUG off
unless asked for. Each check runs ``manage.py`` in a subprocess with exactly the environment given, as a deployed
process reads it (settings are computed once, at import)."""

from __future__ import annotations

import os
import secrets
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.paths import REPO

PASSTHROUGH = ("PATH", "HOME", "LANG", "DATABASE_URL", "REDIS_URL", "SCHEDLENS_VAR_ROOT")


def manage(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    base = {k: os.environ[k] for k in PASSTHROUGH if k in os.environ}
    return subprocess.run(
        [sys.executable, "manage.py", *args], cwd=REPO, env={**base, **env}, capture_output=True, text=True, timeout=120
    )


def settings_of(names: list[str], env: dict[str, str]) -> list[str]:
    """``repr`` of each setting expression, as a process started with ``env`` sees it."""
    code = "from django.conf import settings\n" + "".join(f"print(repr(settings.{name}))\n" for name in names)
    done = manage("shell", "--no-imports", "-c", code, env=env)
    assert done.returncode == 0, done.stderr
    return done.stdout.strip().splitlines()[-len(names) :]


def setting(name: str, env: dict[str, str]) -> str:
    return settings_of([name], env)[0]


@pytest.fixture
def key_file(tmp_path: Path) -> Path:
    path = tmp_path / "secret-key"
    path.write_text(secrets.token_urlsafe(50) + "\n")
    return path


@pytest.fixture
def production(key_file: Path) -> dict[str, str]:
    """What the manifests set, behind TLS: a key from a mounted Secret file, the real host name, https."""
    return {
        "DJANGO_SECRET_KEY_FILE": str(key_file),
        "DJANGO_ALLOWED_HOSTS": "schedlens.schedlens-system.svc,localhost",
        "SCHEDLENS_HTTPS": "true",
    }


def test_check_deploy_is_clean_with_production_settings(production: dict[str, str]) -> None:
    done = manage("check", "--deploy", "--fail-level", "WARNING", env=production)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "System check identified no issues (0 silenced)." in done.stdout


def test_check_deploy_fails_on_the_demo_key(production: dict[str, str]) -> None:
    env = {k: v for k, v in production.items() if k != "DJANGO_SECRET_KEY_FILE"}
    done = manage("check", "--deploy", "--fail-level", "WARNING", env=env)
    assert done.returncode != 0
    assert "security.W009" in done.stderr + done.stdout


def test_without_https_check_deploy_names_every_tls_setting_it_misses(production: dict[str, str]) -> None:
    done = manage("check", "--deploy", env={**production, "SCHEDLENS_HTTPS": "false"})
    for warning in ("security.W004", "security.W008", "security.W012", "security.W016"):
        assert warning in done.stderr + done.stdout


def test_debug_is_off_unless_asked_for() -> None:
    assert setting("DEBUG", {}) == "False"
    assert setting("DEBUG", {"DJANGO_DEBUG": "true"}) == "True"


def test_the_secret_key_is_read_from_the_file_a_secret_is_mounted_at(key_file: Path) -> None:
    assert setting("SECRET_KEY", {"DJANGO_SECRET_KEY_FILE": str(key_file)}) == repr(key_file.read_text().strip())


def test_database_and_redis_urls_can_come_from_files_too(tmp_path: Path) -> None:
    url = tmp_path / "database-url"
    url.write_text("postgres://schedlens:s3cret@db.example:5432/schedlens\n")
    redis_url = tmp_path / "redis-url"
    redis_url.write_text("redis://:pw@redis.example:6379/0")
    env = {"DATABASE_URL_FILE": str(url), "REDIS_URL_FILE": str(redis_url), "DATABASE_URL": "", "REDIS_URL": ""}
    assert settings_of(["DATABASES['default']['HOST']", "REDIS_URL"], env) == [
        "'db.example'",
        "'redis://:pw@redis.example:6379/0'",
    ]


def test_a_secret_file_that_cannot_be_read_stops_the_process_naming_it(tmp_path: Path) -> None:
    done = manage("check", env={"DJANGO_SECRET_KEY_FILE": str(tmp_path / "missing")})
    assert done.returncode != 0
    assert "DJANGO_SECRET_KEY_FILE=" in done.stderr
    assert "cannot be read" in done.stderr


def test_behind_tls_cookies_are_secure_and_hsts_is_sent(production: dict[str, str]) -> None:
    names = ["SESSION_COOKIE_SECURE", "CSRF_COOKIE_SECURE", "SECURE_HSTS_SECONDS", "SECURE_SSL_REDIRECT"]
    assert settings_of(names, production) == ["True", "True", "31536000", "True"]


def test_no_secret_has_a_production_value_in_the_code() -> None:
    settings_source = (REPO / "config" / "settings.py").read_text()
    assert 'SECRET_KEY = env_secret("DJANGO_SECRET_KEY", "django-insecure-' in settings_source, (
        "the only built-in key is the demo one, which check --deploy refuses"
    )
    for name in ("PASSWORD", "TOKEN"):
        assert f'{name} = "' not in settings_source
