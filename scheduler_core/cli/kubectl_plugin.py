"""``kubectl schedlens``: the audit API (``/api/v1/``) from a terminal, as a kubectl plugin.

Installed as the console script ``kubectl-schedlens`` (kubectl runs any ``kubectl-<name>`` on the PATH). Plain
Python: the standard library's HTTP client and PyYAML, no Django, so it runs wherever the package is installed.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import yaml

from scheduler_core.cli.failure_reasons import connection_failure, file_failure
from scheduler_core.cli.kubectl_pending import render_pending, render_pending_pod
from scheduler_core.extender.protocol.decode_errors import yaml_location

EXIT_OK = 0
EXIT_BROKEN = 1
EXIT_USAGE = 2
EXIT_NOT_FOUND = 3
EXIT_UNAUTHORIZED = 4
EXIT_UNAVAILABLE = 5

CONFIG_FILE_ENV = "SCHEDLENS_KUBECTL_CONFIG"
"""Overrides the config file's path (``SCHEDLENS_CONFIG`` is the server's profiles file, a different thing)."""

EPILOG = f"""\
--server, --token, -o, --timeout and -n go before or after the command, as kubectl's flags do (the last wins).
connection: --server/--token, else $SCHEDLENS_SERVER/$SCHEDLENS_TOKEN, else the file
$SCHEDLENS_KUBECTL_CONFIG (default ~/.config/schedlens/config.yaml) with keys server: and token:.
The token is an auditor's (manage.py create_audit_token NAME), sent as "Authorization: Token <token>".

exit codes:
  {EXIT_OK}  ok
  {EXIT_BROKEN}  verify: the audit chain is broken
  {EXIT_USAGE}  usage error (bad arguments, no server configured, a value the API refused)
  {EXIT_NOT_FOUND}  not found (404): no cycle recorded for the pod, no such node
  {EXIT_UNAUTHORIZED}  unauthorized or forbidden (401/403): missing or bad token, not an auditor
  {EXIT_UNAVAILABLE}  server unreachable, throttled, or a server error (5xx)
"""


class CliError(Exception):
    """One line for stderr and the exit code that goes with it."""

    def __init__(self, message: str, code: int) -> None:
        super().__init__(message)
        self.code = code


# --- connection ---------------------------------------------------------------------------------------------------


def config_path() -> Path:
    explicit = os.environ.get(CONFIG_FILE_ENV)
    if explicit:
        return Path(explicit).expanduser()
    base = os.environ.get("XDG_CONFIG_HOME") or str(Path.home() / ".config")
    return Path(base) / "schedlens" / "config.yaml"


def _config_file() -> dict[str, str]:
    path = config_path()
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return {}
    except (OSError, UnicodeDecodeError) as exc:
        raise CliError(f"cannot read the config file {path}: {file_failure(exc)}", EXIT_USAGE) from None
    except yaml.YAMLError as exc:
        raise CliError(f"the config file {path} is not valid YAML{yaml_location(exc)}", EXIT_USAGE) from None
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise CliError(f"the config file {path} must be a mapping with server: and token:", EXIT_USAGE)
    return {key: str(data[key]) for key in ("server", "token") if data.get(key) is not None}


def connection(server: str | None, token: str | None) -> tuple[str, str]:
    """The server's base URL and the token: flags first, then the environment, then the config file."""
    server = server or os.environ.get("SCHEDLENS_SERVER") or None
    token = token or os.environ.get("SCHEDLENS_TOKEN") or None
    if server is None or token is None:
        stored = _config_file()
        server = server or stored.get("server")
        token = token or stored.get("token")
    if not server:
        raise CliError(f"no server: pass --server, set SCHEDLENS_SERVER or put server: in {config_path()}", EXIT_USAGE)
    if urllib.parse.urlsplit(server).scheme not in ("http", "https"):
        raise CliError(f"the server must be an http:// or https:// URL, not {server!r}", EXIT_USAGE)
    return server.rstrip("/"), token or ""


class Api:
    def __init__(self, server: str, token: str, timeout: float) -> None:
        self.server = server
        self.token = token
        self.timeout = timeout

    def get(self, path: str, params: dict[str, str] | None = None, *, not_found: str = "") -> Any:
        """GET ``/api/v1/<path>`` as JSON; an error status becomes a ``CliError`` with its exit code."""
        query = urllib.parse.urlencode({k: v for k, v in (params or {}).items() if v})
        url = f"{self.server}/api/v1/{path}" + (f"?{query}" if query else "")
        headers = {"Accept": "application/json", "User-Agent": "kubectl-schedlens"}
        if self.token:
            headers["Authorization"] = f"Token {self.token}"
        request = urllib.request.Request(url, headers=headers)  # noqa: S310  (the scheme is checked in connection())
        try:
            with urllib.request.urlopen(request, timeout=self.timeout) as response:  # noqa: S310
                body = response.read()
        except urllib.error.HTTPError as exc:
            raise _http_error(exc, url, not_found) from None
        except (urllib.error.URLError, OSError) as exc:
            reason = connection_failure(getattr(exc, "reason", exc), self.timeout)
            raise CliError(f"cannot reach {self.server}: {reason}", EXIT_UNAVAILABLE) from None
        try:
            return json.loads(body)
        except ValueError:
            raise CliError(f"{url} did not answer JSON", EXIT_UNAVAILABLE) from None


