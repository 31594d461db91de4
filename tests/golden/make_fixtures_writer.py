"""The writer's side of the golden fixtures (``make_fixtures.py``): the old checkout's own modules, imported
lazily from the worktree put first on ``sys.path``, write each stored form; :class:`Writer` saves the bytes and
``<fixture>.json`` beside them."""

from __future__ import annotations

import copy
import hashlib
import json
import sys
from datetime import datetime
from pathlib import Path
from typing import Any

from make_fixtures_inputs import DEFAULTS, LATER, PART_OF, WRITERS

# --- the writer's side ------------------------------------------------------------------------------------


class Writer:
    def __init__(self, name: str, out: Path) -> None:
        self.name = name
        self.commit = WRITERS[name]
        self.out = out
        here = Path.cwd()
        sys.path.insert(0, str(here))
        import msgspec

        from scheduler_core.extender.record import structs as record

        assert Path(record.__file__).resolve().is_relative_to(here), f"{record.__file__} is not the writer's"
        self.msgspec = msgspec
        self.record = record
        self.types = {
            "VerbEvent": record.VerbEvent,
            "FilterRecord": record.FilterRecord,
            "PrioritizeRecord": record.PrioritizeRecord,
            "PluginScores": record.PluginScores,
            "BindRecord": record.BindRecord,
            "PreemptRecord": record.PreemptRecord,
        }

    def names(self, kind: str) -> set[str]:
        return {info.name for info in self.msgspec.structs.fields(self.types[kind])}

    def split(self, value: dict[str, Any], kind: str) -> tuple[dict[str, Any], dict[str, Any]]:
        """What this writer's version is given of ``value`` (its fields only), and what the reader should give."""
        given: dict[str, Any] = {}
        expected: dict[str, Any] = {}
        names = self.names(kind)
        for key, item in value.items():
            if key not in names:
                expected[key] = LATER[kind][key]  # KeyError: a newer field without a hand-written expectation
                continue
            if kind == "VerbEvent" and key in PART_OF and item is not None:
                given[key], expected[key] = self.split(item, PART_OF[key])
            elif kind == "PrioritizeRecord" and key == "plugins":
                pairs = [self.split(plugin, "PluginScores") for plugin in item]
                given[key], expected[key] = [g for g, _ in pairs], [e for _, e in pairs]
            else:
                given[key], expected[key] = copy.deepcopy(item), copy.deepcopy(item)
        return given, expected

    def verb_event(self, value: dict[str, Any]) -> tuple[Any, dict[str, Any]]:
        given, expected = self.split(value, "VerbEvent")
        answer = given.pop("response")
        made = self.msgspec.convert(given, self.record.VerbEvent)
        made.response = self.msgspec.Raw(answer.encode())
        return made, expected

    def save(self, group: str, name: str, data: bytes, meta: dict[str, Any], suffix: str = ".bin") -> None:
        folder = self.out / group
        folder.mkdir(parents=True, exist_ok=True)
        (folder / f"{name}{suffix}").write_bytes(data)
        meta = {"fixture": f"{group}/{name}{suffix}", "writer": self.name, "written_by": self.commit, **meta}
        (folder / f"{name}.json").write_text(json.dumps(meta, indent=1, sort_keys=False) + "\n")

    # spool records

    def spool(self, name: str, value: dict[str, Any], form: str) -> bytes:
        made, expected = self.verb_event(value)
        data = self.record.encode_event(made)
        magic = {"json": b"{", "SLR\\x01": b"SLR\x01", "SLR\\x02": b"SLR\x02", "SLR\\x03": b"SLR\x03"}[form]
        assert data.startswith(magic), (name, data[:4])
        self.save("spool", name, data, {"form": form, "expected": expected})
        return data

    # bodies

    def packing(self) -> Any:
        from dashboard import packing

        assert Path(packing.__file__).resolve().is_relative_to(Path.cwd())
        return packing

    def body(
        self, name: str, value: dict[str, Any], *, facts: Any = None, refers_to: str = ""
    ) -> tuple[bytes, Any, Any]:
        packing = self.packing()
        made, expected = self.verb_event(value)
        encoded = packing.body_encode_with_facts(made, filter_facts=facts)
        data, made_facts = encoded[0], encoded[1]
        part = encoded[2] if len(encoded) > 2 else None
        meta: dict[str, Any] = {
            "form": f"body format {data[0]}",
            "event_id": value["event_id"],
            "refers_to_filter": refers_to,
            "shared_part": part.digest if part is not None else "",
            "column_kinds": self.column_kinds(packing, data, part),
            "expected_record": record_view(expected),
            "expected_answer": json.loads(value["response"]),
        }
        self.save("bodies", name, data, meta)
        if part is not None:
            assert hashlib.sha256(part.data).hexdigest() == part.digest
            self.save(
                "bodies",
                f"part-{part.digest}",
                part.data,
                {"form": "shared filter part", "digest": part.digest, "used_by": name},
            )
        return data, made_facts, part

    def column_kinds(self, packing: Any, data: bytes, part: Any) -> list[str]:
        from scheduler_core.extender.record.compression import decompressor

        names = [
            "TEXT",
            "F64_SHUFFLED",
            "GENERIC",
            "SAME_AS_SCORES",
            "FILTER_TRAFFIC",
            "WEIGHTED_MEAN",
            "INVERSE_SHARE",
        ]
        body = self.msgspec.msgpack.decode(decompressor().decompress(data[1:]), type=packing.Body)
        columns: list[Any] = []
        if body.filter is not None:
            columns.append(body.filter.traffic)
        if body.prioritize is not None:
            p = body.prioritize
            columns += [*p.scores, *p.raws, *p.herd, p.final]
        if part is not None:
            shared = self.msgspec.msgpack.decode(decompressor().decompress(part.data), type=packing.SharedFilterPart)
            columns.append(shared.traffic)
        return sorted({names[c.kind] for c in columns if c is not None})

    # columns, audit links

    def column(self, name: str, value: Any, form: str) -> dict[str, Any]:
        packing = self.packing()
        stored = packing.stored_form(packing.pack(copy.deepcopy(value)))
        is_packed = isinstance(stored, dict) and list(stored) == [packing.PACK_KEY]
        assert is_packed == (form == "packed json"), (name, form)
        self.save("columns", name, json.dumps(stored).encode(), {"form": form, "expected": value})
        return stored

    def link(self, name: str, values: dict[str, Any], previous: str, *, body: str = "") -> None:
        import django

        django.setup()
        try:  # where the writing commit keeps the chain's canonical content
            from dashboard.audit.chain import call_content, chain_link
        except ImportError:  # commits before the audit service was split by concern
            from dashboard.services.audit import call_content, chain_link  # type: ignore[no-redef]

        packing = self.packing()
        given = dict(values)
        given["started_at"] = datetime.fromisoformat(values["started_at"])
        for key in ("record", "response"):
            given[key] = packing.unpack(copy.deepcopy(values[key]))
        if body:
            given["body"] = (self.out / "bodies" / f"{body}.bin").read_bytes()
        chain_hash = chain_link(previous, call_content(given))
        meta = {
            "form": "audit chain link",
            "values": values,
            "body": body,
            "previous": previous,
            "chain_hash": chain_hash,
        }
        self.save("audit", name, chain_hash.encode(), meta, suffix=".sha256")


def record_view(expected_event: dict[str, Any]) -> dict[str, Any]:
    """A call's record as a stored body reads back: the record part without its default fields, with the event's
    node mode and error path (``dashboard.ingest.cycles``)."""
    verb_part = next(key for key in PART_OF if expected_event[key] is not None)
    record = without_defaults(expected_event[verb_part], PART_OF[verb_part])
    if expected_event["error_path"]:
        record["error_path"] = expected_event["error_path"]
    if expected_event["node_mode"]:
        record["node_mode"] = expected_event["node_mode"]
    return record


def without_defaults(value: dict[str, Any], kind: str) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, item in value.items():
        if key in DEFAULTS[kind] and item == DEFAULTS[kind][key]:
            continue
        out[key] = [without_defaults(p, "PluginScores") for p in item] if key == "plugins" else item
    return out
