"""The node cache (nodeCacheCapable) lists and watches Nodes and NodeResources through the real client."""

from __future__ import annotations

import json
from collections.abc import Iterator

import msgspec
import pytest

from scheduler_core.extender.filter_answer import UNKNOWN_NODE
from scheduler_core.extender.protocol.binding import SimulatedBinder
from scheduler_core.extender.protocol.cluster import NodeResourcesSpec, knows_all_nodes
from scheduler_core.extender.scoring.profiles import load_profiles
from scheduler_core.extender.verbs import Extender
from scheduler_core.kube.node_cache import KubernetesCluster
from scheduler_core.kube.watch import Backoff, ListWatcher, nodes_resource
from tests.support.fake_kube_api import DROP, FakeKubeAPI, api_client_for
from tests.support.inputs import traffic_store

NODES = "/api/v1/nodes"
NODE_RESOURCES = "/apis/schedlens.io/v1alpha1/noderesources"
WAIT = 10.0


def no_jitter() -> Backoff:
    return Backoff(initial=0.8, maximum=4.0, jitter=0.0)


@pytest.fixture
def api() -> Iterator[FakeKubeAPI]:
    with FakeKubeAPI() as server:
        server.put_node("node-1", labels={"zone": "a"}, images=[["docker.io/library/nginx:1.25.4", "nginx:1.25.4"]])
        server.put_node("node-2", labels={"zone": "b"})
        server.put_node_resources(
            "node-1", resources_filter={"example.com/nic": True}, resources_score={"example.com/nic": 70}
        )
        yield server


class Waits(list[float]):
    """Back-off waits the watchers asked for, recorded instead of spent."""

    def __call__(self, seconds: float) -> bool:
        self.append(seconds)
        return False


@pytest.fixture
def waits() -> Waits:
    return Waits()


@pytest.fixture
def cluster(api: FakeKubeAPI, waits: Waits) -> Iterator[KubernetesCluster]:
    view = KubernetesCluster.from_api_client(api_client_for(api), backoff=no_jitter, wait=waits)
    yield view
    view.stop()


def started(view: KubernetesCluster) -> KubernetesCluster:
    view.start()
    assert view.wait_synced(WAIT)
    return view


def test_the_cache_lists_nodes_and_node_resources_and_then_knows_every_node(cluster: KubernetesCluster) -> None:
    assert not cluster.synced
    assert not knows_all_nodes(cluster), "before the first list it claims nothing"

    started(cluster)

    assert sorted(cluster.node_names()) == ["node-1", "node-2"]
    node = cluster.node("node-1")
    assert node is not None
    assert node.labels["zone"] == "a"
    assert "docker.io/library/nginx:1.25.4" in node.images
    assert cluster.node_resources("node-1") == NodeResourcesSpec(
        resources_filter={"example.com/nic": True}, resources_score={"example.com/nic": 70}
    )
    assert cluster.node_resources("node-2") is None
    assert knows_all_nodes(cluster)


def test_the_watch_asks_for_bookmarks_from_the_lists_resource_version(
    api: FakeKubeAPI, cluster: KubernetesCluster
) -> None:
    started(cluster)
    [listed] = api.list_requests("nodes")
    watched = api.wait_for_request(lambda r: r.path == NODES and r.query.get("watch") == ["true"])

    assert listed.query["limit"] == ["500"]
    assert watched.query["allowWatchBookmarks"] == ["true"]
    assert watched.query["resourceVersion"] == [cluster.status()["nodes"]["resource_version"]]
    assert int(watched.query["timeoutSeconds"][0]) > 0


