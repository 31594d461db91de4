"""Audit API: candidate nodes per cycle, the call hash chain, prune checkpoints, node tallies, the auditor group.

Rows recorded before this migration are backfilled as the ingester linked and counted calls when it was written. The
code is frozen here, not imported from ``dashboard.audit.chain`` and ``dashboard.services.node_tallies``: what this
migration computes must not change when they do. At this point a call has no binary body and no packed JSON (later
migrations), so its content is its plain columns.
"""

import hashlib
import json
import math
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from json.encoder import encode_basestring_ascii
from typing import Any

from django.db import migrations, models

CHUNK = 1000
GIN_INDEX = "cycle_candidate_nodes_gin"

# --- the chain's links, as dashboard.audit.chain computed them for calls without a body -------------------------

GENESIS = "0" * 64
CONTENT_FIELDS = (
    "cycle_id",
    "event_id",
    "verb",
    "started_at",
    "duration_ms",
    "http_status",
    "error",
    "server",
    "record",
    "response",
)
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_MICROSECOND = datetime.resolution


def _number(value: float) -> str:
    if not math.isfinite(value):
        return json.dumps(value)
    return "0.0" if value == 0 else repr(value)


def _canonical(value: Any, out: list[str]) -> None:
    # Numbers are written as floats: PostgreSQL's jsonb gives 1e16 back as an integer, SQLite what was written.
    if value is None:
        out.append("null")
    elif value is True or value is False:
        out.append("true" if value else "false")
    elif isinstance(value, int):
        try:
            out.append(_number(float(value)))
        except OverflowError:
            out.append(str(value))
    elif isinstance(value, float):
        out.append(_number(value))
    elif isinstance(value, str):
        out.append(encode_basestring_ascii(value))
    elif isinstance(value, datetime):
        out.append(str((value - _EPOCH) // _MICROSECOND))
    elif isinstance(value, list | tuple):
        out.append("[")
        for index, item in enumerate(value):
            if index:
                out.append(",")
            _canonical(item, out)
        out.append("]")
    elif isinstance(value, Mapping):
        out.append("{")
        for index, key in enumerate(sorted(value)):
            if index:
                out.append(",")
            out.append(encode_basestring_ascii(str(key)))
            out.append(":")
            _canonical(value[key], out)
        out.append("}")
    else:
        raise TypeError(f"cannot hash a {type(value).__name__}")


def call_content(values: dict[str, Any]) -> bytes:
    """Canonical bytes of a call's chained content: its ``CONTENT_FIELDS`` as one mapping, keys sorted."""
    out: list[str] = []
    _canonical({name: values[name] for name in CONTENT_FIELDS}, out)
    return "".join(out).encode("ascii")


def chain_link(previous: str, content: bytes) -> str:
    return hashlib.sha256(previous.encode("ascii") + b"\n" + content).hexdigest()


# --- the per-node counts, as dashboard.services.node_tallies counted a call -----------------------------------


@dataclass(slots=True)
class NodeCounts:
    considered: int = 0
    filtered_out: int = 0
    placements: int = 0
    last_seen_at: datetime | None = None


def tally_call(tallies: dict[str, NodeCounts], values: dict[str, Any]) -> None:
    """What one answered filter or bind adds to the per-node counts (a call is not counted as a placement here)."""
    verb = values["verb"]
    if values["http_status"] != 200 or verb not in {"filter", "bind"}:
        return
    record = values["record"] or {}
    touched: list[str] = []
    if verb == "filter":
        touched = record.get("nodes", [])
        for node in touched:
            tallies.setdefault(node, NodeCounts()).considered += 1
        for node in record.get("failures", {}):
            tallies.setdefault(node, NodeCounts()).filtered_out += 1
    elif not values["error"] and record.get("node"):
        touched = [record["node"]]
        tallies.setdefault(record["node"], NodeCounts())
    at = values["started_at"]
    for node in touched:
        tally = tallies[node]
        if tally.last_seen_at is None or at > tally.last_seen_at:
            tally.last_seen_at = at


def backfill(apps, schema_editor):  # type: ignore[no-untyped-def]
    cycle_model = apps.get_model("dashboard", "SchedulingCycle")
    call_model = apps.get_model("dashboard", "VerbCall")
    tally_model = apps.get_model("dashboard", "NodeTally")

    # Candidate nodes: the filter's win over prioritize's, as the ingester's cycle summary took them.
    for verb in ("prioritize", "filter"):
        batch = []
        for cycle_id, record in call_model.objects.filter(verb=verb).values_list("cycle_id", "record").iterator(CHUNK):
            nodes = (record or {}).get("nodes") or []
            batch.append(cycle_model(id=cycle_id, candidate_nodes=f"|{'|'.join(nodes)}|" if nodes else ""))
            if len(batch) >= CHUNK:
                cycle_model.objects.bulk_update(batch, ["candidate_nodes"])
                batch = []
        cycle_model.objects.bulk_update(batch, ["candidate_nodes"])

    previous = GENESIS
    tallies: dict[str, NodeCounts] = {}
    batch = []
    rows = call_model.objects.order_by("id").values("id", *CONTENT_FIELDS).iterator(CHUNK)
    for values in rows:
        previous = chain_link(previous, call_content(values))
        batch.append(call_model(id=values["id"], chain_hash=previous))
        tally_call(tallies, values)
        if len(batch) >= CHUNK:
            call_model.objects.bulk_update(batch, ["chain_hash"])
            batch = []
    call_model.objects.bulk_update(batch, ["chain_hash"])
    tally_model.objects.bulk_create(
        [
            tally_model(
                node=node,
                considered=c.considered,
                filtered_out=c.filtered_out,
                placements=c.placements,
                last_seen_at=c.last_seen_at,
            )
            for node, c in sorted(tallies.items())
        ],
        batch_size=CHUNK,
    )


def create_auditor_group(apps, schema_editor):  # type: ignore[no-untyped-def]
    apps.get_model("auth", "Group").objects.get_or_create(name="auditor")


def create_gin_index(apps, schema_editor):  # type: ignore[no-untyped-def]
    # PostgreSQL answers "node considered" from a GIN index over the names (dashboard.filters); SQLite scans.
    if schema_editor.connection.vendor == "postgresql":
        schema_editor.execute(
            f"CREATE INDEX {GIN_INDEX} ON dashboard_schedulingcycle USING gin (string_to_array(candidate_nodes, '|'))"
        )


def drop_gin_index(apps, schema_editor):  # type: ignore[no-untyped-def]
    if schema_editor.connection.vendor == "postgresql":
        schema_editor.execute(f"DROP INDEX IF EXISTS {GIN_INDEX}")


class Migration(migrations.Migration):
    dependencies = [
        ("dashboard", "0001_initial"),
        ("auth", "0012_alter_user_first_name_max_length"),
    ]

    operations = [
        migrations.CreateModel(
            name="AuditCheckpoint",
            fields=[
                ("id", models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name="ID")),
                ("last_call_id", models.BigIntegerField(unique=True)),
                ("chain_hash", models.CharField(max_length=64)),
                ("pruned_before", models.DateTimeField(help_text="The retention cut-off of the prune that wrote it.")),
                ("cycles_deleted", models.PositiveIntegerField()),
                ("calls_deleted", models.PositiveIntegerField()),
                ("created_at", models.DateTimeField()),
            ],
            options={
                "ordering": ["-last_call_id"],
            },
        ),
        migrations.CreateModel(
            name="NodeTally",
            fields=[
                ("id", models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name="ID")),
                ("node", models.CharField(max_length=253, unique=True)),
                (
                    "considered",
                    models.PositiveBigIntegerField(default=0, help_text="Filter calls that listed the node."),
                ),
                (
                    "filtered_out",
                    models.PositiveBigIntegerField(default=0, help_text="Filter calls that excluded it."),
                ),
                ("placements", models.PositiveBigIntegerField(default=0, help_text="Successful binds to it.")),
                ("last_seen_at", models.DateTimeField(blank=True, null=True)),
            ],
            options={
                "ordering": ["node"],
            },
        ),
        migrations.AddField(
            model_name="schedulingcycle",
            name="candidate_nodes",
            field=models.TextField(
                blank=True,
                default="",
                editable=False,
                help_text="Candidate nodes as '|node-1|node-2|' (the filter's, else prioritize's).",
            ),
        ),
        migrations.AddField(
            model_name="verbcall",
            name="chain_hash",
            field=models.CharField(
                blank=True,
                editable=False,
                help_text="sha256(previous call's chain_hash, this call's content): dashboard.audit.chain.",
                max_length=64,
            ),
        ),
        migrations.RunPython(backfill, migrations.RunPython.noop),
        migrations.RunPython(create_gin_index, drop_gin_index),
        migrations.RunPython(create_auditor_group, migrations.RunPython.noop),
    ]
