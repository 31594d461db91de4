"""schedlens settings. A bare checkout runs the demo; production differs only by environment variables."""

from __future__ import annotations

from pathlib import Path

import dj_database_url
from django.core.exceptions import ImproperlyConfigured

from config.env import env_bool, env_choice, env_float, env_int, env_list, env_str, pod_host

BASE_DIR = Path(__file__).resolve().parent.parent
VAR_DIR = Path(env_str("SCHEDLENS_VAR_DIR", str(BASE_DIR / "var")))


def env_secret(name: str, default: str) -> str:
    """A secret from ``NAME``, or from the file ``NAME_FILE`` names (a mounted Kubernetes Secret); never from code."""
    path = env_str(f"{name}_FILE")
    if path:
        try:
            return Path(path).read_text(encoding="utf-8").strip()
        except OSError as exc:
            raise ImproperlyConfigured(f"{name}_FILE={path!r} cannot be read: {exc}") from None
    return env_str(name, default)


DEBUG = env_bool("DJANGO_DEBUG", False)
# The demo key is only for a bare checkout; production sets DJANGO_SECRET_KEY or DJANGO_SECRET_KEY_FILE
# (`manage.py check --deploy` fails on this one: it starts with "django-insecure").
SECRET_KEY = env_secret("DJANGO_SECRET_KEY", "django-insecure-schedlens-demo-key-set-DJANGO_SECRET_KEY-in-production")
ALLOWED_HOSTS = env_list("DJANGO_ALLOWED_HOSTS", ["127.0.0.1", "localhost", "[::1]", "testserver"])
ALLOWED_HOSTS += pod_host(env_str("POD_IP"))

# --- behind TLS (SCHEDLENS_HTTPS=true): secure cookies, HSTS, http -> https for browsers ------------------------
SCHEDLENS_HTTPS = env_bool("SCHEDLENS_HTTPS", False)
"""The dashboard and API are reached over https (gunicorn's own TLS, or a TLS-terminating proxy)."""
SESSION_COOKIE_SECURE = CSRF_COOKIE_SECURE = SCHEDLENS_HTTPS
SECURE_HSTS_SECONDS = env_int("SCHEDLENS_HSTS_SECONDS", 31_536_000) if SCHEDLENS_HTTPS else 0
SECURE_HSTS_INCLUDE_SUBDOMAINS = True
SECURE_HSTS_PRELOAD = env_bool("SCHEDLENS_HSTS_PRELOAD", True)
"""Only sends the ``preload`` token: nothing is submitted to browsers' preload lists unless the domain's owner does."""
SECURE_SSL_REDIRECT = env_bool("SCHEDLENS_SSL_REDIRECT", SCHEDLENS_HTTPS)
# Machine endpoints are never redirected: Go's client turns a redirected POST into a GET (protocol doc §2.2), and
# probes and scrapers do not follow redirects; they get TLS from gunicorn itself (SCHEDLENS_TLS_CERT) when used.
SECURE_REDIRECT_EXEMPT = [r"^extender/", r"^healthz$", r"^readyz$", r"^metrics$"]
if env_bool("SCHEDLENS_TRUST_X_FORWARDED_PROTO", False):
    # Only behind a proxy that sets X-Forwarded-Proto itself (and strips the client's): otherwise it is forgeable.
    SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")
SESSION_COOKIE_HTTPONLY = True
SESSION_COOKIE_SAMESITE = CSRF_COOKIE_SAMESITE = "Lax"
X_FRAME_OPTIONS = "DENY"

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "rest_framework",
    "rest_framework.authtoken",
    "django_filters",
    "drf_spectacular",
    "drf_spectacular_sidecar",
    "dashboard.apps.DashboardConfig",
    "dashboard.placements.apps.PlacementsConfig",
    "dashboard.traffic.apps.TrafficConfig",
    "dashboard.replays.apps.ReplaysConfig",
    "dashboard.outcomes.apps.OutcomesConfig",
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    # Serves the dashboard's vendored JS/CSS from the app itself (no CDN, no separate web server needed).
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "dashboard.ui.middleware.ContentSecurityPolicyMiddleware",
]

