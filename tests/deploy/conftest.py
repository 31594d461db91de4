"""Fixtures of the deploy tests: what an operator's install produces."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from tests.support.paths import REPO


@pytest.fixture(scope="session")
def runtime_venv(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A venv holding the runtime set, made as ``make run`` and ``make serve`` make theirs (scripts/install.sh)."""
    venv = tmp_path_factory.mktemp("runtime") / "venv"
    done = subprocess.run(
        ["bash", str(REPO / "scripts" / "install.sh"), "runtime"],
        cwd=REPO,
        env={**os.environ, "VENV": str(venv)},
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr
    return venv
