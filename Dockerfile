# syntax=docker/dockerfile:1
# One image for every schedlens process (web, ingest, worker, beat, watcher, migrate); the command picks the role.
FROM python:3.11-slim

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1

# Fixed uid/gid so volume ownership and Kubernetes runAsUser/fsGroup can be stated without looking inside.
RUN groupadd --system --gid 10001 schedlens \
 && useradd --system --uid 10001 --gid schedlens --create-home --home-dir /home/schedlens schedlens

WORKDIR /src

# Dependencies first, from requirements.lock: every version and file hash the lock holds, for the runtime set only
# (pyproject.toml names which packages, the lock which versions), so the image is the same whatever was released
# since; and so editing code does not reinstall Django & co. uv comes from the lock too, installed by pip with the
# lock's hashes, and leaves the image once it has installed schedlens.
COPY pyproject.toml requirements.lock ./
COPY scripts/lock-lib.sh ./scripts/
RUN bash -c '. scripts/lock-lib.sh \
 && pip install --require-hashes --no-deps -r <(lock_entry uv requirements.lock) \
 && UV_NO_CONFIG=1 uv pip install --system --require-hashes --constraint requirements.lock -r pyproject.toml \
      -r <(locked_build_requirements requirements.lock)'

# README.md* because pyproject names it as readme but setuptools only warns if it is absent; pyproject.toml is
# repeated so the wildcard never stands alone (an all-empty COPY fails on the classic builder).
COPY pyproject.toml README.md* ./
COPY scheduler_core ./scheduler_core
COPY dashboard ./dashboard
COPY config ./config
# Installed as a wheel, not run from /src: only what the package declares ships, as it would from an index. Built
# with the lock's setuptools (no build isolation). Non-Python files (templates, static) therefore need package-data
# in pyproject.toml.
RUN UV_NO_CONFIG=1 uv pip install --system --no-deps --no-build-isolation . \
 && pip uninstall --yes uv \
 && rm -rf /src

WORKDIR /app
COPY manage.py ./
# Baked-in default so a bare `docker run` works; mount over it or change SCHEDLENS_CONFIG in real deployments.
COPY deploy/profiles.example.yaml /etc/schedlens/profiles.yaml

# Created and chowned before VOLUME so a fresh named volume inherits the non-root owner.
RUN mkdir -p /var/lib/schedlens/spool \
 && chown -R schedlens:schedlens /var/lib/schedlens

# HOST: gunicorn's default bind is 127.0.0.1, which nothing outside the container could reach.
ENV DJANGO_SETTINGS_MODULE=config.settings \
    HOST=0.0.0.0 \
    PORT=8000 \
    SCHEDLENS_CONFIG=/etc/schedlens/profiles.yaml \
    SCHEDLENS_SPOOL_DIR=/var/lib/schedlens/spool

# The spool is the durable outbox between the verbs and the ingester: it must outlive the container.
VOLUME ["/var/lib/schedlens/spool"]

# Numeric, so Kubernetes runAsNonRoot can verify it without reading /etc/passwd.
USER 10001:10001
EXPOSE 8000

# Exec form: gunicorn is PID 1 and receives SIGTERM directly for a graceful shutdown.
CMD ["gunicorn", "--config", "python:config.gunicorn_conf", "config.wsgi:application"]
