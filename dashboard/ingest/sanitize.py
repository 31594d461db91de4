"""Sanitize a spooled verb record for PostgreSQL, whatever the request that produced it contained.

The verbs record what they were sent, and anyone who can reach the extender port can send anything: a profile
name of 300 characters in the URL, a pod or node name with a NUL byte (valid JSON: ``"\\u0000"``), names longer
than Kubernetes allows. PostgreSQL refuses NUL in text and jsonb and values longer than a column; one such
record would fail its ingest batch forever and hold back every record behind it. So, before ingest:

- NUL becomes U+2400 (␀, "symbol for null") in every string and key: visible, and nothing else changes;
- a value longer than its column, and a node name longer than a Kubernetes name (253), is cut and ends in
  ``…`` and 12 hex digits of its SHA-256, so two long names that share a prefix stay distinct, and every call
  of a cycle cuts a name the same way.

Records without either (all of kube-scheduler's) pass through untouched, after a check that costs one pass over
the bytes or, for a binary record, over each distinct node list once.
"""

from __future__ import annotations

import hashlib
from collections.abc import Collection
from typing import Any

import msgspec

from dashboard.storage.identity_cache import IdentityCache
from scheduler_core.extender.record.spool_codec import SPOOL_BINARY_FORMS, SPOOL_DERIVING, answer_of
from scheduler_core.extender.record.structs import VerbEvent

NUL = "\x00"
NUL_SHOWN = "\u2400"
NAME_LIMIT = 253
"""A Kubernetes object name (DNS subdomain), and the width of every node-name column."""
TOP_LIMITS = {"pod_namespace": 253, "pod_name": 253, "pod_uid": 64, "profile": 63, "server": 128}
"""The event's fields stored in columns of that width (``SchedulingCycle``, ``VerbCall``)."""


def clip(value: str, limit: int) -> str:
    if len(value) <= limit:
        return value
    digest = hashlib.sha256(value.encode("utf-8", "surrogatepass")).hexdigest()[:12]
    return f"{value[: limit - 13]}…{digest}"


def _without_nul(value: Any) -> Any:
    if isinstance(value, str):
        return value.replace(NUL, NUL_SHOWN)
    if isinstance(value, list):
        return [_without_nul(item) for item in value]
    if isinstance(value, dict):
        return {_without_nul(key): _without_nul(item) for key, item in value.items()}
    return value


def _names(values: list[str]) -> list[str]:
    return [clip(value, NAME_LIMIT) for value in values]


def _keys(mapping: dict[str, Any]) -> dict[str, Any]:
    return {clip(key, NAME_LIMIT): value for key, value in mapping.items()}


_longest_and_nul_by_list: IdentityCache[tuple[int, bool]] = IdentityCache(256)


def _longest_and_nul(names: Collection[str]) -> tuple[int, bool]:
    """The length of the longest of ``names`` and whether one holds NUL, once per list or map object
    (``IdentityCache``)."""
    return _longest_and_nul_by_list.get((names,), lambda: (max(map(len, names), default=0), "\x00" in "".join(names)))


def _node_lists(event: VerbEvent) -> list[Collection[str]]:
    """Every list of node names the ingester writes to a column (postings, node counts, the preferred node)."""
    lists: list[Collection[str]] = []
    if event.filter is not None:
        lists.append(event.filter.nodes)
    if event.prioritize is not None:
        lists.append(event.prioritize.nodes)
    if event.bind is not None:
        lists.append([event.bind.node])
    if event.preempt is not None:
        lists.append(event.preempt.candidates)
    return lists


def _clip_names(event: VerbEvent) -> VerbEvent:
    replace = msgspec.structs.replace
    if (filtered := event.filter) is not None:
        filtered = replace(
            filtered,
            nodes=_names(filtered.nodes),
            passed=_names(filtered.passed),
            unresolvable=_names(filtered.unresolvable),
            failures=_keys(filtered.failures),
            details=_keys(filtered.details),
        )
        event = replace(event, filter=filtered)
    if (scored := event.prioritize) is not None:
        plugins = [replace(p, notes=_keys(p.notes)) for p in scored.plugins]
        event = replace(event, prioritize=replace(scored, nodes=_names(scored.nodes), plugins=plugins))
    if (bound := event.bind) is not None:
        event = replace(event, bind=replace(bound, node=clip(bound.node, NAME_LIMIT)))
    if (preempt := event.preempt) is not None:
        preempt = replace(
            preempt, candidates=_names(preempt.candidates), kept=_names(preempt.kept), dropped=_keys(preempt.dropped)
        )
        event = replace(event, preempt=preempt)
    return event


