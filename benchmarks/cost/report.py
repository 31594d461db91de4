"""The cost-per-pod benchmark's Markdown: the summary table, per-process tables, round trips and profiles.

``benchmarks/cost`` prints each size as it finishes, writes ``benchmarks/results-cost.md``, and
``benchmarks/suite.py`` embeds the same tables and checks issue 22's targets against ``figures``; keeping the
presentation apart from the measuring lets both share it. Everything here reads ``SizeResult`` values already
measured (``measure``) and runs nothing.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from pathlib import Path

from benchmarks.common import machine, now, p50, percentile, table
from benchmarks.cost.measure import API, INGEST, POSTGRES, WATCHER, WEB, Phases, SizeResult, group


def _f(value: float) -> str:
    return f"{value:.2f}"


def _spread(values: Sequence[float]) -> str:
    if len(values) < 2:
        return ""
    return f" (median {statistics.median(values):.2f}, {min(values):.2f}-{max(values):.2f})"


def figures(size: SizeResult, ph: Phases) -> dict[str, float]:
    """CPU ms per pod of one variant at one size. *ingest* is the concurrent run's when there is one: there a pod's
    filter, prioritize and bind records reach the ingester together, as kube-scheduler sends them; in the phases
    the binds are held back, so the ingester joins each to a cycle it stored already (*ingest, binds held back*).
    *total* is everything an installation runs for schedlens per pod: the verbs, the bind, the ingest, the placement
    watcher and the PostgreSQL backends they keep busy; *versus no-op* that total over the no-op extender's in the
    same run."""
    phased = ph.summary()
    c = next((c for c in size.concurrent if c.label == ph.label), None)
    out = {
        "verbs": phased["verbs"],
        "bind": phased["bind"],
        "ingest": phased["ingest"],
        "ingest, binds held back": phased["ingest"],
        "postgres": phased["postgres"],
        "watcher": phased["watcher"],
        "api server": phased["api server"],
        "concurrent": float("nan"),
        "round trip": float("nan"),
    }
    if c is not None and c.pods:
        out["ingest"] = group(c.cpu, INGEST) / c.pods * 1000
        out["postgres"] = group(c.cpu, (POSTGRES,)) / c.pods * 1000
        out["watcher"] = group(c.cpu, WATCHER) / c.pods * 1000
        out["api server"] = group(c.cpu, API) / c.pods * 1000
        out["concurrent"] = sum(group(c.cpu, g) for g in (WEB, INGEST, WATCHER, (POSTGRES,))) / c.pods * 1000
        out["round trip"] = p50(c.cycle_ms) if c.cycle_ms else float("nan")
    out["total"] = out["verbs"] + out["bind"] + out["ingest"] + out["watcher"] + out["postgres"]
    out["versus no-op"] = float("nan")
    noop = next((p for p in size.phases if p.label == size.noop), None)
    if noop is not None and noop is not ph:
        floor = figures(size, noop)
        out["versus no-op"] = out["total"] / floor["total"] if floor["total"] > 0 else float("nan")
        out["api server versus no-op"] = out["api server"] - floor["api server"]
    return out


def _known(value: float) -> bool:
    return value == value  # not NaN


def summary_rows(results: Sequence[SizeResult]) -> list[list[object]]:
    rows: list[list[object]] = []
    for size in results:
        for ph in size.phases:
            f = figures(size, ph)
            has_concurrent = _known(f["concurrent"])
            with_noop = size.noop is not None
            rows.append(
                [
                    size.nodes,
                    *([ph.label] if len(size.phases) > 1 else []),
                    f"{p50(ph.names):.0f} / {p50(ph.loop.prioritize_names or [0]):.0f}",
                    _f(f["verbs"]) + _spread(ph.rounds_verbs_ms),
                    _f(f["bind"]) + _spread(ph.rounds_bind_ms),
                    _f(f["ingest"]) + ("" if has_concurrent else " (binds held back)"),
                    _f(f["watcher"]),
                    _f(f["postgres"]),
                    f"**{f['total']:.2f}**",
                    *([f"{f['versus no-op']:.1f}×" if _known(f["versus no-op"]) else ""] if with_noop else []),
                    _f(f["concurrent"]) if has_concurrent else "",
                    _f(f["ingest, binds held back"]),
                    _f(f["api server"])
                    + (f" ({f['api server versus no-op']:+.2f})" if "api server versus no-op" in f else ""),
                    f"{sum(ph.loop.requests.values()) / max(1, ph.pods):.2f}",
                    f"{sum(ph.api.values()) / max(1, ph.pods):.2f}",
                    _f(f["round trip"]) if has_concurrent else "",
                ]
            )
    return rows


def summary_header(multi: bool, with_noop: bool = False) -> list[str]:
    return [
        "nodes",
        *(["variant"] if multi else []),
        "names to filter / prioritize",
        "verbs: filter + prioritize",
        "bind",
        "ingest",
        "placement watcher",
        "PostgreSQL",
        "total",
        *(["total / no-op's"] if with_noop else []),
        "all at once (concurrent run)",
        "ingest, binds held back",
        "Kubernetes-shaped API server" + (" (± no-op's)" if with_noop else ""),
        "HTTP requests to the extender",
        "API requests",
        "filter + prioritize round trip p50 (concurrent run)",
    ]


def process_rows(ph: Phases) -> list[list[object]]:
    rows = []
    for name in ph.total:
        per = [ph.verbs[name], ph.binds[name], ph.rest[name], ph.total[name]]
        if name == POSTGRES and not any(per):
            continue
        rows.append([name, *(_f(v / max(1, ph.pods) * 1000) for v in per), _f(ph.idle_per_second.get(name, 0.0))])
    return rows


def markdown(results: Sequence[SizeResult], command: str, seconds: float, bind_threads: int) -> list[str]:
    multi = any(len(r.phases) > 1 for r in results)
    with_noop = any(r.noop is not None for r in results)
    lines = [
        "CPU milliseconds per scheduled pod (utime + stime from `/proc/<pid>/stat`; *verbs*: the gunicorn master and "
        "workers while filter and prioritize ran for every pod, binds held back, spool appends included; *bind*: "
        "the same processes while the binds ran; *ingest*: the ingester and any process it started, in the "
        "concurrent run (a pod's three records arrive together, as kube-scheduler sends them; until drained); "
        "*placement watcher*: `manage.py watch_placements` (the pods and FailedScheduling Events it watches on the "
        "API server, the pending list, the reconcile), in the same run; *PostgreSQL*: the backends of the "
        "ingester's and the watcher's connections, in the same run; *total*: all five, everything an installation "
        "runs for schedlens per pod in this layout (no Redis: the traffic is the in-process synthetic source, whose "
        "refresh is per interval, not per pod); *all at once*: web, ingester, watcher and PostgreSQL CPU per pod in "
        "that run, a check on the sum; *ingest, binds "
        "held back*: the ingester over the phases, where it joins each bind to a cycle it stored already, a burst's "
        "cost). *Kubernetes-shaped API server*: the tests' API server (Python) taking the stack's Bindings and "
        "`Explained` Events, not counted in the total and not kube-apiserver's or etcd's cost, which only a real "
        "control plane shows (`docs/performance.md`). Requests per pod: HTTP requests kube-scheduler sends the "
        "extender, and requests the extender sends the API server (Bindings, pod reads after a 409, `Explained` "
        "Events). The round trip is the concurrent run's (binds on their own process, the ingester ingesting): "
        "request sent to last byte read, filter plus prioritize, i.e. what kube-scheduler's serial loop waits on "
        "the extender per pod."
        + (" With variants, the figures in parentheses are the median and the range over the rounds." if multi else "")
        + (
            " *extender=noop* is the protocol's cost floor, the no-op extender in Go (`shared/tools/noop-extender`: "
            "filter keeps every name, prioritize scores 0, bind posts the Binding), driven alike; *total / no-op's* "
            "reads each total against its total, and the API server's column adds in parentheses the difference to "
            "its API server's CPU."
            if with_noop
            else ""
        ),
        "",
        *table(summary_header(multi, with_noop), summary_rows(results)),
        "",
    ]
    floors = [
        f"{r.nodes} nodes: {r.floor['filter-sized request']:.2f} ms per filter-sized request, "
        f"{r.floor['bind']:.2f} ms per bind request"
        for r in results
        if r.floor
    ]
    if floors:
        lines += [
            "*HTTP floor*: CPU of the same gunicorn configuration serving the same requests with an empty WSGI app "
            "(`benchmarks/load/floor_wsgi.py`: the body read, `{}` answered, before Django), what every verb pays "
            "before schedlens does anything: " + "; ".join(floors) + ".",
            "",
        ]
    for size in results:
        for ph in size.phases:
            name = f"{size.nodes} nodes" + (f", {ph.label}" if multi else "")
            api = ", ".join(f"{k} {v / max(1, ph.pods):.2f}" for k, v in sorted(ph.api.items())) or "none"
            errors = f" **{len(ph.loop.errors)} errors**, first: `{ph.loop.errors[0][:200]}`." if ph.loop.errors else ""
            lines += [
                f"### {name}: every process, CPU ms per pod by phase",
                "",
                f"{ph.pods} pods ({ph.loop.requests['filter']} filter, {ph.loop.requests['prioritize']} prioritize, "
                f"{ph.loop.requests['bind']} bind calls; {ph.bound} pods bound in the API server; API requests per "
                f"pod: {api}). Binds on a pool of {bind_threads} connections. The drain after the last bind took "
                f"{ph.drain_seconds:.1f} s.{errors} *Idle* is each process's CPU with nothing to do, in ms per "
                "second (background threads: traffic refresh, bind-intent reconciler, spool polling).",
                "",
                *table(
                    ["process", "phase 1: filter + prioritize", "phase 2: binds", "between, drain", "all", "idle ms/s"],
                    process_rows(ph),
                ),
                "",
                "Round trips in phase 1 / 2 (ms, p50 / p99): filter "
                f"{p50(ph.loop.filter_ms):.2f} / {percentile(ph.loop.filter_ms, 99):.2f}, prioritize "
                f"{p50(ph.loop.prioritize_ms or [0]):.2f} / {percentile(ph.loop.prioritize_ms or [0], 99):.2f}, bind "
                f"{p50(ph.loop.bind_ms or [0]):.2f} / {percentile(ph.loop.bind_ms or [0], 99):.2f}.",
                "",
            ]
        for c in size.concurrent:
            name = f"{size.nodes} nodes" + (f", {c.label}" if multi else "")
            web = group(c.cpu, WEB) / max(1, c.pods) * 1000
            ingest = group(c.cpu, INGEST) / max(1, c.pods) * 1000
            postgres = group(c.cpu, (POSTGRES,)) / max(1, c.pods) * 1000
            errors = f" **{len(c.errors)} errors**, first: `{c.errors[0][:200]}`." if c.errors else ""
            lines += [
                f"### {name}: concurrent run",
                "",
                f"{c.pods} pods at the loop's own pace ({c.pods / c.seconds * len(size.concurrent):.0f} pods/s"
                + (", the variants' pods alternating" if multi else "")
                + "), binds posted from a separate process on 4 connections while the loop goes on, the ingester "
                f"ingesting. CPU per pod: web {web:.2f} ms, ingester {ingest:.2f} ms, PostgreSQL {postgres:.2f} ms, "
                f"total {web + ingest + postgres:.2f} ms." + errors,
                "",
                *table(
                    ["round trip (ms)", "p50", "p90", "p99"],
                    [
                        [label, _f(p50(v)), _f(percentile(v, 90)), _f(percentile(v, 99))]
                        for label, v in (
                            ("filter", c.filter_ms),
                            ("prioritize", c.prioritize_ms),
                            ("filter + prioritize", c.cycle_ms),
                            ("bind (concurrently)", c.bind_ms),
                        )
                        if v
                    ],
                ),
                "",
            ]
    return lines


def profile_markdown(results: Sequence[SizeResult]) -> list[str]:
    """The profiles of a ``--py-spy`` run: per size, variant and phase, the frames in most samples."""
    names = {"verbs": "web workers, filter + prioritize", "bind": "web workers, binds", "ingest": "ingester"}
    lines = [
        "Share of `py-spy record` samples (250 Hz) that were in each frame or below it (*inclusive*), of the samples "
        "not blocked (waiting on a lock, a socket, PostgreSQL or the keep-alive poll); the threads' and commands' "
        "own frames left out. The web workers in phase 1 (filter + prioritize) and phase 2 (binds), the ingester "
        "during the concurrent run. A thread waiting for the interpreter lock or a core counts as not blocked, so "
        "code that runs beside busy threads (a socket write returning) weighs more than its CPU. Sampling slows what "
        "it samples, so this run's CPU figures are not reported.",
        "",
    ]
    for size in results:
        for (label, phase), top in size.profiles.items():
            title = f"{size.nodes} nodes" + (f", {label}" if len(size.variants) > 1 else "") + f": {names[phase]}"
            lines += [
                f"### {title}",
                "",
                *table(["frame (file)", "samples"], [[f"`{n}`", f"{v:.0%}"] for n, v in top]),
                "",
            ]
    return lines


def write_results(path: Path, lines: list[str], command: str, seconds: float, *, title: str, append: bool) -> None:
    """The results file: a header (machine, date) and this run as a section; ``append`` adds the section to it."""
    section = [f"## {title}", "", f"`{command}` ({now()}, {seconds:.0f} s).", "", *lines]
    if append and path.exists():
        path.write_text(path.read_text().rstrip("\n") + "\n\n" + "\n".join(section))
        return
    header = [
        "# schedlens: cost per scheduled pod",
        "",
        f"Measured on {machine()}, PostgreSQL on the same machine, by `python -m benchmarks.cost` (what it measures "
        "and how: the docstring of `benchmarks/cost/per_pod.py`), one run per section below with its command. "
        "Guidance from these figures: "
        "[docs/performance.md](../docs/performance.md#cost-per-scheduled-pod).",
        "",
    ]
    path.write_text("\n".join(header + section))
