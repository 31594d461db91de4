#!/usr/bin/env bash
# make test-latest: the suite against the newest releases pyproject.toml's ranges allow, in a scratch venv
# (var/test-latest/venv), so a refresh of requirements.lock is seen before it is made. Prints which packages are newer
# than the lock and which checks and tests broke on them, and keeps the whole output in var/test-latest/. It never
# fails the caller for what broke (it is not part of make test or CI): it exits 0 once the report is written, and
# non-zero only when it could not run. PYTEST_ARGS narrows its pytest run (e.g. to one directory).
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=scripts/lock-lib.sh
. scripts/lock-lib.sh

LOCK=${LOCK:-requirements.lock}
out=var/test-latest
venv=$out/venv
mkdir -p "$out"
rm -rf "$venv"
python3 -m venv "$venv"
ensure_uv "$venv" "$LOCK"
uv=("$venv/bin/uv" pip)
env "${uv_env[@]}" "${uv[@]}" install --python "$venv/bin/python" --quiet --upgrade -r pyproject.toml \
  --extra test -r <(build_requirements)
env "${uv_env[@]}" "${uv[@]}" install --python "$venv/bin/python" --quiet --no-deps --no-build-isolation -e .

# Packages whose installed version is not the lock's: what this run tries that make test does not.
newer=$("$venv/bin/python" scripts/off_lock.py --lock "$LOCK" | sed 's/^/  /')

# The one test that checks the venv against the lock is off by design here, where the venv is off the lock.
on_lock_test=tests/deploy/test_locked_installs.py::test_the_suite_runs_on_the_locks_versions_and_nothing_else
steps=(lint typecheck importlint migrations-check pytest)
declare -A status
for step in "${steps[@]}"; do
  echo "== make $step (newest releases)"
  if make --no-print-directory "$step" VENV="$venv" PYTEST_ARGS="-p no:cacheprovider --deselect $on_lock_test ${PYTEST_ARGS:-}" >"$out/$step.log" 2>&1; then
    status[$step]=passed
  else
    status[$step]=failed
  fi
  echo "   ${status[$step]}: $out/$step.log"
done

{
  echo "make test-latest, $(date -u +%Y-%m-%dT%H:%MZ): the suite on the newest releases pyproject.toml allows"
  echo
  echo "Newer than $LOCK:"
  echo "${newer:-  (none: the lock holds the newest releases)}"
  echo
  for step in "${steps[@]}"; do echo "make $step: ${status[$step]}"; done
  if [ "${status[pytest]}" = failed ]; then
    echo
    echo "Tests that broke (from $out/pytest.log):"
    grep -E '^(FAILED|ERROR) ' "$out/pytest.log" | sed 's/^/  /' || echo "  (none listed: read the log)"
    grep -E '^=+ .*(passed|failed).* in ' "$out/pytest.log" | tail -1 | sed 's/^/  /'
  fi
  for step in lint typecheck importlint migrations-check; do
    if [ "${status[$step]}" = failed ]; then echo; echo "make $step on the newest releases:"; tail -20 "$out/$step.log" | sed 's/^/  /'; fi
  done
} | tee "$out/report.txt"
