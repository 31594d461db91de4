"""The kube-scheduler configurations ``make serve`` writes: the shipped ``deploy/scheduler-config-<mode>.yaml`` with
this server's URL, made to work as written where each runs.

For a kube-scheduler started by hand beside schedlens (``scheduler-config-nodecache.yaml``, ``…-fullnodes.yaml``):

- every extender's ``urlPrefix`` points at this server (``<url>/extender/default``);
- ``clientConnection.kubeconfig`` names the kubeconfig file that takes kube-scheduler to the cluster schedlens itself
  watches (:func:`kubeconfig_for_scheduler`): kube-scheduler does not read ``KUBECONFIG`` and, without this field,
  looks for an in-cluster service account it does not have outside a cluster;
- leader election is off: one scheduler started by hand has no replica to elect among, the shipped lease lives in
  ``schedlens-system``, a namespace a fresh cluster does not have (creating the lease would fail forever, and the
  scheduler never schedules), and v1's default lease, ``kube-system/kube-scheduler``, is the one the cluster's own
  scheduler holds.

For the second scheduler run inside the cluster by ``deploy/kubernetes/kube-scheduler.yaml``
(``scheduler-config-in-cluster.yaml``): the URL only; its service account is its identity, and its replicas elect a
leader on the shipped lease in ``schedlens-system``, which those manifests create and let it renew.

The shipped files send every pod of ``schedlens-scheduler`` to schedlens (no ``managedResources``); nothing here adds
the opt-in list.

Run as ``python -m scheduler_core.scheduler_config --url URL [--out-dir DIR] [--kubeconfig PATH]``; prints the
command that starts kube-scheduler with the NodeNames variant.
"""

from __future__ import annotations

import argparse
import os
import shlex
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import yaml

MODES = ("nodecache", "fullnodes")
REPO = Path(__file__).resolve().parent.parent
PROFILE = "default"
SERVICE_ACCOUNT_DIR = Path("/var/run/secrets/kubernetes.io/serviceaccount")

Kubeconfig = dict[str, Any]


def var_dir(environ: Mapping[str, str] = os.environ) -> Path:
    """Where the server's state lives, read as ``dashboard/settings.py`` reads it (``make serve`` sets it)."""
    return Path(environ.get("SCHEDLENS_VAR_DIR", str(REPO / "var")))


def _load_kubeconfig(path: str) -> Kubeconfig:
    try:
        loaded = yaml.safe_load(Path(path).read_text(encoding="utf-8"))
    except (OSError, yaml.YAMLError):
        return {}  # unusable: schedlens's own check (manage.py check_kubernetes) names the problem
    return loaded if isinstance(loaded, dict) else {}


def _current(files: Sequence[tuple[str, Kubeconfig]]) -> tuple[str, str, str | None, str | None] | None:
    """The current context as kubectl merges ``files``: its name and the files its context, cluster and user come
    from (the first ``current-context`` set wins, and of entries with the same name the first file's)."""
    name = next((str(c["current-context"]) for _, c in files if c.get("current-context")), "")

    def source(kind: str, wanted: object) -> tuple[str, dict[str, Any]] | None:
        for path, config in files:
            for entry in config.get(kind) or []:
                if isinstance(entry, dict) and entry.get("name") == wanted:
                    return path, entry.get(kind.removesuffix("s")) or {}
        return None

    context = source("contexts", name)
    if not name or context is None:
        return None
    cluster = source("clusters", context[1].get("cluster"))
    user = source("users", context[1].get("user"))
    return name, context[0], cluster[0] if cluster else None, user[0] if user else None


