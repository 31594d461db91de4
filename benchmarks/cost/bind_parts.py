"""The bind verb's CPU in process, part by part: where the cost study's *bind* column goes besides HTTP.

``python -m benchmarks.cost.bind_parts`` binds pods through the Kubernetes-shaped API server of the tests (in a
process of its own, as ``benchmarks.cost`` runs it, answering with TCP_NODELAY) and reads this process's CPU
(``time.process_time``) per bind for each way of binding, rounds alternating them:

* *the verb, as served*: ``Extender.bind`` through ``KubernetesBinder`` with the bind intent journalled in a spool,
  then the record encoded, appended (settling the intent) and confirmed, as ``dashboard.extender.calls`` does;
* the same without the intent (a binder that cannot read the pod back records none);
* the same with the simulated binder (no API call): the verb, its record and the spool alone;
* ``KubernetesBinder.bind`` alone: the Binding POST through the Kubernetes client's urllib3 pool;
* the same POST through a bare ``http.client`` connection: what the HTTP exchange costs without urllib3's layers;
* the ``Explained`` Event the ingester writes after each bind: ``KubernetesEventWriter.create`` as it posts it (JSON
  bytes through the client's pool), and the same Event through the generated ``create_namespaced_event``.

What the web process adds to each (gunicorn, the WSGI fast path, metrics) is the cost study's *HTTP floor* and the
rest of its *bind* column.
"""

from __future__ import annotations

import argparse
import http.client
import os
import statistics
import tempfile
import time
import urllib.parse
from collections.abc import Callable, Iterator

import kubernetes
import msgspec

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")

