#!/usr/bin/env bash
# make lock: refresh requirements.lock to the newest releases pyproject.toml's ranges allow, for every set (runtime,
# test, bench), the build backend and the installer (uv) itself, with every file's hash, for any platform on
# Python 3.11 and newer. LOCK_KEEP=1 (make lock LOCK_KEEP=1) keeps every version the lock holds and resolves only what
# pyproject.toml added since: a new dependency, nothing else moved. Commit the result once `make test` passes on it; `make test-latest` shows in advance what a
# refresh would break.
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=scripts/lock-lib.sh
. scripts/lock-lib.sh

VENV=${VENV:-.venv}
LOCK=${LOCK:-requirements.lock}
if [ -f "$LOCK" ]; then
  [ -x "$VENV/bin/python" ] || python3 -m venv "$VENV"
  ensure_uv "$VENV" "$LOCK"
  uv="$VENV/bin/uv"
else  # the first lock: any uv will do to make it
  tools=var/lock-tools
  [ -x "$tools/bin/uv" ] || { python3 -m venv "$tools" && "$tools/bin/pip" install --quiet uv; }
  uv="$tools/bin/uv"
fi
upgrade=(--upgrade)
[ "${LOCK_KEEP:-0}" = 1 ] && upgrade=()
{ build_requirements; echo uv; } | env "${uv_env[@]}" "$uv" pip compile --quiet "${upgrade[@]}" --universal \
  --python-version 3.11 --generate-hashes --extra test --extra bench --output-file "$LOCK" pyproject.toml -
echo "$LOCK: $(grep -c '^[A-Za-z0-9].*==' "$LOCK") packages locked"