def test_added_modified_and_deleted_nodes_are_reflected_one_event_each(
    api: FakeKubeAPI, cluster: KubernetesCluster
) -> None:
    started(cluster)

    api.put_node("node-3", labels={"zone": "c"})
    assert cluster.wait_for(lambda: cluster.node("node-3") is not None, WAIT)

    api.put_node("node-1", labels={"zone": "z"})
    assert cluster.wait_for(lambda: (n := cluster.node("node-1")) is not None and n.labels["zone"] == "z", WAIT)

    api.delete_node("node-2")
    assert cluster.wait_for(lambda: cluster.node("node-2") is None, WAIT)
    assert sorted(cluster.node_names()) == ["node-1", "node-3"]
    assert len(api.list_requests("nodes")) == 1, "changes arrive by watch, not by relisting"


def test_a_node_resources_change_is_visible_after_its_one_watch_event(
    api: FakeKubeAPI, cluster: KubernetesCluster
) -> None:
    started(cluster)
    before = cluster.generation

    api.put_node_resources("node-1", resources_filter={"example.com/nic": False})

    assert cluster.wait_for(lambda: cluster.generation > before, WAIT)
    spec = cluster.node_resources("node-1")
    assert spec is not None
    assert spec.resources_filter == {"example.com/nic": False}

    api.put_node_resources("node-2", resources_score={"nvidia.com/gpu": 10})
    assert cluster.wait_for(lambda: cluster.node_resources("node-2") is not None, WAIT)
    api.delete_node_resources("node-1")
    assert cluster.wait_for(lambda: cluster.node_resources("node-1") is None, WAIT)


def test_a_bookmark_moves_the_resource_version_the_next_watch_resumes_from(
    api: FakeKubeAPI, cluster: KubernetesCluster
) -> None:
    started(cluster)
    first = api.wait_for_request(lambda r: r.path == NODES and r.query.get("watch") == ["true"])
    api.wait_for_watch("nodes")
    api.put_node_resources("node-2")  # moves the shared resourceVersion past anything the node watch saw
    bookmark = api.bookmark("nodes")
    assert int(bookmark) > int(first.query["resourceVersion"][0])

    api.close_watches("nodes")  # as at timeoutSeconds

    resumed = api.wait_for_request(lambda r: r.path == NODES and r.query.get("resourceVersion") == [bookmark])
    assert resumed.query["watch"] == ["true"]
    assert len(api.list_requests("nodes")) == 1


def test_410_gone_makes_the_cache_relist_and_catch_up_with_changes_it_never_saw(
    api: FakeKubeAPI, cluster: KubernetesCluster
) -> None:
    started(cluster)
    api.wait_for_watch("nodes")
    with api.lock:  # nothing is streamed in between: the deletion is lost with the compacted history
        api.delete_node("node-2")
        api.put_node("node-9")
        api.expire("nodes")

    assert cluster.wait_for(lambda: cluster.node("node-2") is None and cluster.node("node-9") is not None, WAIT)
    assert len(api.list_requests("nodes")) == 2
    assert cluster.status()["nodes"]["lists"] == 2


def test_a_failing_list_is_retried_with_capped_exponential_back_off(
    api: FakeKubeAPI, cluster: KubernetesCluster, waits: Waits
) -> None:
    api.inject("GET", NODES, 500, times=4)

    started(cluster)

    assert waits == [0.8, 1.6, 3.2, 4.0]
    assert len(api.list_requests("nodes")) == 5
    assert sorted(cluster.node_names()) == ["node-1", "node-2"]


def test_a_dropped_or_failed_watch_resumes_from_the_last_resource_version_without_relisting(
    api: FakeKubeAPI, cluster: KubernetesCluster, waits: Waits
) -> None:
    started(cluster)
    first = api.wait_for_request(lambda r: r.path == NODES and r.query.get("watch") == ["true"])
    api.wait_for_watch("nodes")
    api.inject("GET", NODES, DROP)  # urllib3 itself retries an idempotent GET whose connection dropped
    api.inject("GET", NODES, 500, times=2)

    api.close_watches("nodes")
    api.wait_for_request(lambda r: len(api.watch_requests("nodes")) >= 5)
    api.put_node("node-4")

    assert cluster.wait_for(lambda: cluster.node("node-4") is not None, WAIT)
    assert len(api.list_requests("nodes")) == 1
    resumed_from = [r.query["resourceVersion"] for r in api.watch_requests("nodes")[:5]]
    assert resumed_from == [first.query["resourceVersion"]] * 5
    assert waits == [0.8, 1.6], "each failure doubles the wait"