def kubeconfig_for_scheduler(
    environ: Mapping[str, str] = os.environ, *, service_account_dir: Path = SERVICE_ACCOUNT_DIR
) -> tuple[str, str]:
    """``(path, problem)``: the one kubeconfig file that takes kube-scheduler where schedlens goes, chosen in the
    order ``kube_api.load_api_client`` chooses schedlens's own configuration.

    - In a cluster: none, since kube-scheduler with no kubeconfig uses the pod's service account, as schedlens does.
    - ``KUBECONFIG`` (missing files ignored, as kubectl does), else ``~/.kube/config``. kube-scheduler reads a single
      file where schedlens merges a list, so of several files it takes the first that, read alone, resolves the
      merged current context (the same context, cluster and user, from the same files). When none does (say, the
      current context set in one file and defined in another), none is taken and ``problem`` says how to make one:
      copying the credentials into a merged file here is left to the operator.
    """
    in_cluster = environ.get("KUBERNETES_SERVICE_HOST") and environ.get("KUBERNETES_SERVICE_PORT")
    if in_cluster and all((service_account_dir / name).is_file() for name in ("token", "ca.crt")):
        return "", ""
    home = environ.get("HOME") or str(Path.home())
    listed = [entry for entry in (environ.get("KUBECONFIG") or "").split(os.pathsep) if entry]
    existing: list[str] = []
    for entry in listed or ["~/.kube/config"]:
        path = Path(home + entry[1:] if entry == "~" or entry.startswith("~/") else entry).resolve()
        if path.is_file() and str(path) not in existing:
            existing.append(str(path))
    if len(existing) <= 1:
        return (existing[0] if existing else ""), ""
    files = [(path, _load_kubeconfig(path)) for path in existing]
    merged = _current(files)
    for one in files:
        if merged is not None and _current([one]) == merged:
            return one[0], ""
    return "", (
        f"KUBECONFIG lists {len(existing)} files and none holds its current context alone, while kube-scheduler's "
        "clientConnection.kubeconfig takes one file: merge them (kubectl config view --minify --flatten > FILE, "
        "the credentials included) and run make serve with KUBECONFIG=FILE"
    )


def render(shipped: str, *, url: str, kubeconfig: str, beside: bool = True) -> dict[str, Any]:
    """``shipped`` with this server's URL; ``beside``: for a kube-scheduler started by hand next to it."""
    config: dict[str, Any] = yaml.safe_load(shipped)
    for extender in config.get("extenders") or []:
        extender["urlPrefix"] = f"{url.rstrip('/')}/extender/{PROFILE}"
    if not beside:
        return config
    config["leaderElection"] = {"leaderElect": False}
    if not kubeconfig:
        return config
    # Right after apiVersion and kind, where a reader looks for which cluster a configuration is for.
    head: dict[str, Any] = {key: config.pop(key) for key in ("apiVersion", "kind") if key in config}
    connection = {**(config.pop("clientConnection", None) or {}), "kubeconfig": kubeconfig}
    return {**head, "clientConnection": connection, **config}


def write(out_dir: Path, *, url: str, kubeconfig: str) -> dict[str, Path]:
    out_dir.mkdir(parents=True, exist_ok=True)
    written: dict[str, Path] = {}
    for name, mode, beside in (*((m, m, True) for m in MODES), ("in-cluster", "nodecache", False)):
        source = REPO / "deploy" / f"scheduler-config-{mode}.yaml"
        config = render(source.read_text(encoding="utf-8"), url=url, kubeconfig=kubeconfig, beside=beside)
        path = (out_dir / f"scheduler-config-{name}.yaml").resolve()
        where = (
            "a kube-scheduler started beside schedlens: this server's URL, "
            + ("the kubeconfig schedlens uses" if kubeconfig else "no kubeconfig (in a pod: its service account)")
            + ", leader election off"
            if beside
            else "the second scheduler of deploy/kubernetes/kube-scheduler.yaml: this server's URL, its lease"
        )
        header = (
            f"# Written by make serve from deploy/{source.name} (its comments explain each field), for\n# {where}.\n"
        )
        path.write_text(header + yaml.safe_dump(config, sort_keys=False), encoding="utf-8")
        written[name] = path
    return written


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument(
        "--url", required=True, help="where kube-scheduler reaches this server, e.g. http://10.0.0.5:8000"
    )
    parser.add_argument("--out-dir", type=Path, default=None, help="default: SCHEDLENS_VAR_DIR, else var/")
    parser.add_argument("--kubeconfig", default=None, help="default: the file of KUBECONFIG (or ~/.kube/config)")
    options = parser.parse_args()
    if options.kubeconfig is None:
        kubeconfig, problem = kubeconfig_for_scheduler()
        if problem:
            print(f"note: {problem}", file=sys.stderr)
    else:
        kubeconfig = str(Path(options.kubeconfig).expanduser().resolve()) if options.kubeconfig else ""
    written = write(options.out_dir or var_dir(), url=options.url, kubeconfig=kubeconfig)
    print(f"kube-scheduler --config {shlex.quote(str(written['nodecache']))}")


if __name__ == "__main__":
    main()
