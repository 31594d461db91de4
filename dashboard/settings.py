"""schedlens settings. A bare checkout runs the demo; production differs only by environment variables."""

from __future__ import annotations

from pathlib import Path

import dj_database_url

from dashboard.env import env_bool, env_choice, env_float, env_int, env_list, env_str

BASE_DIR = Path(__file__).resolve().parent.parent
VAR_DIR = Path(env_str("SCHEDLENS_VAR_DIR", str(BASE_DIR / "var")))

DEBUG = env_bool("DJANGO_DEBUG", False)
# The demo key is only for a bare checkout; production must set DJANGO_SECRET_KEY (check --deploy says so).
SECRET_KEY = env_str("DJANGO_SECRET_KEY", "django-insecure-schedlens-demo-key-set-DJANGO_SECRET_KEY-in-production")
ALLOWED_HOSTS = env_list("DJANGO_ALLOWED_HOSTS", ["127.0.0.1", "localhost", "[::1]", "testserver"])

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "dashboard.apps.DashboardConfig",
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
]

ROOT_URLCONF = "dashboard.urls"
WSGI_APPLICATION = "dashboard.wsgi.application"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
            ],
        },
    },
]

DATABASES = {
    "default": dj_database_url.parse(
        env_str("DATABASE_URL", f"sqlite:///{VAR_DIR / 'schedlens.sqlite3'}"),
        # Verbs never open a transaction; the ingester batches its own.
        conn_max_age=env_int("DATABASE_CONN_MAX_AGE", 60),
    )
}
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = False
USE_TZ = True

STATIC_URL = "static/"
STATIC_ROOT = VAR_DIR / "static"

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "formatters": {"plain": {"format": "%(asctime)s %(levelname)s %(name)s %(message)s"}},
    "handlers": {"console": {"class": "logging.StreamHandler", "formatter": "plain"}},
    "root": {"handlers": ["console"], "level": env_str("LOG_LEVEL", "INFO")},
}

# --- schedlens -------------------------------------------------------------------------------------------

SCHEDLENS_CONFIG = env_str("SCHEDLENS_CONFIG")
"""Path of the profiles YAML; empty means the built-in ``default`` profile."""
SCHEDLENS_SPOOL_DIR = Path(env_str("SCHEDLENS_SPOOL_DIR", str(VAR_DIR / "spool")))
"""Local durable outbox for cycle records: verbs append here and never wait on the database."""
SCHEDLENS_INGEST_IN_PROCESS = env_bool("SCHEDLENS_INGEST_IN_PROCESS", True)
"""Drain the spool from a thread of each web process; turn off when a separate ``ingest_spool`` runs."""
SCHEDLENS_INGEST_INTERVAL = env_float("SCHEDLENS_INGEST_INTERVAL", 0.5)
SCHEDLENS_MAX_BODY_BYTES = env_int("SCHEDLENS_MAX_BODY_BYTES", 256 * 1024 * 1024)
"""Full-Nodes mode at 1000+ nodes sends tens of MB; Django's 2.5 MiB default would refuse it."""
PROMETHEUS_URL = env_str("PROMETHEUS_URL")
"""Default Prometheus for plugins without ``address``; empty means the embedded synthetic source."""
SCHEDLENS_TRAFFIC_REFRESH_SECONDS = env_float("SCHEDLENS_TRAFFIC_REFRESH_SECONDS", 15.0)
SCHEDLENS_CLUSTER_FILE = env_str("SCHEDLENS_CLUSTER_FILE")
"""A JSON file with nodes and NodeResources objects (the demo cluster); the Kubernetes API otherwise."""
SCHEDLENS_BIND_MODE = env_choice("SCHEDLENS_BIND_MODE", "kubernetes", ("kubernetes", "simulated"))
"""``simulated`` records binds without an API server: for the demo only, never for a real cluster."""
REDIS_URL = env_str("REDIS_URL", "redis://127.0.0.1:6379/0")

# Verbs read the raw body themselves and enforce SCHEDLENS_MAX_BODY_BYTES with a 413.
DATA_UPLOAD_MAX_MEMORY_SIZE = None