ROOT_URLCONF = "config.urls"
WSGI_APPLICATION = "config.wsgi.application"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        # Searched before the apps' templates, so dashboard/templates/rest_framework/ and …/drf_spectacular/ (the
        # browsable API and Swagger UI without inline style or script) win over the copies in those apps, which
        # come before dashboard in INSTALLED_APPS.
        "DIRS": [BASE_DIR / "dashboard" / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
            ],
            "libraries": {"schedlens_ui": "dashboard.ui.templatetags.schedlens_ui"},
        },
    },
]

DATABASES = {
    "default": dj_database_url.parse(
        env_secret("DATABASE_URL", f"sqlite:///{VAR_DIR / 'schedlens.sqlite3'}"),
        # Verbs never open a transaction; the ingester batches its own.
        conn_max_age=env_int("DATABASE_CONN_MAX_AGE", 60),
    )
}
if DATABASES["default"]["ENGINE"] == "django.db.backends.postgresql":
    # Only the ingester, the dashboard and the API use the database (never a verb). A server that stops answering
    # must not hold them forever: give up connecting after 5 s, and let TCP keepalives end a connection whose
    # peer vanished (libpq's defaults wait indefinitely). Options in DATABASE_URL's query string win.
    DATABASES["default"]["OPTIONS"] = {
        "connect_timeout": 5,
        "keepalives": 1,
        "keepalives_idle": 30,
        "keepalives_interval": 10,
        "keepalives_count": 3,
        **DATABASES["default"].get("OPTIONS", {}),
    }
elif DATABASES["default"]["ENGINE"] == "django.db.backends.sqlite3":
    # Several processes write SQLite at once under `make run` and a first `make serve` (the ingester, run_replays,
    # sessions). A deferred transaction that reads, then writes fails at once with "database is locked" when another
    # wrote in between, whatever the timeout: each takes the write lock as it begins and waits for it instead. WAL
    # lets the dashboard's reads go on while one writes.
    DATABASES["default"]["OPTIONS"] = {
        "transaction_mode": "IMMEDIATE",
        "timeout": 20,
        "init_command": "PRAGMA journal_mode=WAL",
        **DATABASES["default"].get("OPTIONS", {}),
    }
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = False
USE_TZ = True

STATIC_URL = "static/"
STATIC_ROOT = VAR_DIR / "static"
# The dashboard's assets are served from the app directories without a collectstatic step (bare checkout).
WHITENOISE_USE_FINDERS = True

# Django's own logins, except that the demo's published password opens nothing where binds are real.
AUTHENTICATION_BACKENDS = ["dashboard.auth_backends.RealClusterLoginBackend"]

LOGIN_URL = "login"
LOGIN_REDIRECT_URL = "ui:history"
LOGOUT_REDIRECT_URL = "login"

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "formatters": {"plain": {"format": "%(asctime)s %(levelname)s %(name)s %(message)s"}},
    "handlers": {"console": {"class": "logging.StreamHandler", "formatter": "plain"}},
    "root": {"handlers": ["console"], "level": env_str("LOG_LEVEL", "INFO")},
}

# --- audit API (dashboard/api) ---------------------------------------------------------------------------


def _rate(name: str, default: str) -> str:
    """A DRF throttle rate such as ``600/minute``; a typo fails at start-up naming the variable."""
    value = env_str(name, default)
    number, _, period = value.partition("/")
    if not number.isdigit() or period[:1] not in {"s", "m", "h", "d"}:
        raise ImproperlyConfigured(f"{name} must look like 600/minute (per second, minute, hour or day), got {value!r}")
    return value