Items = list[tuple[str, bytes]]
Loop = Callable[[Items], None]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--binds", type=int, default=1000, help="binds per way and round")
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()

    import django

    django.setup()
    from benchmarks.common import REPO
    from benchmarks.cost.stack import KubeAPIProcess
    from dashboard.bind_intents import SpoolBindJournal
    from dashboard.spool import Spool
    from scheduler_core.extender.protocol.binding import Binder, SimulatedBinder
    from scheduler_core.extender.protocol.cluster import StaticCluster
    from scheduler_core.extender.record.spool_codec import encode_event
    from scheduler_core.extender.scoring.profiles import load_profiles
    from scheduler_core.extender.verbs import Extender
    from scheduler_core.kube.api import KubernetesBinder
    from scheduler_core.kube.events import KubernetesEventWriter
    from scheduler_core.kube.http import read_raw
    from scheduler_core.traffic.store import TrafficStore
    from tests.support.fake_kube_api import api_client_for

    api = KubeAPIProcess()
    profiles = load_profiles((REPO / "deploy" / "profiles.demo.yaml").read_text())
    names = _names()

    def pods(count: int) -> Items:
        made = [next(names) for _ in range(count)]
        meta = [{"metadata": {"name": name, "namespace": "bench", "uid": f"uid-{name}"}} for name in made]
        api.add_pods(meta)
        return [(name, _bind_body(name)) for name in made]

    def verb(binder: Binder, intent: bool) -> Loop:
        spool = Spool(tempfile.mkdtemp(prefix="schedlens-bind-parts-"))
        journal = SpoolBindJournal(spool) if intent else None
        extender = Extender(profiles, cluster=StaticCluster(), traffic=TrafficStore(), binder=binder, journal=journal)

        def run(items: Items) -> None:
            for _, body in items:
                result = extender.bind("default", body)
                if result.status != 200 or result.event.error:
                    raise RuntimeError(f"bind failed: {result.body!r}")
                spool.confirm(spool.append(encode_event(result.event), confirm_later=True, settles=result.intent))

        return run

    kube = KubernetesBinder(api_client_for(api.url))

    def binder_alone(items: Items) -> None:
        for name, _ in items:
            if kube.bind(namespace="bench", name=name, uid=f"uid-{name}", node="node-1").error:
                raise RuntimeError(f"bind of {name} failed")

    where = urllib.parse.urlsplit(api.url)
    connection = http.client.HTTPConnection(where.hostname or "127.0.0.1", where.port)

    def bare_http(items: Items) -> None:
        for name, _ in items:
            binding = {
                "apiVersion": "v1",
                "kind": "Binding",
                "metadata": {"name": name, "namespace": "bench", "uid": f"uid-{name}"},
                "target": {"apiVersion": "v1", "kind": "Node", "name": "node-1"},
            }
            headers = {"Accept": "application/json", "Content-Type": "application/json"}
            connection.request("POST", f"/api/v1/namespaces/bench/pods/{name}/binding", _encode(binding), headers)
            answer = connection.getresponse()
            answer.read()
            if answer.status != 201:
                raise RuntimeError(f"bind of {name}: {answer.status}")

    events = KubernetesEventWriter(api_client_for(api.url))
    generated = kubernetes.client.EventsV1Api(api_client_for(api.url))

    def event_writer(items: Items) -> None:
        for name, _ in items:
            if failure := events.create(**_event_args(name)):
                raise RuntimeError(f"the Event of {name} failed: {failure}")

    def event_generated(items: Items) -> None:
        for name, _ in items:
            args = _event_args(name)
            body = {
                "apiVersion": "events.k8s.io/v1",
                "kind": "Event",
                "metadata": {"name": f"{name}.{time.time_ns():x}", "namespace": "bench"},
                "eventTime": "2026-11-28T12:00:00.000000Z",
                "type": "Normal",
                "reason": args["reason"],
                "action": args["action"],
                "note": args["note"],
                "reportingController": args["controller"],
                "reportingInstance": args["instance"],
                "regarding": {
                    "apiVersion": "v1",
                    "kind": "Pod",
                    "namespace": "bench",
                    "name": name,
                    "uid": args["uid"],
                },
            }
            read_raw(generated.create_namespaced_event("bench", body, _preload_content=False))

    ways: dict[str, Loop] = {
        "the verb, as served (intent, record spooled and confirmed)": verb(kube, intent=True),
        "the verb without the intent": verb(kube, intent=False),
        "the verb with the simulated binder (no API call)": verb(SimulatedBinder(), intent=False),
        "KubernetesBinder.bind alone": binder_alone,
        "the same POST on a bare http.client connection": bare_http,
        "the Explained Event: KubernetesEventWriter.create": event_writer,
        "the same Event through the generated create_namespaced_event": event_generated,
    }
    try:
        for run in ways.values():
            run(pods(100))  # connections, caches and the spool set up before timing
        spent: dict[str, list[float]] = {way: [] for way in ways}
        for _ in range(args.rounds):
            for way, run in ways.items():
                items = pods(args.binds)
                started = time.process_time()
                run(items)
                spent[way].append((time.process_time() - started) / len(items) * 1000)
    finally:
        api.stop()
    print(f"CPU ms per bind (or Event) in this process, median of {args.rounds} rounds of {args.binds} (range):")
    for way, values in spent.items():
        print(f"  {way}: {statistics.median(values):.3f} ({min(values):.3f}-{max(values):.3f})")


def _names() -> Iterator[str]:
    number = 0
    while True:
        number += 1
        yield f"pod-{number}"


def _encode(value: object) -> bytes:
    return msgspec.json.encode(value)


def _event_args(name: str) -> dict[str, str]:
    note = f"placed on node-1: the least traffic of 420 candidates (an Explained Event's length) {name}" * 3
    return {
        "namespace": "bench",
        "name": name,
        "uid": f"uid-{name}",
        "note": note,
        "reason": "Explained",
        "action": "Scheduling",
        "controller": "schedlens.io/extender",
        "instance": "bench",
    }


def _bind_body(name: str) -> bytes:
    return _encode({"PodName": name, "PodNamespace": "bench", "PodUID": f"uid-{name}", "Node": "node-1"})


if __name__ == "__main__":
    main()
