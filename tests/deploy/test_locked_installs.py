"""Every install the project makes comes from requirements.lock: the suite runs on the lock's versions alone, and
``make run`` / ``make serve`` install the runtime set and nothing of the test or bench extras."""

from __future__ import annotations

import re
import subprocess
import sys
from importlib import metadata
from pathlib import Path

from packaging.utils import canonicalize_name

from tests.support.paths import REPO

LOCK = REPO / "requirements.lock"


def off_lock(python: Path) -> list[str]:
    """``scripts/off_lock.py``'s lines for the environment of ``python``: each package not at the lock's version."""
    done = subprocess.run(
        [sys.executable, str(REPO / "scripts" / "off_lock.py"), "--lock", str(LOCK), "--python", str(python)],
        capture_output=True,
        text=True,
        check=True,
    )
    return done.stdout.splitlines()


def installed_names(python: Path) -> set[str]:
    program = "from importlib import metadata\nfor d in metadata.distributions(): print(d.name)"
    listing = subprocess.run([str(python), "-c", program], capture_output=True, text=True, check=True).stdout
    return {canonicalize_name(name) for name in listing.split()}


def test_the_suite_runs_on_the_locks_versions_and_nothing_else() -> None:
    assert off_lock(Path(sys.executable)) == [], "name lock -> installed: run make install-test, or make lock"
    # The test extra is what this venv was made from: its packages are all here, at the lock's versions.
    assert {"pytest", "mypy", "playwright", "msgspec", "django"} <= installed_names(Path(sys.executable))


def test_make_run_and_serve_install_the_runtime_set_and_make_test_the_test_set(tmp_path: Path) -> None:
    def commands(target: str) -> str:
        venv = tmp_path / target
        return subprocess.run(
            ["make", "--dry-run", "--always-make", target, f"VENV={venv}"],
            cwd=REPO,
            capture_output=True,
            text=True,
            check=True,
        ).stdout

    for target in ("run", "serve", "worker", "beat"):
        assert "scripts/install.sh runtime" in commands(target), target
        assert "scripts/install.sh test" not in commands(target), target
    assert "scripts/install.sh test" in commands("test")
    assert "scripts/install.sh bench" in commands("bench")


def test_the_runtime_set_holds_what_schedlens_runs_on_and_none_of_the_test_tools(runtime_venv: Path) -> None:
    installed = installed_names(runtime_venv / "bin" / "python")

    assert off_lock(runtime_venv / "bin" / "python") == []
    assert {"django", "celery", "kubernetes", "msgspec", "gunicorn"} <= installed
    assert {"pytest", "mypy", "playwright", "schemathesis", "ruff", "py-spy"} & installed == set()
    checked = subprocess.run(
        [str(runtime_venv / "bin" / "python"), "manage.py", "check", "--fail-level", "ERROR"],
        cwd=REPO,
        capture_output=True,
        text=True,
    )
    assert checked.returncode == 0, checked.stderr
    assert (runtime_venv / "bin" / "kubectl-schedlens").is_file(), "the package's console script is installed"


def test_every_pip_install_in_the_projects_files_takes_the_lock() -> None:
    """A pip or uv install written anywhere an install is made: from the lock's hashes, or schedlens itself alone."""
    files = [REPO / "Makefile", REPO / "Dockerfile", REPO / ".ci" / "run", *sorted((REPO / "scripts").glob("*.sh"))]
    unlocked = []
    for path in files:
        if path.name in ("test-latest.sh", "lock.sh"):  # the newest releases on purpose: to try them, to lock them
            continue
        for line in _logical_lines(path.read_text()):
            if not re.search(r"\bpip install\b", line):
                continue
            from_lock = "--require-hashes" in line
            itself = "--no-deps" in line and re.search(r"(-e )?\.(\s|$|\\)", line + " ")
            if not (from_lock or itself):
                unlocked.append(f"{path.relative_to(REPO)}: {line.strip()}")
    assert unlocked == []


def _logical_lines(text: str) -> list[str]:
    """Lines with their backslash continuations joined, as the shell reads them."""
    return re.sub(r"\\\n", " ", text).splitlines()


def test_the_lock_records_no_download_address() -> None:
    text = LOCK.read_text()

    assert "://" not in text
    assert re.search(r"^uv==", text, re.M), "the installer is locked too"
    assert re.search(r"^setuptools==", text, re.M), "the build backend is locked too"
    assert metadata.version("msgspec") in text