REST_FRAMEWORK = {
    # Token first: its WWW-Authenticate header is what makes an anonymous request a 401 rather than a 403.
    "DEFAULT_AUTHENTICATION_CLASSES": [
        "rest_framework.authentication.TokenAuthentication",
        "rest_framework.authentication.SessionAuthentication",
    ],
    # Deny by default: a view readable by anyone but an auditor has to say so.
    "DEFAULT_PERMISSION_CLASSES": ["dashboard.api.permissions.IsAuditor"],
    "DEFAULT_THROTTLE_CLASSES": ["dashboard.api.throttling.AnonThrottle", "dashboard.api.throttling.UserThrottle"],
    "DEFAULT_THROTTLE_RATES": {
        "anon": _rate("SCHEDLENS_API_ANON_RATE", "30/minute"),
        "user": _rate("SCHEDLENS_API_USER_RATE", "600/minute"),
        "audit-verify": _rate("SCHEDLENS_API_VERIFY_RATE", "12/hour"),
        "replay-start": _rate("SCHEDLENS_API_REPLAY_START_RATE", "30/hour"),
    },
    "DEFAULT_RENDERER_CLASSES": [
        "rest_framework.renderers.JSONRenderer",
        "rest_framework.renderers.BrowsableAPIRenderer",
    ],
    "DEFAULT_FILTER_BACKENDS": ["django_filters.rest_framework.DjangoFilterBackend"],
    "DEFAULT_SCHEMA_CLASS": "drf_spectacular.openapi.AutoSchema",
    "EXCEPTION_HANDLER": "dashboard.api.exceptions.api_exception_handler",
}
SPECTACULAR_SETTINGS = {
    "TITLE": "schedlens audit API",
    "DESCRIPTION": "Read-only access to the scheduling record: cycles, nodes, profiles, explanations, exports "
    "and the verification of its hash chain; and replays of recorded history under a candidate profile (`POST "
    "/api/v1/replays/` starts one: the API's only write, which writes nothing but the replay). Authenticate with "
    "`Authorization: Token <key>` (`manage.py create_audit_token <user>`) or a session; the user must be in the "
    "`auditor` group.",
    "VERSION": "1.0.0",
    "SERVE_INCLUDE_SCHEMA": False,
    "SERVE_PERMISSIONS": ["dashboard.api.permissions.IsAuditor"],  # the schema and docs too: deny by default
    "SCHEMA_PATH_PREFIX": r"/api/v1",
    "SWAGGER_UI_DIST": "SIDECAR",  # assets from drf-spectacular-sidecar, served by the app: no CDN
    "SWAGGER_UI_FAVICON_HREF": "SIDECAR",
    "REDOC_DIST": "SIDECAR",
    "ENUM_NAME_OVERRIDES": {
        "OutcomeEnum": "dashboard.models.Outcome",
        "NodeModeEnum": "dashboard.models.NodeMode",
        "ReplayStatusEnum": "dashboard.replays.models.ReplayStatus",
        "StatusEnum": "dashboard.traffic.models.RefreshStatus",
        "ProfileChangeKindEnum": "scheduler_core.extender.scoring.profile_changes.ChangeKind",
    },
}
SCHEDLENS_RETENTION_DAYS = env_int("SCHEDLENS_RETENTION_DAYS", 30)
"""``prune_cycles`` (and its periodic task) deletes cycles older than this, keeping the hash chain verifiable."""
SCHEDLENS_EXPORT_CHUNK_SIZE = env_int("SCHEDLENS_EXPORT_CHUNK_SIZE", 2000)
"""Rows fetched per round trip by the CSV/NDJSON exports: memory stays bounded by this, not by the row count."""

# --- schedlens -------------------------------------------------------------------------------------------

