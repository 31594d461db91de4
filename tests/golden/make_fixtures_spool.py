"""The writers of the spool era (``make_fixtures.py``): ``json`` (spool records, jsonb columns, an audit link),
``spool-file-v0`` (the spool file without ``answered``), ``binary-first`` and ``binary-last`` (``SLR\\x01``,
``SLR\\x02``), ``bind-intents`` (a bind intent, the spool file with ``bind_intents``), ``pod-assumed`` (a
prioritize with ``pod_assumed``)."""

from __future__ import annotations

import json
import shutil
import tempfile
from pathlib import Path
from typing import Any

from make_fixtures_inputs import (
    BIND,
    BIND_ANSWER,
    FILTER,
    FILTER_ANSWER,
    HERD_RECONCILED,
    POD_ASSUMED_LEARNED,
    PREEMPT,
    PREEMPT_ANSWER,
    RECONCILED_BIND,
    T0,
    big_filter,
    derived_score_events,
    event,
    intent,
    prioritize,
    prioritize_answer,
)
from make_fixtures_writer import Writer

# --- per writer -------------------------------------------------------------------------------------------


def write_json(w: Writer) -> None:
    w.spool("json_filter", event("golden-json-filter", "filter", T0, FILTER_ANSWER, filter=FILTER), "json")
    scored = prioritize(scale="fixed")
    w.spool(
        "json_prioritize",
        event("golden-json-prioritize", "prioritize", T0 + 0.01, prioritize_answer([8, 1, 6]), prioritize=scored),
        "json",
    )
    w.spool(
        "json_preempt",
        event("golden-json-preempt", "preempt", T0 + 0.02, PREEMPT_ANSWER, preempt=PREEMPT, node_mode=""),
        "json",
    )
    # The jsonb columns as the ingester of that version filled them: record and answer, large ones packed.
    record, answer = big_filter()
    stored = w.column("packed_filter_record", record | {"node_mode": "names"}, "packed json")
    stored_answer = w.column("packed_filter_answer", json.loads(answer), "packed json")
    w.column("plain_filter_record", FILTER | {"node_mode": "names"}, "plain json")
    w.link(
        "link_json_call",
        {
            "cycle_id": 7,
            "event_id": "golden-json-filter-big",
            "verb": "filter",
            "started_at": "2026-11-22T21:00:00.125000+00:00",
            "duration_ms": 1.5,
            "http_status": 200,
            "error": "",
            "server": "web-0:41",
            "record": stored,
            "response": stored_answer,
        },
        "0" * 64,
    )


def write_spool_file_v0(w: Writer) -> None:
    from dashboard.spool import Spool

    filter_event, _ = w.verb_event(event("golden-v0-filter", "filter", T0, FILTER_ANSWER, filter=FILTER))
    bind_event, _ = w.verb_event(event("golden-v0-bind", "bind", T0 + 0.1, BIND_ANSWER, bind=BIND))
    spool_file(
        w,
        "spool_before_answered",
        lambda spool: [spool.append(w.record.encode_event(e)) for e in (filter_event, bind_event)],
        lambda spool: spool._local.conn.close(),
        Spool,
        {
            "form": "spool file without answered",
            "rows": [
                {"id": 1, "answered": True, "rejected": ""},
                {"id": 2, "answered": True, "rejected": ""},
            ],
            "expected_events": {
                "1": w.split(event("golden-v0-filter", "filter", T0, FILTER_ANSWER, filter=FILTER), "VerbEvent")[1],
                "2": w.split(event("golden-v0-bind", "bind", T0 + 0.1, BIND_ANSWER, bind=BIND), "VerbEvent")[1],
            },
        },
    )