def has_nul(event: VerbEvent) -> bool:
    """Whether a string of ``event`` that the ingester writes to a text column holds NUL (for an event spooled in
    binary form: no JSON escape to look for). The pod, the error, the node names (postings, node counts, the cycle's
    preferred node); every other string is inside the call's body, whose encoder finds NUL as JSON escapes
    (``dashboard.storage.call_body.NulInRecordError``)."""
    texts = [
        event.event_id,
        event.verb,
        event.profile,
        event.pod_namespace,
        event.pod_name,
        event.pod_uid,
        event.pod_resource_version,
        event.node_mode,
        event.error,
        event.error_path,
        event.server,
    ]
    if (filtered := event.filter) is not None and (
        _longest_and_nul(filtered.nodes)[1] or _longest_and_nul(filtered.failures)[1]
    ):
        return True
    if (scored := event.prioritize) is not None and _longest_and_nul(scored.nodes)[1]:
        return True
    if (bound := event.bind) is not None:
        texts += [bound.node, bound.detail]
    if (preempt := event.preempt) is not None:
        texts += preempt.candidates
    return "\x00" in "".join(texts)


_json = msgspec.json.Encoder()
_JSON_NUL = b"\\u0000"
"""How msgspec writes NUL in JSON: a record's JSON without it holds no NUL anywhere."""


def nul_in_record(event: VerbEvent) -> bool:
    """Whether a string inside ``event``'s per-node record or answer holds NUL (a reason, a note, a requested image),
    beyond what :func:`has_nul` reads: for a record stored as the verb spooled it, which no encoder goes through
    again. Searched in the JSON of the record without its numeric columns (no string there)."""
    texts = [bytes(event.response)]
    if (filtered := event.filter) is not None:
        slim_filter = msgspec.structs.replace(filtered, nodes=[], passed=[], traffic_bytes=[])
        texts.append(_json.encode(slim_filter))
    if (scored := event.prioritize) is not None:
        plugins = [
            msgspec.structs.replace(
                p,
                scores=[],
                raw=[],
                herd_bytes=[],
                herd_binds=[],
                herd_newest_age_ms=[],
                inputs=dict.fromkeys(p.inputs),
            )
            for p in scored.plugins
        ]
        texts.append(_json.encode(msgspec.structs.replace(scored, nodes=[], plugins=plugins, final=[], extender=[])))
    if event.preempt is not None:
        texts.append(_json.encode(event.preempt))
    return any(_JSON_NUL in text for text in texts)


def sanitize_for_postgres(event: VerbEvent, raw: bytes) -> VerbEvent:
    """``event`` (decoded from the spool bytes ``raw``) with NUL replaced and over-long names cut (see above)."""
    original = event
    # msgspec writes every NUL of a JSON record as this escape: no escape, no NUL anywhere. A binary record stored as
    # spooled (``SLR\\x04``) is searched whole; another's body encoder finds what ``has_nul`` leaves to it.
    if raw.startswith(SPOOL_DERIVING):
        nul = has_nul(event) or nul_in_record(event)
    else:
        nul = has_nul(event) if raw.startswith(SPOOL_BINARY_FORMS) else _JSON_NUL in raw
    if nul:
        fields = {k: v for k, v in msgspec.structs.asdict(event).items() if k != "response"}
        response = msgspec.json.encode(_without_nul(msgspec.json.decode(answer_of(event))))
        event = msgspec.convert(_without_nul(msgspec.to_builtins(fields)), VerbEvent)
        event = msgspec.structs.replace(event, response=msgspec.Raw(response))
    fields = {name: clip(getattr(event, name), limit) for name, limit in TOP_LIMITS.items()}
    if any(fields[name] != getattr(event, name) for name in fields):
        event = msgspec.structs.replace(event, **fields)
    if max((_longest_and_nul(names)[0] for names in _node_lists(event)), default=0) > NAME_LIMIT:
        event = _clip_names(event)
    if event is not original and event.answer_derived:
        # The answer holds the names as sent: it is no longer what the changed record derives.
        answer = event.response if nul else msgspec.Raw(answer_of(original))
        event = msgspec.structs.replace(event, answer_derived=False, response=answer)
    return event
