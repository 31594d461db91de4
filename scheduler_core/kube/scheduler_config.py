"""The kube-scheduler configurations ``make serve`` writes: the shipped ``deploy/scheduler-config-<mode>.yaml`` with
this server's URL, made to work as written where each runs.

For a kube-scheduler started by hand beside schedlens (``scheduler-config-nodecache.yaml``, ``…-fullnodes.yaml``):

- every extender's ``urlPrefix`` points at this server (``<url>/extender/default``);
- outside a cluster, ``clientConnection.kubeconfig`` names the kubeconfig schedlens itself uses: kube-scheduler reads
  one file there, so of a ``KUBECONFIG`` list the first that exists is taken;
- leader election is off: one scheduler started by hand has no replica to elect among, and the shipped lease lives in
  ``schedlens-system``, a namespace a fresh cluster does not have.

For the second scheduler run inside the cluster by ``deploy/kubernetes/kube-scheduler.yaml``
(``scheduler-config-in-cluster.yaml``): the URL only; its service account is its identity, and its replicas elect a
leader on the shipped lease in ``schedlens-system``, which those manifests create.

The shipped files send every pod of ``schedlens-scheduler`` to schedlens (no ``managedResources``); nothing here adds
the opt-in list.

Run as ``python -m scheduler_core.kube.scheduler_config --url URL --out-dir DIR [--kubeconfig PATH]``; prints the
command that starts kube-scheduler with the NodeNames variant.
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path
from typing import Any

import yaml

MODES = ("nodecache", "fullnodes")
REPO = Path(__file__).resolve().parents[2]
PROFILE = "default"


def kubeconfig_path(environ: dict[str, str] | os._Environ[str] = os.environ) -> str:
    """The kubeconfig file a kube-scheduler beside schedlens should read: the first existing entry of ``KUBECONFIG``,
    else ``~/.kube/config`` when it exists, else empty (in a cluster: its service account)."""
    for entry in (environ.get("KUBECONFIG") or "").split(os.pathsep):
        if entry and Path(entry).expanduser().is_file():
            return str(Path(entry).expanduser().resolve())
    home = Path(environ.get("HOME") or "~").expanduser() / ".kube" / "config"
    return str(home.resolve()) if home.is_file() else ""


def render(shipped: str, *, url: str, kubeconfig: str, beside: bool = True) -> dict[str, Any]:
    """``shipped`` with this server's URL; ``beside``: for a kube-scheduler started by hand next to it."""
    config: dict[str, Any] = yaml.safe_load(shipped)
    for extender in config.get("extenders") or []:
        extender["urlPrefix"] = f"{url.rstrip('/')}/extender/{PROFILE}"
    if beside:
        config["leaderElection"] = {"leaderElect": False}
        if kubeconfig:
            config["clientConnection"] = {**(config.get("clientConnection") or {}), "kubeconfig": kubeconfig}
    return config


def write(out_dir: Path, *, url: str, kubeconfig: str) -> dict[str, Path]:
    out_dir.mkdir(parents=True, exist_ok=True)
    written: dict[str, Path] = {}
    for name, mode, beside in (*((m, m, True) for m in MODES), ("in-cluster", "nodecache", False)):
        source = REPO / "deploy" / f"scheduler-config-{mode}.yaml"
        config = render(source.read_text(encoding="utf-8"), url=url, kubeconfig=kubeconfig, beside=beside)
        path = (out_dir / f"scheduler-config-{name}.yaml").resolve()
        where = (
            "a kube-scheduler started beside schedlens: this server's URL, its kubeconfig, leader election off"
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
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--url", required=True, help="where kube-scheduler reaches this server, e.g. http://10.0.0.5:8000"
    )
    parser.add_argument("--out-dir", type=Path, required=True)
    parser.add_argument("--kubeconfig", default=None, help="default: the first file of KUBECONFIG, else ~/.kube/config")
    options = parser.parse_args()
    kubeconfig = kubeconfig_path() if options.kubeconfig is None else options.kubeconfig
    written = write(options.out_dir, url=options.url, kubeconfig=kubeconfig)
    print(f"kube-scheduler --config {written['nodecache']}")


if __name__ == "__main__":
    main()