def _http_error(exc: urllib.error.HTTPError, url: str, not_found: str) -> CliError:
    try:
        payload = json.loads(exc.read())
        message = str(payload.get("error", "")) if isinstance(payload, dict) else ""
        field = str(payload.get("field", "")) if isinstance(payload, dict) else ""
    except (ValueError, OSError):
        message, field = "", ""
    status = exc.code
    if status == 404:
        return CliError(not_found or f"not found: {message or url}", EXIT_NOT_FOUND)
    if status in (401, 403):
        what = "unauthorized" if status == 401 else "forbidden"
        hint = " (check --token / SCHEDLENS_TOKEN)" if status == 401 else " (the token's user is not an auditor)"
        return CliError(f"{what}: {message or status}{hint}", EXIT_UNAUTHORIZED)
    if status == 400:
        return CliError(f"refused {field + ': ' if field else ''}{message or 'bad request'}", EXIT_USAGE)
    if status == 429:
        return CliError(f"throttled by the server: {message or 'try again later'}", EXIT_UNAVAILABLE)
    return CliError(f"server error {status} from {url}{': ' + message if message else ''}", EXIT_UNAVAILABLE)


# --- output -------------------------------------------------------------------------------------------------------


def table(headers: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    """Columns as kubectl prints them: upper-case headers, left-aligned, three spaces apart."""
    widths = [max(len(str(cell)) for cell in column) for column in zip(headers, *rows, strict=False)]
    lines = [
        "   ".join(str(cell).ljust(width) for cell, width in zip(row, widths, strict=True)).rstrip()
        for row in [headers, *rows]
    ]
    return "\n".join(lines)


def human_bytes(value: Any) -> str:
    if value is None:
        return "-"
    amount = float(value)
    for unit in ("B", "kB", "MB", "GB", "TB"):
        if abs(amount) < 1000 or unit == "TB":
            return f"{amount:.0f} {unit}" if unit == "B" else f"{amount:.1f} {unit}"
        amount /= 1000
    return f"{amount:.1f} TB"  # pragma: no cover  (the loop returns)


def number(value: Any, digits: int = 1) -> str:
    if value is None:
        return "-"
    if isinstance(value, int):  # (bool too)
        return str(value)
    return f"{float(value):.{digits}f}"


def yes_no(value: Any) -> str:
    return "-" if value is None else ("yes" if value else "no")


def dump(data: Any, output: str) -> str:
    if output == "yaml":
        return yaml.safe_dump(data, sort_keys=False, allow_unicode=True).rstrip("\n")
    return json.dumps(data, indent=2, ensure_ascii=False)


# --- commands -----------------------------------------------------------------------------------------------------


def _traffic_estimate(node: dict[str, Any]) -> Any:
    for term in node.get("terms") or []:
        traffic = term.get("traffic")
        if traffic and traffic.get("estimate_bytes") is not None:
            return traffic["estimate_bytes"]
    return node.get("traffic_bytes")


def _node_reason(node: dict[str, Any]) -> str:
    verdicts = node.get("verdicts") or []
    if verdicts:
        return "; ".join(f"{v.get('plugin', '')}: {v.get('reason', '')}" for v in verdicts)
    if node.get("unresolvable"):
        return "unresolvable"
    return str(node.get("answer_arithmetic") or node.get("final_arithmetic") or "")


def render_why(data: dict[str, Any]) -> str:
    cycle, explanation = data.get("cycle") or {}, data.get("explanation") or {}
    head = (
        f"pod {cycle.get('pod_namespace')}/{cycle.get('pod_name')}: cycle {cycle.get('id')} "
        f"({cycle.get('outcome')}, profile {cycle.get('profile')}, started {cycle.get('started_at')})"
    )
    nodes = sorted(
        explanation.get("nodes") or [],
        key=lambda n: (n.get("rank") is None, n.get("rank") or 0, str(n.get("node"))),
    )
    chosen = explanation.get("chosen_node")
    rows = [
        [
            str(n.get("node")) + (" *" if n.get("node") == chosen else ""),
            yes_no(n.get("passed")),
            number(n.get("final_score")),
            number(n.get("extender_score")),
            human_bytes(_traffic_estimate(n)),
            _node_reason(n),
        ]
        for n in nodes
    ]
    headers = ["NODE", "PASSED", "FINAL", "ANSWER", "TRAFFIC", "REASON/ARITHMETIC"]
    return "\n".join([head, _version_line(data), str(explanation.get("summary", "")), "", table(headers, rows)])


def _version_line(data: dict[str, Any]) -> str:
    """Which exact profile version decided it (a why answer from a server before versions: no such key)."""
    version = data.get("profile_version") or {}
    if not version:
        return "profile version: not given by this server"
    if not version.get("digest") or version.get("missing"):
        return f"profile version: {version.get('missing') or 'not known'}"
    first = f", first served {version['first_served']}" if version.get("first_served") else ""
    return f"profile version: {version['digest']}{first} ({version.get('url', '')})"


def render_history(data: dict[str, Any]) -> str:
    cycles = data.get("results") or []
    if not cycles:
        return "no cycles recorded for these filters"
    rows = [
        [
            str(c.get("id")),
            str(c.get("started_at")),
            f"{c.get('pod_namespace') or '-'}/{c.get('pod_name') or '-'}",
            str(c.get("profile") or "-"),
            str(c.get("outcome")),
            str(c.get("chosen_node") or "-"),
            str(c.get("preferred_node") or "-"),
            f"{number(c.get('feasible_count'))}/{number(c.get('candidate_count'))}",
        ]
        for c in cycles
    ]
    headers = ["ID", "STARTED", "POD", "PROFILE", "OUTCOME", "CHOSEN", "PREFERRED", "FEASIBLE"]
    more = "\n(more cycles: raise --limit or narrow --since)" if data.get("next") else ""
    return table(headers, rows) + more


def render_nodes(data: dict[str, Any]) -> str:
    nodes = data.get("results") or []
    if not nodes:
        return "no nodes in the record"
    rows = [
        [
            str(n.get("node")),
            number(n.get("considered")),
            number(n.get("filtered_out")),
            number(n.get("placements")),
            str(n.get("last_seen_at") or "-"),
        ]
        for n in nodes
    ]
    more = f"\n({data.get('count')} nodes in all; first page shown)" if data.get("next") else ""
    return table(["NODE", "CONSIDERED", "FILTERED-OUT", "PLACEMENTS", "LAST-SEEN"], rows) + more


def render_verify(data: dict[str, Any]) -> str:
    if data.get("ok"):
        return f"ok: {data.get('checked')} calls checked; head call {data.get('head_id')}, hash {data.get('head_hash')}"
    parts = data.get("altered_parts") or []
    altered = f"; altered shared parts: {', '.join(parts)}" if parts else ""
    return f"broken: first broken call {data.get('first_broken_id')}: {data.get('reason')}{altered}"


MAX_PAGE_SIZE = 500
"""The cycles API's largest page."""

_DURATION = re.compile(r"(\d+)([smhdw])")
_UNIT_SECONDS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800}