def spool_file(w: Writer, name: str, fill: Any, close: Any, spool_type: Any, meta: dict[str, Any]) -> None:
    with tempfile.TemporaryDirectory() as scratch:
        spool = spool_type(scratch)
        fill(spool)
        close(spool)
        path = Path(scratch) / "spool.sqlite3"
        assert not Path(f"{path}-wal").exists(), "the last connection closed merges the WAL: the file holds every row"
        out = w.out / "spool_files"
        out.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(path, out / f"{name}.sqlite3")
    meta = {"fixture": f"spool_files/{name}.sqlite3", "writer": w.name, "written_by": w.commit, **meta}
    (w.out / "spool_files" / f"{name}.json").write_text(json.dumps(meta, indent=1) + "\n")


def write_binary_first(w: Writer) -> None:
    assert "answer_derived" not in w.names("VerbEvent")
    w.spool("binary_first_filter", event("golden-bin1a-filter", "filter", T0, FILTER_ANSWER, filter=FILTER), "SLR\\x01")
    w.spool(
        "binary_first_prioritize",
        event(
            "golden-bin1a-prioritize",
            "prioritize",
            T0 + 0.01,
            prioritize_answer([8, 1, 6]),
            prioritize=prioritize(scale="fixed"),
        ),
        "SLR\\x01",
    )


def write_binary_last(w: Writer) -> None:
    assert "answer_derived" in w.names("VerbEvent")
    w.spool("binary_filter", event("golden-bin1-filter", "filter", T0, FILTER_ANSWER, filter=FILTER), "SLR\\x01")
    scored = prioritize(scale="fixed")
    answer = prioritize_answer([8, 1, 6])
    w.spool(
        "binary_prioritize",
        event("golden-bin1-prioritize", "prioritize", T0 + 0.01, answer, prioritize=scored),
        "SLR\\x01",
    )
    w.spool(
        "binary_derived_prioritize",
        event("golden-bin2-prioritize", "prioritize", T0 + 0.02, answer, prioritize=scored, answer_derived=True),
        "SLR\\x02",
    )
    w.spool(
        "binary_preempt",
        event("golden-bin1-preempt", "preempt", T0 + 0.03, PREEMPT_ANSWER, preempt=PREEMPT, node_mode=""),
        "SLR\\x01",
    )


def write_pod_assumed(w: Writer) -> None:
    """A prioritize whose NetworkTraffic says what the pod is assumed to add once bound and where that comes from
    (``PluginScores.pod_assumed``, issue 32 item 4): learned from its workload's pods."""
    scored = prioritize(scale="fixed")
    scored["plugins"][0]["pod_assumed"] = dict(POD_ASSUMED_LEARNED)
    from scheduler_core.extender.record import (
        spool_codec,  # the record module no longer encodes (``Writer.spool`` is for old ones)
    )

    value = event("golden-pod-assumed", "prioritize", T0 + 0.05, prioritize_answer([8, 1, 6]), prioritize=scored)
    value["profile_version"] = "3b9f0c1d2e4a"
    made, expected = w.verb_event(value)
    data = spool_codec.encode_event(made)
    assert data.startswith(b"SLR\x03"), data[:4]
    w.save("spool", "framed_prioritize_pod_assumed", data, {"form": "SLR\\x03", "expected": expected})


def write_herd_reconciled(w: Writer) -> None:
    """A prioritize whose NetworkTraffic counted two recent binds by their pods' own traffic
    (``PluginScores.herd_reconciled``, issue 32 item 3: ``max(0, assumed − observed)``)."""
    scored = prioritize(scale="fixed")
    traffic = scored["plugins"][0]
    traffic["herd_bytes"] = [1.75e8, 0.0, 0.0]
    traffic["herd_binds"] = [2, 0, 0]
    traffic["herd_newest_age_ms"] = [4000, None, None]
    traffic["herd_reconciled"] = [dict(bind) for bind in HERD_RECONCILED]
    from scheduler_core.extender.record import (
        spool_codec,  # the record module no longer encodes (``Writer.spool`` is for old ones)
    )

    value = event("golden-herd-reconciled", "prioritize", T0 + 0.06, prioritize_answer([8, 1, 6]), prioritize=scored)
    value["profile_version"] = "5c1e9a7b3d20"
    made, expected = w.verb_event(value)
    data = spool_codec.encode_event(made)
    assert data.startswith(b"SLR\x03"), data[:4]
    w.save("spool", "framed_prioritize_herd_reconciled", data, {"form": "SLR\\x03", "expected": expected})


