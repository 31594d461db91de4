"""The writers of call bodies (``make_fixtures.py``): ``body1`` (body format 1, an audit link of a body call) and
``current`` (every form still written: ``SLR\\x03``, JSON bind and refused calls, body format 2 and its shared
part, packed and plain columns, the spool file with ``answered`` and ``rejected``) and ``body-as-spooled`` (body
format 3)."""

from __future__ import annotations

import json
from typing import Any

from make_fixtures_inputs import (
    BIND,
    BIND_ANSWER,
    FILTER,
    FILTER_ANSWER,
    PREEMPT,
    PREEMPT_ANSWER,
    T0,
    alone_prioritize,
    big_filter,
    big_prioritize,
    derived_score_events,
    event,
    prioritize,
    prioritize_answer,
)
from make_fixtures_spool import spool_file
from make_fixtures_writer import Writer, without_defaults


def write_body1(w: Writer) -> None:
    assert w.packing().BODY_FORMAT == 1
    bodies(w, "body1", T0 + 3600)
    w.link(
        "link_body1_call",
        {
            "cycle_id": 12,
            "event_id": "golden-body1-filter",
            "verb": "filter",
            "started_at": "2026-11-22T23:30:00.000250+00:00",
            "duration_ms": 0.5,
            "http_status": 200,
            "error": "",
            "server": "web-1:7",
            "record": None,
            "response": None,
        },
        "ab" * 32,
        body="body1_filter",
    )


def bodies(w: Writer, prefix: str, at: float) -> None:
    """A small filter, the prioritize of its cycle (referring to it), a preempt."""
    filter_id = f"golden-{prefix}-filter"
    _, facts, _ = w.body(f"{prefix}_filter", event(filter_id, "filter", at, FILTER_ANSWER, filter=FILTER))
    assert facts is not None
    w.body(
        f"{prefix}_prioritize",
        event(
            f"golden-{prefix}-prioritize",
            "prioritize",
            at + 0.01,
            prioritize_answer([8, 1, 6]),
            prioritize=prioritize(scale="fixed"),
            answer_derived=True,
        ),
        facts=facts,
        refers_to=filter_id,
    )
    w.body(
        f"{prefix}_preempt",
        event(f"golden-{prefix}-preempt", "preempt", at + 0.02, PREEMPT_ANSWER, preempt=PREEMPT, node_mode=""),
    )


