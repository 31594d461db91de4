"""The ServiceMonitor and PrometheusRule of the observability kit.

The kustomize ones (``deploy/kubernetes/monitoring``) parse and point at what exists; the chart's render with
``helm template`` when helm is installed and, everywhere, through :func:`render_chart_template`, a stand-in for the
few template actions those two templates use.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from collections.abc import Mapping
from typing import Any

import pytest
import yaml

from tests.deploy.manifests import CHART, KUBERNETES, kubernetes_documents, load_documents
from tests.deploy.observability import MONITORING, RULES

# ----- kustomize: deploy/kubernetes/monitoring -----


def test_the_kustomize_monitoring_overlay_lists_its_files_and_stays_out_of_the_base() -> None:
    kustomization = yaml.safe_load((MONITORING / "kustomization.yaml").read_text())
    base = yaml.safe_load((KUBERNETES / "kustomization.yaml").read_text())

    assert set(kustomization["resources"]) == {p.name for p in MONITORING.glob("*.yaml")} - {"kustomization.yaml"}
    assert not any("monitoring" in resource for resource in base["resources"]), "needs the operator's CRDs: opt-in"


def test_the_kustomize_service_monitor_scrapes_metrics_of_the_web_pods_once() -> None:
    [monitor] = load_documents(MONITORING / "servicemonitor.yaml")
    check_service_monitor(monitor, namespace="schedlens-system", port_names=service_ports(kubernetes_documents()))


@pytest.mark.skipif(shutil.which("kubectl") is None, reason="kubectl (with its built-in kustomize) is not installed")
def test_kustomize_renders_the_monitoring_overlay() -> None:
    rendered = subprocess.run(["kubectl", "kustomize", str(MONITORING)], capture_output=True, text=True, check=True)
    docs = {doc["kind"]: doc for doc in yaml.safe_load_all(rendered.stdout) if doc}

    assert set(docs) == {"ServiceMonitor", "PrometheusRule"}
    assert docs["PrometheusRule"]["spec"] == RULES


def service_ports(docs: list[dict[str, Any]]) -> dict[str, set[str]]:
    """Service name -> its port names, and the labels each Service carries under the key ``labels:<name>``."""
    found: dict[str, set[str]] = {}
    for doc in docs:
        if doc.get("kind") == "Service":
            found[doc["metadata"]["name"]] = {p["name"] for p in doc["spec"]["ports"]}
            found[f"labels:{doc['metadata']['name']}"] = {f"{k}={v}" for k, v in doc["metadata"]["labels"].items()}
    return found


def check_service_monitor(monitor: dict[str, Any], *, namespace: str, port_names: Mapping[str, set[str]]) -> None:
    assert monitor["apiVersion"] == "monitoring.coreos.com/v1"
    assert monitor["kind"] == "ServiceMonitor"
    assert monitor["metadata"]["namespace"] == namespace
    assert monitor["spec"]["namespaceSelector"] == {"matchNames": [namespace]}
    selector = {f"{k}={v}" for k, v in monitor["spec"]["selector"]["matchLabels"].items()}
    selected = [name for name in ("schedlens", "schedlens-web") if selector <= port_names[f"labels:{name}"]]
    [endpoint] = monitor["spec"]["endpoints"]
    assert endpoint["path"] == "/metrics"
    assert endpoint["port"] in port_names["schedlens"], "a port of Service schedlens, by name"
    assert "schedlens" in selected
    if len(selected) > 1:  # both Services carry the labels: the relabelling must keep only one
        assert {
            "sourceLabels": ["__meta_kubernetes_service_name"],
            "regex": "schedlens",
            "action": "keep",
        } in endpoint["relabelings"]


# ----- Helm: metrics.serviceMonitor, metrics.prometheusRule -----

ACTION = re.compile(r"(\s*)\{\{(-?)\s*(.*?)\s*(-?)\}\}", re.S)


def render_chart_template(name: str, values: Mapping[str, Any], *, namespace: str = "schedlens-system") -> str:
    """Render ``templates/<name>`` as Helm would, for the actions the monitoring templates use, and no others.

    A stand-in where helm is not installed (see test_helm_chart.py): ``if``/``with``/``end``, ``.Values…``,
    ``.Release.Namespace``, ``include "schedlens.labels" .``, ``toYaml .``, ``.Files.Get``, ``ternary``, and the
    ``indent``/``nindent`` pipes, with Go templates' whitespace trimming. Anything else raises.
    """
    chart = yaml.safe_load((CHART / "Chart.yaml").read_text())
    helpers = (CHART / "templates" / "_helpers.tpl").read_text()

    def define(template: str) -> str:
        match = re.search(
            r'\{\{-? define "' + re.escape(template) + r'" (-?)\}\}(.*?)\{\{(-?) end -?\}\}', helpers, re.S
        )
        assert match, template
        body = match.group(2).lstrip() if match.group(1) else match.group(2)
        return body.rstrip() if match.group(3) else body

    def lookup(path: str, dot: Any) -> Any:
        if path == ".":
            return dot
        if path.startswith(".Values."):
            node: Any = values
            for key in path.removeprefix(".Values.").split("."):
                node = node.get(key) if isinstance(node, Mapping) else None
            return node
        fixed = {
            ".Release.Namespace": namespace,
            ".Release.Service": "Helm",
            ".Chart.Name": chart["name"],
            ".Chart.Version": chart["version"],
        }
        if path in fixed:
            return fixed[path]
        if match := re.fullmatch(r'\.Files\.Get "([^"]+)"', path):
            file = CHART / match.group(1)
            return file.read_text() if file.is_file() else ""  # helm answers "" for a missing file
        if match := re.fullmatch(r'ternary "([^"]*)" "([^"]*)" (\S+)', path):
            return match.group(1) if lookup(match.group(3), dot) else match.group(2)
        if match := re.fullmatch(r'include "([^"]+)" \.', path):
            return render(define(match.group(1)), dot)
        if path == "toYaml .":
            return yaml.safe_dump(dot, default_flow_style=False, sort_keys=False).rstrip("\n")
        raise AssertionError(f"render_chart_template does not know {{{{ {path} }}}}")

    def evaluate(expr: str, dot: Any) -> Any:
        head, *pipes = [part.strip() for part in expr.split("|")]
        value = lookup(head, dot)
        for pipe in pipes:
            match = re.fullmatch(r"(n?indent) (\d+)", pipe)
            assert match, f"unknown pipe {pipe!r}"
            pad = " " * int(match.group(2))
            value = pad + str(value).replace("\n", "\n" + pad)
            if match.group(1) == "nindent":
                value = "\n" + value
        return value

    def render(text: str, dot: Any) -> str:
        # Go's trim markers first: "{{-" eats the whitespace before the action, "-}}" the whitespace after.
        text = re.sub(r"\s*\{\{-\s", "{{ ", text)
        text = re.sub(r"\s-\}\}\s*", " }}", text)
        out: list[str] = []
        stack: list[tuple[bool, Any]] = [(True, dot)]
        position = 0
        for match in re.finditer(r"\{\{ ?(.*?) ?\}\}", text, re.S):
            if stack[-1][0]:
                out.append(text[position : match.start()])
            position = match.end()
            action = match.group(1).strip()
            active, current = stack[-1]
            if action.startswith("/*"):
                continue
            if action.startswith("if "):
                stack.append((active and bool(evaluate(action[3:], current)), current))
            elif action.startswith("with "):
                value = evaluate(action[5:], current) if active else None
                stack.append((active and bool(value), value))
            elif action == "end":
                stack.pop()
            elif active:
                out.append(str(evaluate(action, current)))
        assert len(stack) == 1, "unbalanced if/with/end"
        out.append(text[position:])
        return "".join(out)

    return render((CHART / "templates" / name).read_text(), None)


def chart_values(**overrides: Any) -> dict[str, Any]:
    values = yaml.safe_load((CHART / "values.yaml").read_text())
    for dotted, value in overrides.items():
        *parents, leaf = dotted.split("__")
        node = values
        for key in parents:
            node = node[key]
        node[leaf] = value
    return values


def chart_services(tls: bool) -> dict[str, set[str]]:
    text = (CHART / "templates" / "web.yaml").read_text()
    services = [doc for doc in text.split("\n---\n") if re.search(r"^kind: Service$", doc, re.M)]
    found: dict[str, set[str]] = {}
    for doc in services:
        name = re.search(r"^  name: (\S+)$", doc, re.M).group(1)  # type: ignore[union-attr]
        ports = re.findall(r"\{name: (.+?), port:", doc)
        found[name] = {("https" if tls else "http") if "ternary" in p else p for p in ports}
        labels = set(re.findall(r"^    (app\.kubernetes\.io/(?:name|component)): (\S+)$", doc, re.M))
        found[f"labels:{name}"] = {f"{k}={v}" for k, v in labels}
    return found


def test_the_chart_values_leave_the_operator_objects_off_by_default() -> None:
    values = chart_values()

    assert values["metrics"]["serviceMonitor"]["enabled"] is False
    assert values["metrics"]["prometheusRule"]["enabled"] is False
    assert render_chart_template("servicemonitor.yaml", values).strip() == ""
    assert render_chart_template("prometheusrule.yaml", values).strip() == ""


@pytest.mark.parametrize("tls", [False, True], ids=["http", "https"])
def test_the_chart_renders_a_service_monitor_of_the_service_port(tls: bool) -> None:
    values = chart_values(metrics__serviceMonitor__enabled=True, metrics__serviceMonitor__labels={"release": "kps"})
    values["tls"]["enabled"] = tls
    [monitor] = [d for d in yaml.safe_load_all(render_chart_template("servicemonitor.yaml", values)) if d]

    check_service_monitor(monitor, namespace="schedlens-system", port_names=chart_services(tls))
    assert monitor["metadata"]["labels"]["release"] == "kps"
    assert monitor["spec"]["endpoints"][0]["scheme"] == ("https" if tls else "http")
    assert monitor["spec"]["endpoints"][0]["interval"] == values["metrics"]["serviceMonitor"]["interval"]


def test_the_chart_renders_the_rules_file_as_a_prometheus_rule() -> None:
    values = chart_values(metrics__prometheusRule__enabled=True)
    [rule] = [d for d in yaml.safe_load_all(render_chart_template("prometheusrule.yaml", values)) if d]

    assert rule["apiVersion"] == "monitoring.coreos.com/v1"
    assert rule["kind"] == "PrometheusRule"
    assert rule["metadata"]["namespace"] == "schedlens-system"
    assert rule["spec"] == RULES, "files/schedlens-alerts.yaml, included whole under spec"


@pytest.mark.skipif(shutil.which("helm") is None, reason="helm is not installed (not available from Debian or PyPI)")
def test_helm_renders_the_service_monitor_and_the_prometheus_rule() -> None:
    def template(*sets: str) -> list[dict[str, Any]]:
        command = ["helm", "template", "schedlens", str(CHART), "--namespace", "schedlens-system"]
        for one in sets:
            command += ["--set", one]
        done = subprocess.run(command, check=True, capture_output=True, text=True)
        return [d for d in yaml.safe_load_all(done.stdout) if d]

    default = template()
    enabled = template("metrics.serviceMonitor.enabled=true", "metrics.prometheusRule.enabled=true")

    assert not {"ServiceMonitor", "PrometheusRule"} & {d["kind"] for d in default}
    [monitor] = [d for d in enabled if d["kind"] == "ServiceMonitor"]
    [rule] = [d for d in enabled if d["kind"] == "PrometheusRule"]
    check_service_monitor(monitor, namespace="schedlens-system", port_names=service_ports(enabled))
    assert rule["spec"] == RULES