SCHEDLENS_CONFIG = env_str("SCHEDLENS_CONFIG")
"""Path of the profiles YAML; empty means the built-in ``default`` profile."""
SCHEDLENS_SPOOL_DIR = Path(env_str("SCHEDLENS_SPOOL_DIR", str(VAR_DIR / "spool")))
"""Local durable outbox for cycle records: verbs append here and never wait on the database."""
SCHEDLENS_INGEST_IN_PROCESS = env_bool("SCHEDLENS_INGEST_IN_PROCESS", True)
"""Drain the spool from a thread of each web process; turn off when a separate ``ingest_spool`` runs."""
SCHEDLENS_INGEST_INTERVAL = env_float("SCHEDLENS_INGEST_INTERVAL", 2.0)
"""Seconds between ingest passes. A batch upserts the per-node counts of every node its cycles listed, at about the
same cost to the database whatever the number of cycles: passes further apart make larger batches, each pod's share
smaller, and the history and ``Explained`` Events this much later."""
SCHEDLENS_INGEST_PREPARERS = env_int("SCHEDLENS_INGEST_PREPARERS", 2)
"""Processes preparing batches beside ``ingest_spool --follow``'s writing once it is behind
(``dashboard.ingest.call_builders``); 0: always a thread of the ingester (one core's worth)."""
SCHEDLENS_INGEST_PREPARE_BACKLOG = env_int("SCHEDLENS_INGEST_PREPARE_BACKLOG", 2000)
"""Records waiting in the spool (~4 batches, a few seconds of a busy scheduler) from which a pass of
``ingest_spool --follow`` prepares in those processes: keeping up, a thread costs less CPU than handing batches over,
CPU the verbs share."""
SCHEDLENS_SPOOL_FORM = env_choice("SCHEDLENS_SPOOL_FORM", "framed", ("framed", "deriving"))
"""The form the verbs spool their records in: ``framed`` (``SLR\\x03``, read by every release since 8835e03) or
``deriving`` (``SLR\\x04``: a prioritize leaves out its final scores and NetworkTraffic's scores, which its other
columns give back; a quarter fewer bytes per 1000-node cycle), which the ingester stores as spooled (body format 3).
Only once no process of an older release reads the spool or the history: those set ``SLR\\x04`` records aside and
cannot read format 3 bodies (``docs/stored-formats.md``, rollback rule)."""
SCHEDLENS_SPOOL_FAILURE = env_choice("SCHEDLENS_SPOOL_FAILURE", "fail", ("fail", "answer"))
"""When a record cannot be spooled (disk full): ``fail`` answers 503 (kube-scheduler's ``ignorable`` decides);
``answer`` answers anyway. Both log the record at ERROR and count ``schedlens_spool_append_failures_total``."""
SCHEDLENS_ANSWER_CONFIRM_SECONDS = env_float("SCHEDLENS_ANSWER_CONFIRM_SECONDS", 60.0)
"""A record whose answer was not confirmed written after this long is stored as a failed call ("answer not
confirmed"): the process died, or the client was gone, between recording and answering. Well above
kube-scheduler's extender timeout (5 s) so a slow reader of a large answer is not mistaken for one."""
SCHEDLENS_BIND_INTENT_GRACE_SECONDS = env_float("SCHEDLENS_BIND_INTENT_GRACE_SECONDS", 30.0)
"""A bind intent without an outcome older than this is reconciled against its pod (``dashboard.bind_intents``): the
process died mid-bind. Well above the binder's 4 s budget, so a bind still in flight in a live process is left alone."""
SCHEDLENS_BIND_RECONCILE_SECONDS = env_float("SCHEDLENS_BIND_RECONCILE_SECONDS", 10.0)
"""Seconds between a web process's passes over the bind intents (the first runs at start)."""
SCHEDLENS_MAX_BODY_BYTES = env_int("SCHEDLENS_MAX_BODY_BYTES", 256 * 1024 * 1024)
"""Full-Nodes mode at 1000+ nodes sends tens of MB; Django's 2.5 MiB default would refuse it."""
PROMETHEUS_URL = env_str("PROMETHEUS_URL")
"""Default Prometheus for plugins without ``address``; empty: no measured traffic (``SCHEDLENS_SYNTHETIC_TRAFFIC``)."""
SCHEDLENS_TRAFFIC_REFRESH_SECONDS = env_float("SCHEDLENS_TRAFFIC_REFRESH_SECONDS", 15.0)
SCHEDLENS_CLUSTER_FILE = env_str("SCHEDLENS_CLUSTER_FILE")
"""A JSON file with nodes and NodeResources objects (the demo cluster); the Kubernetes API otherwise."""
SCHEDLENS_CLUSTER_SOURCE = env_choice("SCHEDLENS_CLUSTER_SOURCE", "auto", ("auto", "file", "kubernetes", "none"))
"""Where the verbs' node view comes from. ``auto``: ``SCHEDLENS_CLUSTER_FILE`` if set, else a list + watch node
cache when a Kubernetes configuration is found (in-cluster or kubeconfig), else none. ``kubernetes`` fails at
start-up without a configuration instead of running without a node cache."""
SCHEDLENS_WATCH_TIMEOUT_SECONDS = env_int("SCHEDLENS_WATCH_TIMEOUT_SECONDS", 300)
"""Server-side length of one watch request (Nodes, NodeResources, pods, events) before it is renewed."""
SCHEDLENS_SCHEDULER_NAMES = env_list("SCHEDLENS_SCHEDULER_NAMES", ["schedlens-scheduler"])
"""``watch_placements`` follows pods with these ``spec.schedulerName`` values and their FailedScheduling events."""
SCHEDLENS_BIND_MODE = env_choice("SCHEDLENS_BIND_MODE", "kubernetes", ("kubernetes", "simulated"))
"""``simulated`` records binds without an API server: for the demo only, never for a real cluster."""
SCHEDLENS_SYNTHETIC_TRAFFIC = env_bool("SCHEDLENS_SYNTHETIC_TRAFFIC", SCHEDLENS_BIND_MODE == "simulated")
"""A query with no Prometheus (neither the plugin's ``address`` nor ``PROMETHEUS_URL``) reads invented traffic: the
demo's (on with simulated binds). Off, as with real binds, such a query has no measurement, and every cycle says so
(the nodes are scored by ``missingPolicy``): invented figures never explain a real placement."""
SCHEDLENS_POD_EVENTS = env_bool("SCHEDLENS_POD_EVENTS", SCHEDLENS_BIND_MODE != "simulated")
"""Write an ``Explained`` Event (events.k8s.io/v1) on each pod whose bind is recorded (``dashboard.pod_events``);
on by default when binding to a real cluster, ``false`` turns it off."""
SCHEDLENS_POD_EVENT_BURST_SECONDS = env_float("SCHEDLENS_POD_EVENT_BURST_SECONDS", 60.0)
"""Of the pods one controller makes (named alike: ``scheduler_core.kube.pod_event.burst_group``) in one namespace, the
first placed in a window of this many seconds gets the ``Explained`` Event, the rest of the burst none (each is one
more write the API server and etcd pay for); 0: every pod gets its own. A pod named by no controller always does."""
SCHEDLENS_POD_EVENT_TIMEOUT_SECONDS = env_float("SCHEDLENS_POD_EVENT_TIMEOUT_SECONDS", 2.0)
"""How long one Event creation may take before it is dropped (counted in schedlens_pod_events_dropped_total)."""
SCHEDLENS_PENDING_EVENT_SECONDS = env_float("SCHEDLENS_PENDING_EVENT_SECONDS", 60.0)
"""A waiting pod gets an ``Unschedulable`` Event when what holds it back changes, at most one per this many seconds
(``dashboard.placements.pending_events``; off with SCHEDLENS_POD_EVENTS)."""
SCHEDLENS_PUBLIC_URL = env_str("SCHEDLENS_PUBLIC_URL", "").rstrip("/")
"""Where people reach the record (e.g. ``https://schedlens.example``); when set, a pod's Event links its cycle."""
REDIS_URL = env_secret("REDIS_URL", "redis://127.0.0.1:6379/0")
SCHEDLENS_TRAFFIC_BACKEND = env_choice("SCHEDLENS_TRAFFIC_BACKEND", "inprocess", ("inprocess", "redis"))
"""``inprocess``: each web process refreshes its own snapshots (no external service, ``make run``); ``redis``:
Celery workers refresh one snapshot per query into Redis and every replica reads it (production)."""
SCHEDLENS_REDIS_PREFIX = env_str("SCHEDLENS_REDIS_PREFIX", "schedlens:")
SCHEDLENS_REDIS_VERB_TIMEOUT_SECONDS = env_float("SCHEDLENS_REDIS_VERB_TIMEOUT_SECONDS", 0.05)
"""A verb waits at most this long for Redis, then answers from the snapshot it keeps in process."""
SCHEDLENS_PROMETHEUS_TIMEOUT_SECONDS = env_float("SCHEDLENS_PROMETHEUS_TIMEOUT_SECONDS", 3.0)
SCHEDLENS_PROMETHEUS_RETRIES = env_int("SCHEDLENS_PROMETHEUS_RETRIES", 2)
"""3 attempts of 3 s plus back-off stay under the default 15 s refresh interval."""
SCHEDLENS_TRAFFIC_INLINE_FALLBACK_SECONDS = env_float("SCHEDLENS_TRAFFIC_INLINE_FALLBACK_SECONDS", 0.0)
"""``redis`` mode: when > 0, a verb without a usable snapshot asks Prometheus itself with this deadline (at most
once per refresh interval per process). 0 (default): never; verbs only read snapshots."""
SCHEDLENS_TRAFFIC_HISTORY_INTERVAL_SECONDS = env_float("SCHEDLENS_TRAFFIC_HISTORY_INTERVAL_SECONDS", 60.0)
"""Per-node values are kept on one refresh row per interval (traffic over time), not on every row."""
SCHEDLENS_TRAFFIC_HISTORY_RETENTION_HOURS = env_float("SCHEDLENS_TRAFFIC_HISTORY_RETENTION_HOURS", 48.0)
SCHEDLENS_TRAFFIC_REFRESH_RETENTION_HOURS = env_float("SCHEDLENS_TRAFFIC_REFRESH_RETENTION_HOURS", 7 * 24.0)

