#!/usr/bin/env bash
# Install one locked set of packages into the venv:
#   runtime  what schedlens runs on (make run, make serve, make worker, make beat)
#   test     runtime + the test extra (make test)
#   bench    runtime + test + the bench extra (make bench)
# Every version and every file's hash comes from requirements.lock, whatever was released since: a new release
# reaches this project through `make lock` and a commit, never through an install. pyproject.toml keeps the ranges,
# for people who install the package.
set -euo pipefail
cd "$(dirname "$0")/.."

set_name=${1:-}
VENV=${VENV:-.venv}
LOCK=${LOCK:-requirements.lock}
case "$set_name" in
  runtime) extras=() ;;
  test) extras=(--extra test) ;;
  bench) extras=(--extra test --extra bench) ;;
  *) echo "usage: scripts/install.sh runtime|test|bench (got '${set_name}')" >&2; exit 2 ;;
esac
[ -f "$LOCK" ] || { echo "$LOCK is missing: run 'make lock' to make it" >&2; exit 1; }

# shellcheck source=scripts/lock-lib.sh
. scripts/lock-lib.sh

[ -x "$VENV/bin/python" ] || python3 -m venv "$VENV"
ensure_uv "$VENV" "$LOCK"

# schedlens itself is installed without build isolation, from the lock's build backend (locked_build_requirements).
# shellcheck disable=SC2154  # uv_env comes from lock-lib.sh
env "${uv_env[@]}" "$VENV/bin/uv" pip install --python "$VENV/bin/python" --quiet --require-hashes \
  --constraint "$LOCK" -r pyproject.toml "${extras[@]}" -r <(locked_build_requirements "$LOCK")
env "${uv_env[@]}" "$VENV/bin/uv" pip install --python "$VENV/bin/python" --quiet --no-deps --no-build-isolation -e .