def test_without_the_node_resources_crd_the_cache_is_still_ready_and_picks_the_crd_up_later(
    api: FakeKubeAPI, cluster: KubernetesCluster, waits: Waits
) -> None:
    api.inject("GET", NODE_RESOURCES, 404)

    started(cluster)

    assert cluster.status()["noderesources"]["missing"] or cluster.node_resources("node-1") is not None
    assert cluster.wait_for(lambda: cluster.node_resources("node-1") is not None, WAIT)
    assert not cluster.status()["noderesources"]["missing"]


def test_lists_are_read_in_pages(api: FakeKubeAPI) -> None:
    for i in range(3, 8):
        api.put_node(f"node-{i}")
    seen: list[list[str]] = []

    class Names:
        def replace(self, items: list[dict]) -> None:
            seen.append([item["metadata"]["name"] for item in items])

        def apply(self, event_type: str, obj: dict) -> None:
            pass

    watcher = ListWatcher(nodes_resource(api_client_for(api)), Names(), page_size=3)
    watcher.start()
    try:
        assert watcher.wait_synced(WAIT)
    finally:
        watcher.stop()

    assert seen == [[f"node-{i}" for i in range(1, 8)]]
    pages = api.list_requests("nodes")
    assert len(pages) == 3
    assert "continue" not in pages[0].query
    assert all("continue" in page.query for page in pages[1:])


def test_the_back_off_doubles_up_to_its_cap_and_starts_over_after_a_reset() -> None:
    backoff = Backoff(initial=0.5, maximum=3.0, jitter=0.0)

    assert [backoff.next() for _ in range(5)] == [0.5, 1.0, 2.0, 3.0, 3.0]
    backoff.reset()
    assert backoff.next() == 0.5


def test_jitter_only_ever_shortens_the_wait() -> None:
    backoff = Backoff(initial=1.0, maximum=8.0, jitter=0.5, rng=lambda: 1.0)

    assert [backoff.next() for _ in range(3)] == [0.5, 1.0, 2.0]


def test_verbs_over_the_live_cache_fail_names_it_does_not_know(api: FakeKubeAPI, cluster: KubernetesCluster) -> None:
    started(cluster)
    extender = Extender(
        load_profiles(None),
        cluster=cluster,
        traffic=traffic_store({"node-1": 1e6, "node-2": 1e6}),
        binder=SimulatedBinder(),
    )
    pod = {"metadata": {"name": "web-1", "namespace": "shop", "uid": "uid-1"}, "spec": {"containers": []}}
    body = msgspec.json.encode({"Pod": pod, "Nodes": None, "NodeNames": ["node-1", "node-new", "node-2"]})

    answer = json.loads(extender.filter("default", body).body)
    assert answer["FailedNodes"] == {"node-new": UNKNOWN_NODE}

    api.put_node("node-new")
    assert cluster.wait_for(lambda: cluster.node("node-new") is not None, WAIT)
    answer = json.loads(extender.filter("default", body).body)
    assert answer["NodeNames"] == ["node-1", "node-new", "node-2"]