def write_current(w: Writer) -> None:
    packing = w.packing()
    assert packing.BODY_FORMAT == 2
    scored = prioritize(scale="spread")
    answer = prioritize_answer([10, 0, 7])
    w.spool("framed_filter", event("golden-slr3-filter", "filter", T0, FILTER_ANSWER, filter=FILTER), "SLR\\x03")
    w.spool(
        "framed_prioritize",
        event("golden-slr3-prioritize", "prioritize", T0 + 0.01, answer, prioritize=scored),
        "SLR\\x03",
    )
    w.spool(
        "framed_derived_prioritize",
        event("golden-slr3-prio-derived", "prioritize", T0 + 0.02, answer, prioritize=scored, answer_derived=True),
        "SLR\\x03",
    )
    w.spool(
        "framed_preempt",
        event("golden-slr3-preempt", "preempt", T0 + 0.03, PREEMPT_ANSWER, preempt=PREEMPT, node_mode=""),
        "SLR\\x03",
    )
    w.spool("json_bind", event("golden-json-bind", "bind", T0 + 0.04, BIND_ANSWER, bind=BIND, node_mode=""), "json")
    refused = event(
        "golden-json-refused",
        "filter",
        T0 + 0.05,
        "null",
        http_status=400,
        error="request body is not ExtenderArgs JSON: expected an object",
        error_path="$.Pod",
        node_mode="",
        pod_namespace="",
        pod_name="",
        pod_uid="",
        pod_resource_version="",
    )
    w.spool("json_refused", refused, "json")

    # Call bodies, format 2.
    bodies(w, "body2", T0 + 7200)
    record, big_answer = big_filter()
    shared_id = "golden-body2-filter-shared"
    _, facts, part = w.body(
        "body2_filter_shared", event(shared_id, "filter", T0 + 7300, big_answer, filter=record, node_mode="names")
    )
    assert part is not None
    assert facts is not None
    big = big_prioritize(record)
    big_answer_text = (
        "["
        + ",".join(f'{{"Host":"{n}","Score":{s}}}' for n, s in zip(big["nodes"], big["extender"], strict=True))
        + "]"
    )
    w.body(
        "body2_prioritize_shared",
        event(
            "golden-body2-prio-shared",
            "prioritize",
            T0 + 7300.01,
            big_answer_text,
            prioritize=big,
            answer_derived=True,
        ),
        facts=facts,
        refers_to=shared_id,
    )
    w.body(
        "body2_prioritize_alone",
        event("golden-body2-prio-alone", "prioritize", T0 + 7400, answer, prioritize=alone_prioritize()),
    )

    # Columns: a large record packed, a bind's record and answer plain.
    w.column(
        "packed_prioritize_record", without_defaults(big, "PrioritizeRecord") | {"node_mode": "names"}, "packed json"
    )
    w.column("plain_bind_record", BIND, "plain json")
    w.column("plain_bind_answer", json.loads(BIND_ANSWER), "plain json")
    w.link(
        "link_json_bind",
        {
            "cycle_id": 40,
            "event_id": "golden-json-bind",
            "verb": "bind",
            "started_at": "2026-11-26T05:00:00.5+00:00",
            "duration_ms": 3.25,
            "http_status": 200,
            "error": "",
            "server": "web-0:41",
            "record": BIND,
            "response": json.loads(BIND_ANSWER),
        },
        "cd" * 32,
    )

    # The spool file as written now: answered flags and the rejected table.
    from dashboard.spool import Spool

    framed = w.verb_event(event("golden-file-filter", "filter", T0 + 9000, FILTER_ANSWER, filter=FILTER))
    bind = w.verb_event(event("golden-file-bind", "bind", T0 + 9000.1, BIND_ANSWER, bind=BIND, node_mode=""))
    refused_row = w.verb_event({**refused, "event_id": "golden-file-refused"})
    preempt = w.verb_event(
        event("golden-file-preempt", "preempt", T0 + 9000.2, PREEMPT_ANSWER, preempt=PREEMPT, node_mode="")
    )

    def fill(spool: Any) -> None:
        spool.append(w.record.encode_event(framed[0]))
        spool.append(w.record.encode_event(bind[0]), confirm_later=True)  # never confirmed
        row = spool.append(w.record.encode_event(refused_row[0]), confirm_later=True)
        spool.confirm(row)
        rejected = spool.append(w.record.encode_event(preempt[0]))
        spool.reject(rejected, "golden: the database refused it")

    spool_file(
        w,
        "spool_current",
        fill,
        lambda spool: spool.close(),
        Spool,
        {
            "form": "spool file with answered and rejected",
            "rows": [
                {"id": 1, "answered": True, "rejected": ""},
                {"id": 2, "answered": False, "rejected": ""},
                {"id": 3, "answered": True, "rejected": ""},
                {"id": 4, "answered": True, "rejected": "golden: the database refused it"},
            ],
            "expected_events": {"1": framed[1], "2": bind[1], "3": refused_row[1], "4": preempt[1]},
        },
    )


def write_body_as_spooled(w: Writer) -> None:
    """Body format 3: a filter and a prioritize stored as the verb spooled them in ``SLR\\x04`` form (the inputs of
    ``derived-scores``: the prioritize's final and NetworkTraffic scores left out of the spool, written again on
    reading)."""
    from make_fixtures_writer import record_view

    from dashboard.storage import call_body
    from scheduler_core.extender.record import spool_codec

    for name, value in derived_score_events():
        name = name.replace("deriving_", "body3_")
        made, expected = w.verb_event(value)
        body = call_body.body_as_spooled(spool_codec.encode_event(made, deriving=True))
        assert body is not None
        assert body[0] == 3, body[:1]
        meta: dict[str, Any] = {
            "form": "body format 3",
            "event_id": value["event_id"],
            "refers_to_filter": "",
            "shared_part": "",
            "column_kinds": [],
            "expected_record": record_view(expected),
            "expected_answer": json.loads(value["response"]),
        }
        w.save("bodies", name, body, meta)
