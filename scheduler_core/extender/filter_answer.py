"""A filter's answer in the extender wire format, and the candidates a synced node cache does not hold.

The filter verb (``scheduler_core.extender.verbs``) answers with the passing names (NodeNames) or echoes the passing
node objects (full Nodes); a name the node cache does not know fails with :data:`UNKNOWN_NODE` whatever the plugins
said.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import msgspec

from scheduler_core.extender.protocol import wire
from scheduler_core.extender.protocol.cluster import NodeInfo
from scheduler_core.extender.record.structs import NODE_CACHE, FilterRecord
from scheduler_core.extender.scoring.engine import FilterDecision


def echo_marker(name: str) -> msgspec.Raw:
    return msgspec.Raw(wire.encode({"$echoed": name}))


UNKNOWN_NODE = "node unknown to schedlens's node cache"
"""Why a NodeNames entry the synced node cache does not hold fails (no node name in it: counted together)."""


def fail_unknown(decision: FilterDecision, record: FilterRecord, nodes: Sequence[NodeInfo], unknown: set[str]) -> None:
    """Unknown nodes fail with :data:`UNKNOWN_NODE` alone: plugin verdicts on an empty NodeInfo mean nothing."""
    decision.passed[:] = [i for i in decision.passed if nodes[i].name not in unknown]
    # The record's lists are a filter outcome's, shared with other calls: replaced, never changed in place.
    record.passed = [name for name in record.passed if name not in unknown]
    record.unresolvable = [name for name in record.unresolvable if name not in unknown]
    record.failures = {**record.failures, **{name: {NODE_CACHE: UNKNOWN_NODE} for name in unknown}}
    record.details = {name: figures for name, figures in record.details.items() if name not in unknown}
    for name in unknown:
        decision.unresolvable.pop(name, None)
        decision.failed[name] = UNKNOWN_NODE


def filter_result(decision: FilterDecision, record: FilterRecord) -> wire.ExtenderFilterResult:
    """The answer in NodeNames form: the passing names, in input order (as ``decision.passed``)."""
    return wire.ExtenderFilterResult(
        nodes=None,
        node_names=record.passed,
        failed_nodes=dict(sorted(decision.failed.items())) or None,
        failed_and_unresolvable_nodes=dict(sorted(decision.unresolvable.items())) or None,
    )


def encoded_filter_result(decision: FilterDecision, record: FilterRecord) -> tuple[bytes, msgspec.Raw]:
    """The answer, and the same bytes as the record's ``response``: one object per outcome, compressed once by the
    spool (``spool_codec.encode_event``)."""
    answer = wire.encode(filter_result(decision, record))
    return answer, msgspec.Raw(answer)


def not_held(nodes: Sequence[NodeInfo], lookup: Callable[[str], NodeInfo | None]) -> frozenset[str]:
    return frozenset(node.name for node in nodes if lookup(node.name) is None)
