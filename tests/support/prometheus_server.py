"""Start a real Prometheus on series that a test writes, for tests of the Prometheus traffic source.

The series are written as OpenMetrics text, turned into TSDB blocks by
``promtool tsdb create-blocks-from openmetrics`` and served by ``prometheus`` listening on a free
loopback port, with no scrape targets: the only data are the samples the test wrote.

Samples may lie in the recent past and even in the future: promtool accepts them and Prometheus
2.42 queries the blocks as soon as it is ready. Tests place samples around "now" because an instant
query is evaluated at the server's current time.

Nothing here imports pytest; ``tests/conftest.py`` wraps it in fixtures.
"""

from __future__ import annotations

import math
import os
import shutil
import signal
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from tests.support.processes import free_port

READY_TIMEOUT_SECONDS = 20.0
STOP_TIMEOUT_SECONDS = 10.0

_MINIMAL_CONFIG = "global:\n  scrape_interval: 1h\nscrape_configs: []\n"


class PrometheusUnavailable(RuntimeError):
    """The ``prometheus`` or ``promtool`` binary is missing, or the server did not come up."""


@dataclass(frozen=True)
class Series:
    """One time series: its metric name, its labels and its ``(unix_seconds, value)`` samples.

    For a counter the name must end in ``_total`` (what PromQL queries); the OpenMetrics family
    name written on the ``# TYPE`` line is the name without that suffix, as the format requires.
    """

    metric: str
    labels: Mapping[str, str]
    samples: Sequence[tuple[float, float]]
    kind: Literal["counter", "gauge"] = "counter"

    @property
    def family(self) -> str:
        if self.kind == "counter":
            if not self.metric.endswith("_total"):
                raise ValueError(f"counter sample names end in _total in OpenMetrics, not {self.metric!r}")
            return self.metric.removesuffix("_total")
        return self.metric


def require_binaries() -> tuple[str, str]:
    """Paths of ``prometheus`` and ``promtool``, or :class:`PrometheusUnavailable` saying what is missing."""
    prometheus, promtool = shutil.which("prometheus"), shutil.which("promtool")
    if prometheus is None or promtool is None:
        missing = " and ".join(n for n, p in (("prometheus", prometheus), ("promtool", promtool)) if p is None)
        raise PrometheusUnavailable(
            f"{missing} not found on PATH (Debian: apt-get install prometheus); "
            'deselect these tests with -m "not prometheus"'
        )
    return prometheus, promtool


def _escape_label_value(value: str) -> str:
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def _format_number(value: float) -> str:
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "+Inf" if value > 0 else "-Inf"
    return repr(float(value))


def _format_timestamp(seconds: float) -> str:
    # TSDB keeps milliseconds; write exactly those so that what the test computes is what is stored.
    millis = round(seconds * 1000)
    whole, frac = divmod(millis, 1000)
    return str(whole) if frac == 0 else f"{whole}.{frac:03d}"


def to_openmetrics(series: Iterable[Series]) -> str:
    """OpenMetrics text for ``series``: one ``# TYPE`` per family, samples in time order, ``# EOF``."""
    families: dict[str, list[Series]] = {}
    kinds: dict[str, str] = {}
    for one in series:
        family = one.family
        if kinds.setdefault(family, one.kind) != one.kind:
            raise ValueError(f"metric family {family!r} is written both as {kinds[family]} and {one.kind}")
        families.setdefault(family, []).append(one)
    lines: list[str] = []
    for family, members in families.items():
        lines.append(f"# TYPE {family} {kinds[family]}")
        for one in members:
            labels = ",".join(f'{k}="{_escape_label_value(v)}"' for k, v in sorted(one.labels.items()))
            name = f"{one.metric}{{{labels}}}" if labels else one.metric
            for ts, value in sorted(one.samples):
                lines.append(f"{name} {_format_number(value)} {_format_timestamp(ts)}")
    lines.append("# EOF")
    return "\n".join(lines) + "\n"


