#!/usr/bin/env bash
# Make sure the services the tests use for real are there: PostgreSQL and Redis reachable on loopback,
# Prometheus and promtool installed. Installs Debian packages and starts daemons only when missing.
set -euo pipefail

need_apt=()
command -v redis-server >/dev/null || need_apt+=(redis-server)
command -v pg_ctlcluster >/dev/null || need_apt+=(postgresql)
command -v prometheus >/dev/null && command -v promtool >/dev/null || need_apt+=(prometheus)
# The dashboard end-to-end tests drive Debian's Chromium (never a browser Playwright downloads).
[ -x /usr/bin/chromium ] || need_apt+=(chromium)
if ((${#need_apt[@]})); then
  echo "installing ${need_apt[*]} from Debian packages"
  if [ "$(id -u)" -eq 0 ]; then SUDO=""; else SUDO="sudo"; fi
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${need_apt[@]}" >/dev/null
fi

port_open() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

if ! port_open 5432; then
  echo "starting PostgreSQL"
  version=$(ls /etc/postgresql | sort -n | tail -1)
  hba="/etc/postgresql/$version/main/pg_hba.conf"
  # The tests connect as postgres over loopback without a password, as on the CI machines.
  if ! grep -q "schedlens-test" "$hba"; then
    sed -i '1i host all all 127.0.0.1/32 trust # schedlens-test\nhost all all ::1/128 trust # schedlens-test' "$hba"
  fi
  pg_ctlcluster --skip-systemctl-redirect "$version" main start
fi
for _ in $(seq 1 50); do port_open 5432 && break; sleep 0.2; done
port_open 5432 || { echo "PostgreSQL did not come up on 127.0.0.1:5432" >&2; exit 1; }

if ! port_open 6379; then
  echo "starting Redis"
  mkdir -p /var/lib/redis /var/log/redis
  redis-server --daemonize yes --bind 127.0.0.1 -::1 --port 6379 --save "" --appendonly no \
    --dir /var/lib/redis --logfile /var/log/redis/ci.log
fi
for _ in $(seq 1 50); do port_open 6379 && break; sleep 0.2; done
port_open 6379 || { echo "Redis did not come up on 127.0.0.1:6379" >&2; exit 1; }
echo "services ready: PostgreSQL 127.0.0.1:5432, Redis 127.0.0.1:6379, $(prometheus --version 2>&1 | head -1)"
