"""The packages a Python environment holds at a version other than requirements.lock's, or that the lock does not name.

    python scripts/off_lock.py [--lock requirements.lock] [--python PYTHON]

Prints one line a package, ``name lock's-version -> installed-version`` (``(not locked)`` where the lock has no entry
for it), and nothing when the environment is on the lock. ``PYTHON``: the environment to read (default: the one
running this), of the same Python and platform, since the lock's environment markers (``; python_full_version <
'3.12'``) are evaluated here, with ``packaging`` (the test set has it). Used by ``make test`` (to check its own venv
and the runtime set's) and ``make test-latest`` (to say what it tries that the lock does not hold).
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
from pathlib import Path

from packaging.markers import Marker
from packaging.utils import canonicalize_name

NOT_LOCKED = {"pip", "schedlens"}
"""What a venv holds that no lock names: the installer ``python3 -m venv`` seeds, and schedlens itself."""

_ENTRY = re.compile(r"^([A-Za-z0-9][A-Za-z0-9._-]*)==([^\s;\\]+)(?: ; ([^\\\n]+))?", re.M)
_LIST = "from importlib import metadata\nfor d in metadata.distributions(): print(d.name, d.version)"


def locked_versions(lock: Path) -> dict[str, str]:
    """Name -> version of every lock entry whose environment marker holds for this Python and platform."""
    return {
        canonicalize_name(name): version
        for name, version, marker in _ENTRY.findall(lock.read_text())
        if not marker or Marker(marker.strip()).evaluate()
    }


def installed_versions(python: str) -> dict[str, str]:
    listing = subprocess.run([python, "-c", _LIST], capture_output=True, text=True, check=True).stdout
    return {canonicalize_name(name): version for name, version in (line.split() for line in listing.splitlines())}


def off_lock(lock: Path, python: str) -> list[str]:
    locked = locked_versions(lock)
    return [
        f"{name} {locked.get(name, '(not locked)')} -> {version}"
        for name, version in sorted(installed_versions(python).items())
        if name not in NOT_LOCKED and locked.get(name) != version
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lock", type=Path, default=Path(__file__).resolve().parents[1] / "requirements.lock")
    parser.add_argument("--python", default=sys.executable)
    args = parser.parse_args()
    for line in off_lock(args.lock, args.python):
        print(line)


if __name__ == "__main__":
    main()