SCHEDLENS_OUTCOME_WINDOWS_MINUTES = [int(m) for m in env_list("SCHEDLENS_OUTCOME_WINDOWS_MINUTES", ["1", "5", "15"])]
"""The windows after a bind in which a placement's outcome is read (``dashboard.outcomes``): the first minute shows
the pod starting, five the query window's length by default, fifteen whether it lasted."""
SCHEDLENS_OUTCOME_GRACE_SECONDS = env_float("SCHEDLENS_OUTCOME_GRACE_SECONDS", 30.0)
"""A window is read this long after its end, so that the scrape covering its end is in Prometheus."""
SCHEDLENS_OUTCOME_INTERVAL_SECONDS = env_float("SCHEDLENS_OUTCOME_INTERVAL_SECONDS", 30.0)
"""Seconds between runs of the outcome job (its loop, or its Celery beat entry)."""
SCHEDLENS_OUTCOME_LOOKBACK_HOURS = env_float("SCHEDLENS_OUTCOME_LOOKBACK_HOURS", 2.0)
"""Bound cycles older than this when the job first sees them get no outcome (a job started on an old history)."""
SCHEDLENS_OUTCOME_BATCH = env_int("SCHEDLENS_OUTCOME_BATCH", 1000)
"""The most cycles one run starts following, and the most outcomes it updates."""
SCHEDLENS_OUTCOME_RUNNER = env_choice(
    "SCHEDLENS_OUTCOME_RUNNER",
    "celery" if env_str("REDIS_URL") or env_str("REDIS_URL_FILE") else "process",
    ("celery", "process", "none"),
)
"""Who runs the outcome job: ``celery`` (a beat entry), ``process`` (a thread of ``manage.py run_replays`` under
``make run`` and of ``manage.py ingest_spool --follow`` under ``make serve``), ``none``."""
SCHEDLENS_POD_TRAFFIC_METRICS = env_list(
    "SCHEDLENS_POD_TRAFFIC_METRICS", ["container_network_receive_bytes_total", "container_network_transmit_bytes_total"]
)
"""The counters a pod's own traffic is summed from (cAdvisor's; no ``container`` filter: the sandbox's series)."""
SCHEDLENS_POD_TRAFFIC_NAMESPACE_LABEL = env_str("SCHEDLENS_POD_TRAFFIC_NAMESPACE_LABEL", "namespace")
SCHEDLENS_POD_TRAFFIC_POD_LABEL = env_str("SCHEDLENS_POD_TRAFFIC_POD_LABEL", "pod")