def test_the_resource_filter_follows_node_resources_changes_through_its_memoized_tables(
    api: FakeKubeAPI, cluster: KubernetesCluster
) -> None:
    """The plugin answers from a table built once per state of the specs; each watch event makes a new one."""
    from scheduler_core.extender.protocol.cluster import NodeInfo, PodInfo
    from scheduler_core.extender.scoring.plugins import CycleContext
    from scheduler_core.extender.scoring.plugins.node_resources import NodeResourceFitByCR, NodeResourceFitByCRArgs

    started(cluster)
    plugin = NodeResourceFitByCR(NodeResourceFitByCRArgs())
    pod = PodInfo("ns", "p", "uid", requested_resources=frozenset({"example.com/nic"}))
    ctx = CycleContext(pod=pod, cluster=cluster, traffic=traffic_store({"node-1": 1.0, "node-2": 2.0}), now=0.0)
    nodes = [NodeInfo("node-1"), NodeInfo("node-2")]

    def reasons() -> list[str]:
        return [verdict.reason for verdict in plugin.filter(ctx, nodes)]

    assert reasons() == ["", "no NodeResources object for node"]
    assert plugin.score(ctx, nodes).scores.raws == [70.0, None]

    api.put_node_resources(
        "node-1", resources_filter={"example.com/nic": False}, resources_score={"example.com/nic": 5}
    )
    assert cluster.wait_for(lambda: reasons()[0] != "", WAIT)
    assert reasons() == ["node does not enable example.com/nic", "no NodeResources object for node"]
    assert plugin.score(ctx, nodes).scores.raws == [5.0, None]

    api.put_node_resources("node-2", resources_filter={"example.com/nic": True})
    assert cluster.wait_for(lambda: reasons()[1] == "", WAIT)
    api.delete_node_resources("node-1")
    assert cluster.wait_for(lambda: reasons()[0] == "no NodeResources object for node", WAIT)


def test_a_node_s_new_images_count_in_the_next_call_with_the_same_node_names(
    api: FakeKubeAPI, cluster: KubernetesCluster
) -> None:
    """Candidate lists are remembered by their bytes; a watch event still reaches the next call's NodeInfo."""
    started(cluster)
    profiles = load_profiles("profiles:\n- name: default\n  plugins:\n    score: {enabled: [{name: ImageLocality}]}\n")
    extender = Extender(profiles, cluster=cluster, traffic=traffic_store({}), binder=SimulatedBinder())
    pod = {"metadata": {"name": "web-1", "uid": "uid-1"}, "spec": {"containers": [{"image": "nginx:1.25.4"}]}}
    body = msgspec.json.encode({"Pod": pod, "Nodes": None, "NodeNames": ["node-1", "node-2"]})

    def scores() -> list[int]:
        return [host["Score"] for host in json.loads(extender.prioritize("default", body).body)]

    with_image, without = scores()
    assert with_image > without, "only node-1 holds the image"
    assert scores() == [with_image, without]

    api.put_node("node-2", images=[["docker.io/library/nginx:1.25.4", "nginx:1.25.4"]])
    assert cluster.wait_for(lambda: bool((n := cluster.node("node-2")) and n.images), WAIT)
    assert scores() == [with_image, with_image]


def test_a_node_status_update_leaves_the_state_the_verbs_memoize_by_and_a_label_change_does_not() -> None:
    from scheduler_core.kube.node_cache import _NodeTable

    changes: list[None] = []
    table = _NodeTable(lambda: changes.append(None))

    def node(zone: str, heartbeat: str) -> dict:
        return {
            "metadata": {"name": "node-1", "labels": {"zone": zone}, "resourceVersion": heartbeat},
            "status": {"conditions": [{"type": "Ready", "status": "True", "lastHeartbeatTime": heartbeat}]},
        }

    table.apply("ADDED", node("a", "1"))
    first = table.state
    table.apply("MODIFIED", node("a", "2"))  # the kubelet's status report: same labels, same images

    assert table.state is first
    assert len(changes) == 1

    table.apply("MODIFIED", node("b", "3"))
    assert table.state is not first
    assert table.items["node-1"].labels == {"zone": "b"}
    table.apply("DELETED", node("b", "4"))
    table.apply("DELETED", node("b", "5"))  # a delete of what is gone already changes nothing
    assert not table.items
    assert len(changes) == 3