def write_derived_scores(w: Writer) -> None:
    """``SLR\\x04``: a filter, and a prioritize whose final scores and NetworkTraffic's scores were left out because
    its other columns give them back (``scheduler_core.extender.record.formulas``; the inputs:
    ``derived_score_events``)."""
    from scheduler_core.extender.record import (
        spool_codec,  # the record module no longer encodes (``Writer.spool`` is for old ones)
    )

    for name, value in derived_score_events():
        made, expected = w.verb_event(value)
        data = spool_codec.encode_event(made, deriving=True)
        assert data.startswith(b"SLR\x04"), data[:4]
        if made.prioritize is not None:
            rest, *_ = spool_codec._frames_decoder.decode(data[4:])
            spooled = spool_codec._deriving_decoder.decode(spool_codec.decompressor().decompress(rest)).prioritize
            assert spooled.final is None, "the final scores were spooled"
            assert spooled.plugins[0].scores == spool_codec.DERIVED_FRAME, "NetworkTraffic's scores were spooled"
        w.save("spool", name, data, {"form": "SLR\\x04", "expected": expected})


def write_bind_intents(w: Writer) -> None:
    """A bind intent (JSON, the ``bind_intents`` table's rows), and the spool file with that table: a filter, a bind
    whose record settled its intent, a reconciled bind, and an intent left by a process that died mid-bind."""
    import msgspec

    from dashboard.spool import Spool
    from scheduler_core.extender.record import spool_codec

    def made(value: dict[str, Any]) -> Any:
        return msgspec.convert(value, w.record.BindIntent)

    alone = intent("golden-intent-bind", T0 + 0.04)
    data = spool_codec.encode_intent(made(alone))
    assert data.startswith(b"{"), data[:4]
    w.save("spool", "intent_json", data, {"form": "json", "expected": alone})

    left = intent("golden-file-intent-left", T0 + 9100.0, node="node-e")
    settled = intent("golden-file-intent-bind", T0 + 9100.1)
    reconciled = intent("golden-file-intent-reconciled", T0 + 9100.2, node="node-c")
    framed = w.verb_event(event("golden-file-intents-filter", "filter", T0 + 9100, FILTER_ANSWER, filter=FILTER))
    bind = w.verb_event(event("golden-file-intent-bind", "bind", T0 + 9100.1, BIND_ANSWER, bind=BIND, node_mode=""))
    found = w.verb_event(
        event(
            "golden-file-intent-reconciled",
            "bind",
            T0 + 9100.2,
            "null",
            bind=RECONCILED_BIND,
            node_mode="",
            duration_ms=0.0,
            pod_resource_version="",
        )
    )

    def fill(spool: Any) -> None:
        spool.append(spool_codec.encode_event(framed[0]))
        spool.intend(spool_codec.encode_intent(made(left)))  # never settled: the process died mid-bind
        settles = spool.intend(spool_codec.encode_intent(made(settled)))
        row = spool.append(spool_codec.encode_event(bind[0]), confirm_later=True, settles=settles)
        spool.confirm(row)
        waiting = spool.intend(spool_codec.encode_intent(made(reconciled)))
        assert spool.settle_intent(waiting, spool_codec.encode_event(found[0]))

    spool_file(
        w,
        "spool_with_intents",
        fill,
        lambda spool: spool.close(),
        Spool,
        {
            "form": "spool file with answered, rejected and bind_intents",
            "rows": [
                {"id": 1, "answered": True, "rejected": ""},
                {"id": 2, "answered": True, "rejected": ""},
                {"id": 3, "answered": True, "rejected": ""},
            ],
            "expected_events": {"1": framed[1], "2": bind[1], "3": found[1]},
            "intents": [{"id": 1, "expected": left}],
        },
    )