SCHEDLENS_REPLAY_RUNNER = env_choice(
    "SCHEDLENS_REPLAY_RUNNER",
    "celery" if env_str("REDIS_URL") or env_str("REDIS_URL_FILE") else "process",
    ("celery", "process", "none"),
)
"""Who runs a history replay started from the dashboard or the API (``dashboard.replays``): ``celery`` (a task
queued when the row is committed; the default when REDIS_URL is set), ``process`` (``manage.py run_replays``, a
small loop claiming queued rows; ``make run`` starts it), ``none`` (nothing: a test or an operator runs it)."""
_CELERY_QUEUE = env_str("SCHEDLENS_CELERY_QUEUE", "schedlens")
SCHEDLENS_REPLAY_QUEUE = env_str("SCHEDLENS_REPLAY_QUEUE", _CELERY_QUEUE)
"""The Celery queue replays are sent to: the traffic refreshes' by default (a replay then holds one of the worker's
processes while it runs); another one keeps them apart, with a worker of its own (``celery … worker -Q <queue>``)."""
SCHEDLENS_REPLAY_MAX_CYCLES = env_int("SCHEDLENS_REPLAY_MAX_CYCLES", 2_000_000)
"""The most cycles one history replay may select (a day of a busy cluster); a larger selection fails, saying so."""
SCHEDLENS_REPLAY_CHUNK_CYCLES = env_int("SCHEDLENS_REPLAY_CHUNK_CYCLES", 2000)
"""Cycles read and replayed per chunk; the replay's row shows its progress after each."""
SCHEDLENS_REPLAY_TIME_LIMIT_SECONDS = env_int("SCHEDLENS_REPLAY_TIME_LIMIT_SECONDS", 3600)
"""The Celery task's hard time limit for one replay."""

