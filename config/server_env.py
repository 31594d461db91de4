"""The settings of the server a checkout last started (``make run`` or ``make serve``), for the commands run beside it.

``make run`` keeps its state (database, spool, demo cluster) in ``var/demo/`` and ``make serve`` in ``var/cluster/``,
so nothing of the demo follows a served cluster. Each writes the environment it serves with to
``<state dir>/server-env.json`` and names that directory in ``var/current``. ``manage.py``, run from the same checkout
and shell, fills each variable of that file its own environment does not set and says so on stderr: ``replay_history``,
``verify_explanations`` and the others then read the database and the profiles that server uses, not the built-in
defaults. A variable set in the shell always wins; ``SCHEDLENS_VAR_DIR`` set in the shell picks that state directory
instead of the last one started.

Plain Python (no Django): ``manage.py`` loads it before the settings, and the scripts write it with
``python -m config.server_env write "make run"``.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Mapping, MutableMapping
from dataclasses import dataclass
from pathlib import Path

BASE_DIR = Path(__file__).resolve().parent.parent
FILE_NAME = "server-env.json"
POINTER_NAME = "current"
SHARED_NAMES = frozenset(
    {"DATABASE_URL", "DATABASE_URL_FILE", "REDIS_URL", "REDIS_URL_FILE", "PROMETHEUS_URL", "KUBECONFIG"}
)
"""Besides every ``SCHEDLENS_*`` variable: what decides which database, Redis, Prometheus and cluster a command sees."""
NOT_SHARED = frozenset({"SCHEDLENS_VAR_ROOT"})
"""Where the pointer lives is the shell's own choice, never the server's."""


def var_root(environ: Mapping[str, str] = os.environ) -> Path:
    """Where ``make run`` and ``make serve`` keep their state directories and the pointer to the last one started."""
    return Path(environ.get("SCHEDLENS_VAR_ROOT") or BASE_DIR / "var")


def server_variables(environ: Mapping[str, str]) -> dict[str, str]:
    return {
        name: value
        for name, value in sorted(environ.items())
        if (name.startswith("SCHEDLENS_") or name in SHARED_NAMES) and name not in NOT_SHARED
    }


def write(state_dir: Path, started_by: str, environ: Mapping[str, str] = os.environ) -> Path:
    """Record the server's environment in ``state_dir`` and make it the checkout's current server. The file may hold
    a database password (``DATABASE_URL``): it is readable by its owner only."""
    state_dir = state_dir.resolve()
    state_dir.mkdir(parents=True, exist_ok=True)
    path = state_dir / FILE_NAME
    body = {"started_by": started_by, "environment": server_variables(environ)}
    temporary = path.with_suffix(".tmp")
    descriptor = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(descriptor, "w", encoding="utf-8") as stream:
        json.dump(body, stream, indent=1)
    os.replace(temporary, path)
    root = var_root(environ)
    root.mkdir(parents=True, exist_ok=True)
    pointer = root / POINTER_NAME
    pointer.with_suffix(".tmp").write_text(f"{state_dir}\n", encoding="utf-8")
    os.replace(pointer.with_suffix(".tmp"), pointer)
    return path


@dataclass(frozen=True, slots=True)
class Loaded:
    path: Path
    started_by: str
    filled: tuple[str, ...]
    """The variables taken from the file (the shell set none of them)."""
    profiles_file: str

    def notice(self) -> str:
        profiles = self.profiles_file or "the built-in default profile"
        return (
            f"schedlens: the settings of the server {self.started_by} started ({self.path}): profiles from "
            f"{profiles}; a variable set in this shell wins"
        )


def load(environ: MutableMapping[str, str] = os.environ) -> Loaded | None:
    """Fill ``environ`` from the current server's file (see the module); None when there is none to read."""
    state_dir = environ.get("SCHEDLENS_VAR_DIR") or _pointed(var_root(environ))
    if not state_dir:
        return None
    path = Path(state_dir) / FILE_NAME
    try:
        body = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as exc:
        raise SystemExit(f"schedlens: {path} cannot be read ({exc}); remove it or set SCHEDLENS_VAR_DIR") from None
    variables: dict[str, str] = body.get("environment", {})
    filled = tuple(name for name in variables if name not in environ)
    for name in filled:
        environ[name] = variables[name]
    if not filled:
        return None
    return Loaded(path, str(body.get("started_by", "")), filled, environ.get("SCHEDLENS_CONFIG", ""))


def _pointed(root: Path) -> str:
    try:
        return (root / POINTER_NAME).read_text(encoding="utf-8").strip()
    except FileNotFoundError:
        return ""


if __name__ == "__main__":
    if len(sys.argv) != 3 or sys.argv[1] != "write":
        raise SystemExit('usage: python -m config.server_env write "make run"')
    write(Path(os.environ["SCHEDLENS_VAR_DIR"]), sys.argv[2])
