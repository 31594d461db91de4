#!/usr/bin/env bash
# `make serve`: schedlens for a real cluster, from a checkout. Uses KUBECONFIG (or the in-cluster configuration):
# the watching node cache, real Bindings and the traffic refresh (threads of the web server), the ingester and the
# placement watcher (processes of their own, as deployed), supervised together: when one stops the others are
# stopped, and Ctrl-C stops them all. SQLite in var/ unless DATABASE_URL is set; traffic from PROMETHEUS_URL, else none (never the demo's synthetic traffic).
set -euo pipefail
cd "$(dirname "$0")/.."
VENV=${VENV:-.venv}
PY="$VENV/bin/python"
PORT=${PORT:-8000}
# kube-scheduler must reach this address: a kind cluster's control plane reaches the host at its Docker network's
# gateway, any other cluster at an address of this machine it can route to.
ADVERTISE_ADDRESS=${ADVERTISE_ADDRESS:-$(hostname -I 2>/dev/null | awk '{print $1}')}
ADVERTISE_ADDRESS=${ADVERTISE_ADDRESS:-127.0.0.1}
export HOST=${HOST:-0.0.0.0} PORT
# Another server on this port would answer the readiness wait below in this one's place: say so and stop.
if ! "$PY" -c "import socket, sys; s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1); s.bind(('${HOST:-127.0.0.1}', int(sys.argv[1])))" "$PORT" 2>/dev/null; then
  echo "port $PORT is already in use (another schedlens still running?): stop it, or choose another PORT" >&2
  exit 1
fi
export SCHEDLENS_BIND_MODE=kubernetes SCHEDLENS_CLUSTER_SOURCE=kubernetes SCHEDLENS_CLUSTER_FILE= SCHEDLENS_SYNTHETIC_TRAFFIC=false
# The ingester runs as its own process (below), as deployed: as a thread of the web workers it would hold the
# interpreter lock the verbs wait for while it decodes and stores a batch.
export SCHEDLENS_INGEST_IN_PROCESS=false
# The ingester's process also follows what each placement did to traffic (dashboard.outcomes), unless Celery does.
export SCHEDLENS_OUTCOME_RUNNER=${SCHEDLENS_OUTCOME_RUNNER:-process}
export DJANGO_ALLOWED_HOSTS=${DJANGO_ALLOWED_HOSTS:-localhost,127.0.0.1,$ADVERTISE_ADDRESS}
# A served cluster's state (database, spool) lives in var/cluster/, apart from the demo's (var/demo/, `make run`).
export SCHEDLENS_VAR_DIR=${SCHEDLENS_VAR_DIR:-${SCHEDLENS_VAR_ROOT:-$PWD/var}/cluster}
mkdir -p "$SCHEDLENS_VAR_DIR"
if [ -z "${PROMETHEUS_MULTIPROC_DIR:-}" ]; then
  export PROMETHEUS_MULTIPROC_DIR=$SCHEDLENS_VAR_DIR/prometheus-multiproc
  rm -rf "$PROMETHEUS_MULTIPROC_DIR"
fi
mkdir -p "$PROMETHEUS_MULTIPROC_DIR"
if [ -e var/schedlens.sqlite3 ] && [ -z "${DATABASE_URL:-}" ]; then
  echo "note: var/schedlens.sqlite3, the database earlier versions shared between make run and make serve, is no" \
    "longer used: make serve keeps $SCHEDLENS_VAR_DIR/schedlens.sqlite3" >&2
fi

"$PY" manage.py check_kubernetes   # says plainly why not when there is no usable Kubernetes configuration
# Commands run from this checkout (`manage.py replay_history`, …) now see this server's database and profiles.
"$PY" -m config.server_env write "make serve"
# Its checks refuse to serve where a user has the demo's password, or the database holds the demo's audit chain.
"$PY" manage.py migrate --noinput
"$PY" manage.py collectstatic --noinput -v0

url="http://$ADVERTISE_ADDRESS:$PORT"
# The kube-scheduler configurations with this URL, each working as written where it runs
# (scheduler_core/kube/scheduler_config.py); the command that starts one beside this server.
start_scheduler=$("$PY" -m scheduler_core.kube.scheduler_config --url "$url" --out-dir "$SCHEDLENS_VAR_DIR")

pids=()
stop() {
  trap - INT TERM EXIT
  kill "${pids[@]}" 2>/dev/null || true
  wait "${pids[@]}" 2>/dev/null || true
}
trap 'stop; exit 130' INT TERM
trap stop EXIT

"$VENV/bin/gunicorn" --config python:config.gunicorn_conf config.wsgi:application &
pids+=($!)
"$PY" manage.py ingest_spool --follow &
pids+=($!)
"$PY" manage.py watch_placements &
pids+=($!)

for _ in $(seq 1 150); do
  if "$PY" -c "import urllib.request; urllib.request.urlopen('http://127.0.0.1:$PORT/readyz', timeout=1)" 2>/dev/null; then
    break
  fi
  for pid in "${pids[@]}"; do
    kill -0 "$pid" 2>/dev/null || { echo "a schedlens process exited while starting; see above" >&2; exit 1; }
  done
  sleep 0.2
done

profiles=$("$PY" manage.py simulate --list-profiles | paste -sd' ')
cat <<EOF

schedlens is serving the cluster of your Kubernetes configuration on $url (profiles: $profiles)
  start kube-scheduler beside it: $start_scheduler
    (full Node objects instead of names: $SCHEDLENS_VAR_DIR/scheduler-config-fullnodes.yaml)
  the second scheduler inside the cluster (deploy/kubernetes/kube-scheduler.yaml) takes
    $SCHEDLENS_VAR_DIR/scheduler-config-in-cluster.yaml
  each calls urlPrefix $url/extender/default (another profile: /extender/<profile>)
  traffic: ${PROMETHEUS_URL:-none measured: set PROMETHEUS_URL (until then every node scores by missingPolicy, and says why)}
  dashboard: $url/   (python manage.py createsuperuser)
  a step-by-step on a local kind cluster: docs/try-it-on-kind.md
Ctrl-C stops it.
EOF

# The first process to stop stops the others (the trap), with its status.
set +e
wait -n "${pids[@]}"
status=$?
echo "a schedlens process stopped (status $status); stopping the others" >&2
exit "$status"
