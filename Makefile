# schedlens — the two commands first: `make run` and `make test`. Both install what they need.
SHELL := /bin/bash
VENV ?= .venv
PY := $(VENV)/bin/python
PORT ?= 8000
export PORT

.PHONY: run serve test install install-runtime install-test install-bench lock test-latest services lint typecheck \
	importlint migrations-check pytest bench clean worker beat

run: install-runtime ## the extender + demo history on http://127.0.0.1:$(PORT)
	scripts/run-demo.sh

serve: install-runtime ## schedlens for the cluster of KUBECONFIG (or in-cluster): real binds, node cache, placement watcher
	scripts/serve.sh

test: install-test services lint typecheck importlint migrations-check pytest ## the whole suite

# Every install comes from requirements.lock (scripts/install.sh): runtime for run/serve/worker/beat, test, bench.
install: install-test
install-runtime: $(VENV)/.installed-runtime
install-test: $(VENV)/.installed-test
install-bench: $(VENV)/.installed-bench

$(VENV)/.installed-%: requirements.lock pyproject.toml scripts/install.sh scripts/lock-lib.sh
	VENV=$(VENV) scripts/install.sh $*
	touch $@

lock: ## refresh requirements.lock to the newest releases pyproject.toml allows (LOCK_KEEP=1: only what is new); commit once make test passes
	VENV=$(VENV) LOCK_KEEP=$(LOCK_KEEP) scripts/lock.sh

test-latest: services ## the suite on the newest releases, in a scratch venv: says what broke; never part of make test
	scripts/test-latest.sh

services: ## PostgreSQL, Redis and Prometheus for the tests (started, or installed, when missing)
	scripts/ensure-services.sh

lint:
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .

# The Django plugin imports the settings; config/ holds them once it exists (issue 29), dashboard/ until then.
typecheck:
	$(VENV)/bin/mypy scheduler_core dashboard config

importlint:
	$(VENV)/bin/lint-imports

migrations-check:
	$(PY) manage.py makemigrations --check --dry-run

pytest:
	DATABASE_URL=$${TEST_DATABASE_URL:-postgres://postgres@127.0.0.1:5432/schedlens} \
	REDIS_URL=$${TEST_REDIS_URL:-redis://127.0.0.1:6379/15} \
	$(VENV)/bin/pytest $(PYTEST_ARGS)

BENCH ?= --quick
bench: install-bench services ## the benchmark suite (BENCH=--full for the 10-minute sustained run and 1,000,000 cycles) → benchmarks/results.md
	SCHEDLENS_VAR_ROOT=$(CURDIR)/var/bench $(PY) benchmarks/suite.py $(BENCH)  # never the settings of make run/serve

worker: install-runtime ## a Celery worker for the traffic prefetch (SCHEDLENS_TRAFFIC_BACKEND=redis; needs Redis at REDIS_URL)
	$(VENV)/bin/celery -A config worker --loglevel=INFO

beat: install-runtime ## Celery beat: one prefetch per distinct traffic query every SCHEDLENS_TRAFFIC_REFRESH_SECONDS
	mkdir -p var
	$(VENV)/bin/celery -A config beat --loglevel=INFO --schedule=var/celerybeat-schedule

clean:
	rm -rf $(VENV) var .pytest_cache .mypy_cache .ruff_cache