# Verbs read the raw body themselves and enforce SCHEDLENS_MAX_BODY_BYTES with a 413.
DATA_UPLOAD_MAX_MEMORY_SIZE = None

# --- Celery (traffic prefetch) ----------------------------------------------------------------------------
# Redis is the broker. Tasks are acknowledged after they ran (acks_late) and given back when a worker dies
# mid-task, so a refresh is never lost silently; each task sets its own time limits below these defaults.
CELERY_BROKER_URL = REDIS_URL
CELERY_BROKER_CONNECTION_RETRY_ON_STARTUP = True
CELERY_BROKER_CONNECTION_MAX_RETRIES = None  # keep reconnecting while Redis is down; refreshes resume after
CELERY_TASK_DEFAULT_QUEUE = _CELERY_QUEUE
CELERY_TASK_ACKS_LATE = True
CELERY_TASK_REJECT_ON_WORKER_LOST = True
# A message whose worker died mid-task is redelivered; one that killed its worker this many times is parked in a
# dead-letter list in Redis (config/celery.py), not redelivered forever.
SCHEDLENS_CELERY_MAX_DELIVERIES = env_int("SCHEDLENS_CELERY_MAX_DELIVERIES", 3)
_visibility = env_float("SCHEDLENS_CELERY_VISIBILITY_TIMEOUT_SECONDS", 300.0)
# Redis gives an unacknowledged message (its whole worker was killed) to another worker after this long: well above
# the task time limit (60 s) so a running task is never handed out twice, far below kombu's default hour.
CELERY_BROKER_TRANSPORT_OPTIONS = {
    "visibility_timeout": _visibility,
    "unacked_restore_interval": max(1, min(10, int(_visibility))),
    "unacked_restore_throttle": 1,
}
CELERY_TASK_TIME_LIMIT = 60
CELERY_TASK_SOFT_TIME_LIMIT = 45
CELERY_TASK_IGNORE_RESULT = True  # tasks leave rows (TrafficRefresh), not results
CELERY_TASK_SERIALIZER = "json"
CELERY_ACCEPT_CONTENT = ["json"]
CELERY_WORKER_PREFETCH_MULTIPLIER = 1  # short tasks, one at a time: a slow refresh never holds others back
CELERY_WORKER_HIJACK_ROOT_LOGGER = False
CELERY_TIMEZONE = "UTC"
CELERY_BEAT_SCHEDULE: dict[str, dict[str, object]] = {}  # filled from the profiles (config/celery.py)