def duration(text: str) -> timedelta:
    """``90s``, ``15m``, ``1h``, ``1h30m``, ``2d``, ``1w``; argparse turns a ValueError into a usage error."""
    if not text or _DURATION.sub("", text) != "":
        raise argparse.ArgumentTypeError(f"{text!r} is not a duration like 30m, 1h, 2d or 1h30m")
    return timedelta(seconds=sum(int(n) * _UNIT_SECONDS[unit] for n, unit in _DURATION.findall(text)))


def page_size(text: str) -> int:
    if not text.isdigit() or not 1 <= int(text) <= MAX_PAGE_SIZE:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number from 1 to {MAX_PAGE_SIZE}")
    return int(text)


def command(args: argparse.Namespace, api: Api) -> tuple[Any, str, int]:
    """The API's answer, its table, and the exit code."""
    if args.command == "why":
        pod = f"{args.namespace}/{args.pod}"
        try:  # a pod still waiting: what holds it back, both sides, rather than its last cycle alone
            data = api.get(f"pending/{_segment(args.namespace)}/{_segment(args.pod)}/")
            return data, render_pending_pod(data, table), EXIT_OK
        except CliError as exc:
            if exc.code != EXIT_NOT_FOUND:
                raise
        data = api.get(
            "why/", {"namespace": args.namespace, "name": args.pod}, not_found=f"no cycle recorded for pod {pod}"
        )
        return data, render_why(data), EXIT_OK
    if args.command == "history":
        params = {"namespace": args.namespace or "", "page_size": str(args.limit)}
        if args.node:
            params["node_considered"] = args.node
        if args.chosen:
            params["chosen_node"] = args.chosen
        if args.since is not None:
            params["started_after"] = (datetime.now(UTC) - args.since).isoformat(timespec="seconds")
        data = api.get("cycles/", params)
        return data, render_history(data), EXIT_OK
    if args.command == "pending":
        data = api.get("pending/", {"namespace": args.namespace or ""})
        return data, render_pending(data, table), EXIT_OK
    if args.command == "nodes":
        data = api.get("nodes/", {"page_size": "1000"})
        return data, render_nodes(data), EXIT_OK
    data = api.get("audit/verify", {"after_id": "" if args.after_id is None else str(args.after_id)})
    return data, render_verify(data), EXIT_OK if data.get("ok") else EXIT_BROKEN


