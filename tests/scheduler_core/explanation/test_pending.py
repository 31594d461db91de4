"""A waiting pod's reasons: kube-scheduler's message read as v1.28 writes it, both sides grouped with counts."""

from __future__ import annotations

from scheduler_core.explanation.pending import (
    CycleAttempt,
    FailedEvent,
    pair_attempts,
    parse_failed_scheduling,
    pending_view,
)
from scheduler_core.extender.record.structs import FilterRecord

KUBE_128 = (
    "0/5 nodes are available: 3 Insufficient cpu, 2 node(s) didn't match Pod's node affinity/selector. "
    "preemption: 0/5 nodes are available: 5 Preemption is not helpful for scheduling."
)
OVER = "receive rate above 125 MB/s"


def filter_record(
    failing: dict[str, float], *, passed: tuple[str, ...] = (), also: dict[str, str] | None = None
) -> FilterRecord:
    nodes = [*failing, *passed]
    failures = {n: {"TrafficThreshold": OVER} for n in failing}
    for node, reason in (also or {}).items():
        failures.setdefault(node, {})["NodeResourceFitByCR"] = reason
    details = {n: {"TrafficThreshold": f"{rate:.0f} MB/s over the last 5 min"} for n, rate in failing.items()}
    return FilterRecord(nodes=nodes, passed=list(passed), failures=failures, details=details)


def test_the_v128_message_is_read_into_counts_by_reason_and_the_preemption_part() -> None:
    parsed = parse_failed_scheduling(KUBE_128)
    assert parsed.counted
    assert (parsed.available, parsed.total) == (0, 5)
    assert parsed.reasons == ((3, "Insufficient cpu"), (2, "node(s) didn't match Pod's node affinity/selector"))
    assert parsed.preemption == "0/5 nodes are available: 5 Preemption is not helpful for scheduling"
    taints = parse_failed_scheduling(
        "0/3 nodes are available: 1 node(s) had untolerated taint {node-role.kubernetes.io/control-plane: }, "
        "2 Insufficient memory."
    )
    assert taints.reasons == (
        (1, "node(s) had untolerated taint {node-role.kubernetes.io/control-plane: }"),
        (2, "Insufficient memory"),
    )
    other = parse_failed_scheduling('running PreBind plugin "VolumeBinding": binding volumes: timed out')
    assert not other.counted
    assert other.reasons == ()
    assert other.text.startswith("running PreBind")


def test_ours_on_every_node_kube_scheduler_quoting_us_counts_once_with_the_figures_and_the_limit() -> None:
    record = filter_record({"node-a": 130e6 / 1e6, "node-b": 190, "node-c": 126}, also={"node-b": "no NodeResources"})
    message = (
        f"0/3 nodes are available: 1 TrafficThreshold: {OVER}; NodeResourceFitByCR: no NodeResources, "
        f"2 TrafficThreshold: {OVER}."
    )
    view = pending_view(
        [CycleAttempt(at=100.0, cycle_id=7, profile="default", filter_record=record)],
        [FailedEvent(at=100.5, message=message)],
    )
    [attempt] = view.attempts
    assert [(g.source, g.plugin, g.reason, g.nodes) for g in attempt.groups] == [
        ("schedlens", "TrafficThreshold", OVER, 3),
        ("schedlens", "NodeResourceFitByCR", "no NodeResources", 1),
    ]
    traffic = attempt.groups[0]
    assert traffic.limit == "125 MB/s"
    assert dict(traffic.figures)["node-b"] == "190 MB/s over the last 5 min"
    assert [(m.node, m.figure, m.limit) for m in attempt.closest] == [
        ("node-a", "130 MB/s over the last 5 min", "125 MB/s"),
        ("node-c", "126 MB/s over the last 5 min", "125 MB/s"),
    ]
    assert (attempt.nodes_total, attempt.passed) == (3, 0)
    assert view.summary == (
        f"3 nodes: {OVER} (schedlens TrafficThreshold); 1 node: no NodeResources (schedlens NodeResourceFitByCR)"
    )


def test_kube_scheduler_alone_and_both_sides_together() -> None:
    alone = pending_view([], [FailedEvent(at=50.0, message=KUBE_128)])
    assert alone.summary == (
        "3 nodes: Insufficient cpu (kube-scheduler); 2 nodes: node(s) didn't match Pod's node affinity/selector "
        "(kube-scheduler)"
    )
    record = filter_record({"node-a": 140}, passed=())
    both = pending_view(
        [CycleAttempt(at=10.0, cycle_id=1, profile="p", filter_record=record)],
        [FailedEvent(at=10.2, message=f"0/4 nodes are available: 3 Insufficient cpu, 1 TrafficThreshold: {OVER}.")],
    )
    assert both.summary == f"3 nodes: Insufficient cpu (kube-scheduler); 1 node: {OVER} (schedlens TrafficThreshold)"
    assert both.latest is not None
    assert both.latest.nodes_total == 4


def test_attempts_pair_each_cycle_with_the_event_after_it_and_say_what_changed() -> None:
    first = CycleAttempt(at=10.0, cycle_id=1, profile="p", filter_record=filter_record({"a": 130, "b": 200}))
    second = CycleAttempt(at=70.0, cycle_id=2, profile="p", filter_record=filter_record({"b": 200}, passed=("a",)))
    events = [
        FailedEvent(at=10.0, message="0/2 nodes are available: 2 x."),
        FailedEvent(at=40.0, message=KUBE_128),
        FailedEvent(at=70.5, message="0/2 nodes are available: 1 y."),
    ]
    pairs = pair_attempts([first, second], events)
    assert [(c.cycle_id if c else None, e.at if e else None) for c, e in pairs] == [(1, 10.0), (None, 40.0), (2, 70.5)]
    view = pending_view([first, second], events)
    assert [a.cycle_id for a in view.attempts] == [2, None, 1]
    newest = view.attempts[0]
    assert f"{OVER} (schedlens TrafficThreshold): 2 → 1 nodes" not in newest.changes  # compared with the kube-only one
    assert f"new: 1 node: {OVER} (schedlens TrafficThreshold)" in newest.changes
    assert "gone: Insufficient cpu (kube-scheduler), 3 nodes before" in newest.changes
    assert view.attempts[-1].changes == ()


def test_the_simulators_message_reads_back_as_kube_scheduler_wrote_it() -> None:
    from scheduler_core.cli.simulator import failed_scheduling_message

    answer = {"FailedNodes": {"a": f"TrafficThreshold: {OVER}", "b": f"TrafficThreshold: {OVER}"}}
    message = failed_scheduling_message(5, answer, {"Insufficient cpu": 3})
    parsed = parse_failed_scheduling(message)
    assert parsed.reasons == ((3, "Insufficient cpu"), (2, f"TrafficThreshold: {OVER}"))
    assert parsed.preemption == "0/5 nodes are available: 5 Preemption is not helpful for scheduling"
