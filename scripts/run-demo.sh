#!/usr/bin/env bash
# `make run`: migrate, write a demo cluster, serve the extender under gunicorn (keep-alive), and fill the
# history with a simulated kube-scheduler. Uses DATABASE_URL / REDIS_URL / PROMETHEUS_URL when set.
set -euo pipefail
cd "$(dirname "$0")/.."
VENV=${VENV:-.venv}
PY="$VENV/bin/python"
PORT=${PORT:-8000}
DEMO_NODES=${DEMO_NODES:-40}
DEMO_PODS=${DEMO_PODS:-150}
# Another server on this port would answer the readiness wait below in this one's place: say so and stop.
if ! "$PY" -c "import socket, sys; s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1); s.bind(('${HOST:-127.0.0.1}', int(sys.argv[1])))" "$PORT" 2>/dev/null; then
  echo "port $PORT is already in use (another schedlens still running?): stop it, or choose another PORT" >&2
  exit 1
fi

# The demo's state (database, spool, demo cluster) lives in var/demo/, apart from what `make serve` keeps for a real
# cluster (var/cluster/): nothing of the demo follows an operator there.
export SCHEDLENS_VAR_DIR=${SCHEDLENS_VAR_DIR:-${SCHEDLENS_VAR_ROOT:-$PWD/var}/demo}
mkdir -p "$SCHEDLENS_VAR_DIR"
if [ -z "${PROMETHEUS_MULTIPROC_DIR:-}" ]; then
  export PROMETHEUS_MULTIPROC_DIR=$SCHEDLENS_VAR_DIR/prometheus-multiproc  # /metrics sums all gunicorn workers
  rm -rf "$PROMETHEUS_MULTIPROC_DIR"
fi
mkdir -p "$PROMETHEUS_MULTIPROC_DIR"
export SCHEDLENS_CLUSTER_FILE=${SCHEDLENS_CLUSTER_FILE:-$SCHEDLENS_VAR_DIR/demo-cluster.json}
export SCHEDLENS_CONFIG=${SCHEDLENS_CONFIG:-$PWD/deploy/profiles.demo.yaml}
export SCHEDLENS_BIND_MODE=${SCHEDLENS_BIND_MODE:-simulated}
# History replays started from the dashboard or the API run in a process of their own (no Celery worker here),
# never in the verbs' processes.
export SCHEDLENS_REPLAY_RUNNER=${SCHEDLENS_REPLAY_RUNNER:-process}
# run_replays also follows what each placement did to traffic (dashboard.outcomes). The synthetic traffic has no
# scrape to wait for: a placement's first window is read as soon as it has passed, so outcomes show within a minute.
export SCHEDLENS_OUTCOME_RUNNER=${SCHEDLENS_OUTCOME_RUNNER:-process}
if [ -z "${PROMETHEUS_URL:-}" ]; then
  export SCHEDLENS_OUTCOME_GRACE_SECONDS=${SCHEDLENS_OUTCOME_GRACE_SECONDS:-0} SCHEDLENS_OUTCOME_INTERVAL_SECONDS=${SCHEDLENS_OUTCOME_INTERVAL_SECONDS:-10}
fi

# Commands run from this checkout (`manage.py replay_history`, …) now see this server's database and profiles.
"$PY" -m config.server_env write "make run"
"$PY" manage.py migrate --noinput   # its checks refuse a database that holds a real cluster's audit chain
"$PY" manage.py collectstatic --noinput -v0
"$PY" manage.py ensure_demo_user   # demo/demo, refused unless SCHEDLENS_BIND_MODE=simulated
"$PY" manage.py simulate --nodes "$DEMO_NODES" --write-cluster "$SCHEDLENS_CLUSTER_FILE"

"$VENV/bin/gunicorn" --config python:config.gunicorn_conf config.wsgi:application &
server=$!
replays=
if [ "$SCHEDLENS_REPLAY_RUNNER" = process ]; then
  "$PY" manage.py run_replays &
  replays=$!
fi
trap 'kill $server $replays 2>/dev/null; wait $server $replays 2>/dev/null' EXIT INT TERM

for _ in $(seq 1 100); do
  if "$PY" -c "import urllib.request,sys; urllib.request.urlopen('http://127.0.0.1:$PORT/readyz', timeout=1)" 2>/dev/null; then break; fi
  kill -0 $server 2>/dev/null || { echo "the server exited; see above" >&2; exit 1; }
  sleep 0.2
done

# The demo history goes through the profiles SCHEDLENS_CONFIG defines (an operator's own file too): the first gets
# DEMO_PODS pods over NodeNames, each next one a third as many over full Node objects. A fill that fails says so and
# the server keeps serving: the demo's history is a convenience, the extender is the point.
mapfile -t profiles < <("$PY" manage.py simulate --list-profiles)
pods=$DEMO_PODS mode=names seed=7
for profile in "${profiles[@]}"; do
  echo "filling demo history through profile $profile: $pods pods, $mode"
  if ! "$PY" manage.py simulate --url "http://127.0.0.1:$PORT/extender/$profile" --nodes "$DEMO_NODES" \
      --pods "$pods" --mode "$mode" --seed "$seed"; then
    echo "the demo fill through profile $profile failed (see above); schedlens keeps serving" >&2
  fi
  pods=$((DEMO_PODS / 3)) mode=nodes seed=$((seed + 2))
done
# A few pods no node takes, as the placement watcher would list them: the Pending page says what holds each back.
echo "leaving ${DEMO_WAITING:-3} pods waiting for a node, through profile ${profiles[0]}"
if ! "$PY" manage.py simulate --url "http://127.0.0.1:$PORT/extender/${profiles[0]}" --nodes "$DEMO_NODES" \
    --pods 0 --leave-waiting "${DEMO_WAITING:-3}" --seed 7; then  # seed 7: the cluster the server was given
  echo "leaving demo pods waiting failed (see above); schedlens keeps serving" >&2
fi

echo
echo "schedlens is serving on http://127.0.0.1:$PORT"
echo "  extender urlPrefix: http://127.0.0.1:$PORT/extender/<profile>   (profiles: ${profiles[*]})"
echo "  dashboard:          http://127.0.0.1:$PORT/   (log in as demo / demo; pods waiting: /pending/)"
echo "  admin:              http://127.0.0.1:$PORT/admin/   (python manage.py createsuperuser)"
echo "Ctrl-C stops it."
wait $server