@dataclass
class PrometheusServer:
    """A ``prometheus`` process serving the blocks under ``workdir / "tsdb"``."""

    workdir: Path
    port: int = 0
    process: subprocess.Popen[bytes] | None = None
    paused: bool = False
    _log: Path = field(init=False)

    def __post_init__(self) -> None:
        self._log = self.workdir / "prometheus.log"

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> str:
        """Start the server and wait (bounded) until ``/-/ready`` answers 200; returns the URL."""
        prometheus, _ = require_binaries()
        config = self.workdir / "prometheus.yml"
        config.write_text(_MINIMAL_CONFIG)
        last_error = ""
        for _ in range(3):  # another process may grab the free port before Prometheus binds it
            self.port = free_port()
            with self._log.open("ab") as log:
                self.process = subprocess.Popen(
                    [
                        prometheus,
                        f"--config.file={config}",
                        f"--storage.tsdb.path={self.workdir / 'tsdb'}",
                        # Retention counts back from the newest block; keep everything the test wrote.
                        "--storage.tsdb.retention.time=100y",
                        f"--web.listen-address=127.0.0.1:{self.port}",
                        "--log.level=warn",
                    ],
                    stdin=subprocess.DEVNULL,
                    stdout=log,
                    stderr=subprocess.STDOUT,
                    cwd=self.workdir,
                )
            try:
                self._wait_until_ready()
                return self.url
            except PrometheusUnavailable as exc:
                last_error = str(exc)
                self.stop()
        raise PrometheusUnavailable(last_error)

    def _wait_until_ready(self) -> None:
        assert self.process is not None
        deadline = time.monotonic() + READY_TIMEOUT_SECONDS
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise PrometheusUnavailable(
                    f"prometheus exited with code {self.process.returncode}:\n{self.log_tail()}"
                )
            try:
                with urllib.request.urlopen(f"{self.url}/-/ready", timeout=1.0) as response:
                    if response.status == 200:
                        return
            except (urllib.error.URLError, OSError):
                pass
            time.sleep(0.05)  # poll interval, not a wait for something to happen
        raise PrometheusUnavailable(f"prometheus not ready within {READY_TIMEOUT_SECONDS:g}s:\n{self.log_tail()}")

    def log_tail(self, lines: int = 20) -> str:
        try:
            return "\n".join(self._log.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return "(no log)"

    def pause(self) -> None:
        """Freeze the process (SIGSTOP): it keeps its socket, so clients connect and then wait."""
        assert self.process is not None
        assert self.process.poll() is None
        os.kill(self.process.pid, signal.SIGSTOP)
        self.paused = True

    def resume(self) -> None:
        """Undo :meth:`pause` (SIGCONT)."""
        if self.process is not None and self.paused:
            os.kill(self.process.pid, signal.SIGCONT)
        self.paused = False

    def stop(self) -> None:
        """Terminate (or, if it does not exit in time, kill) the process. Safe to call twice."""
        process, self.process = self.process, None
        if process is None:
            return
        if process.poll() is None:
            if self.paused:
                os.kill(process.pid, signal.SIGCONT)  # a stopped process would not act on SIGTERM
            process.terminate()
            try:
                process.wait(timeout=STOP_TIMEOUT_SECONDS)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
        self.paused = False

    def __enter__(self) -> PrometheusServer:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.stop()


def create_blocks(series: Iterable[Series], workdir: Path) -> Path:
    """Write ``series`` to ``workdir/series.om`` and turn it into TSDB blocks under ``workdir/tsdb``."""
    _, promtool = require_binaries()
    workdir.mkdir(parents=True, exist_ok=True)
    source = workdir / "series.om"
    source.write_text(to_openmetrics(series))
    tsdb = workdir / "tsdb"
    done = subprocess.run(
        [promtool, "tsdb", "create-blocks-from", "openmetrics", str(source), str(tsdb)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    if done.returncode != 0:
        raise PrometheusUnavailable(f"promtool failed ({done.returncode}):\n{done.stdout}\n{done.stderr}")
    return tsdb


def start_prometheus(series: Iterable[Series], workdir: Path) -> PrometheusServer:
    """Backfill ``series`` into a fresh TSDB in ``workdir`` and start Prometheus on it (caller stops it)."""
    create_blocks(series, workdir)
    server = PrometheusServer(workdir)
    server.start()
    return server
