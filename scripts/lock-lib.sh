# shellcheck shell=bash
# What scripts/install.sh, scripts/lock.sh and scripts/test-latest.sh share: the installer itself (uv, at the
# version and hashes of requirements.lock) and the build requirements read from pyproject.toml.

# uv reads no user or system configuration and never downloads a Python: the machine's python3 makes the venvs.
uv_env=(UV_NO_CONFIG=1 UV_PYTHON_DOWNLOADS=never)

# The lock's entry for one package (its "name==version" line and hash lines), as a requirements file.
lock_entry() {  # lock_entry NAME LOCK
  awk -v name="$1" '
    index($0, name "==") == 1 { inside = 1 }
    inside { print; if ($0 !~ /\\$/) exit }
  ' "$2"
}

# uv in the venv, at the lock's version, installed by pip with the lock's hashes.
ensure_uv() {  # ensure_uv VENV LOCK
  local venv=$1 lock=$2 entry version
  entry=$(lock_entry uv "$lock")
  [ -n "$entry" ] || { echo "$lock has no entry for uv: run 'make lock'" >&2; return 1; }
  version=$(printf '%s\n' "$entry" | head -1 | sed -e 's/^uv==//' -e 's/[ ;\\].*//')
  if [ "$("$venv/bin/uv" --version 2>/dev/null | awk '{print $2}')" != "$version" ]; then
    "$venv/bin/python" -m pip install --quiet --disable-pip-version-check --require-hashes --no-deps \
      -r <(printf '%s\n' "$entry")
  fi
}

# pyproject.toml's [build-system] requires, one a line, as its ranges say (what make lock resolves).
build_requirements() {
  python3 -c 'import tomllib; print("\n".join(tomllib.load(open("pyproject.toml", "rb"))["build-system"]["requires"]))'
}

# The same, at the lock's versions and hashes, as a requirements file: schedlens itself is built without build
# isolation, from these, so its build backend is locked like everything else.
locked_build_requirements() {  # locked_build_requirements LOCK
  local name
  build_requirements | sed -e 's/[ <>=!~;[].*//' | while read -r name; do lock_entry "$name" "$1"; done
}