def _segment(value: str) -> str:
    return urllib.parse.quote(value, safe="")


GLOBAL_DEFAULTS: dict[str, Any] = {"server": None, "token": None, "output": "table", "timeout": 30.0}
"""The global flags' values when not given; ``--namespace``'s depends on the command (``parse``)."""


def _global_flags(target: argparse.ArgumentParser) -> None:
    """The flags kubectl users expect before or after the command. Added to the main parser and, as a parent, to
    each command's, all without a default: a command's parser writes only the flags given after the command, so
    they override those given before it (the last one wins) and leave them alone otherwise."""
    target.add_argument(
        "--server", default=argparse.SUPPRESS, help="the schedlens URL, e.g. https://schedlens.example:8443"
    )
    target.add_argument("--token", default=argparse.SUPPRESS, help="an auditor's API token")
    target.add_argument(
        "-o",
        "--output",
        choices=["table", "json", "yaml"],
        default=argparse.SUPPRESS,
        help="table (default), or the API's JSON as is (json, yaml)",
    )
    target.add_argument(
        "--timeout", type=float, default=argparse.SUPPRESS, help="seconds to wait for the server (default 30)"
    )
    target.add_argument(
        "-n",
        "--namespace",
        default=argparse.SUPPRESS,
        help="why: the pod's namespace (default: default); history, pending: only pods in it (default: all); "
        "nodes and verify ignore it, as kubectl does for cluster-wide resources",
    )


def parser() -> argparse.ArgumentParser:
    common = argparse.ArgumentParser(add_help=False)
    _global_flags(common)

    main_parser = argparse.ArgumentParser(
        prog="kubectl schedlens",
        description="Read schedlens's scheduling audit record: why a pod went where it went (or is still pending), "
        "the pods waiting now, recent cycles, nodes, and whether the record's hash chain verifies.",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    _global_flags(main_parser)
    sub = main_parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    fmt = argparse.RawDescriptionHelpFormatter

    why = sub.add_parser(
        "why",
        parents=[common],
        help="the pod's latest cycle, explained node by node; for a waiting pod, what holds it back",
        epilog=EPILOG,
        formatter_class=fmt,
    )
    why.add_argument("pod", metavar="POD", help="the pod's name")

    history = sub.add_parser(
        "history", parents=[common], help="recent scheduling cycles, newest first", epilog=EPILOG, formatter_class=fmt
    )
    history.add_argument("--node", help="cycles that had this node among their candidates")
    history.add_argument("--chosen", metavar="NODE", help="cycles that placed the pod on this node")
    history.add_argument("--since", type=duration, help="cycles started within this long, e.g. 30m, 1h, 2d")
    history.add_argument(
        "--limit",
        type=page_size,
        default=50,
        help="at most this many cycles, 1..500 (default 50)",
    )

    sub.add_parser(
        "pending",
        parents=[common],
        help="pods waiting for a node now: how long, attempts, and what holds each back (both sides, with counts)",
        epilog=EPILOG,
        formatter_class=fmt,
    )

    sub.add_parser(
        "nodes",
        parents=[common],
        help="per node: times considered, filtered out, placed on",
        epilog=EPILOG,
        formatter_class=fmt,
    )

    verify = sub.add_parser(
        "verify",
        parents=[common],
        help="recompute the audit hash chain; exit 1 when broken",
        epilog=EPILOG,
        formatter_class=fmt,
    )
    verify.add_argument("--after-id", type=int, help="check only the calls after this one")
    return main_parser


def parse(argv: Sequence[str] | None = None) -> argparse.Namespace:
    """The command line, global flags wherever they stood (see ``_global_flags``); exits 2 on a usage error."""
    args = parser().parse_args(argv)
    for name, value in GLOBAL_DEFAULTS.items():
        if not hasattr(args, name):
            setattr(args, name, value)
    if not hasattr(args, "namespace"):
        args.namespace = "default" if args.command == "why" else None
    return args


def main(argv: Sequence[str] | None = None) -> int:
    args = parse(argv)
    try:
        api = Api(*connection(args.server, args.token), timeout=args.timeout)
        data, text, code = command(args, api)
    except CliError as exc:
        print(f"schedlens: {exc}", file=sys.stderr)
        return exc.code
    print(text if args.output == "table" else dump(data, args.output))
    return code


def run() -> None:
    """The console script's entry point."""
    sys.exit(main())


if __name__ == "__main__":
    run()
