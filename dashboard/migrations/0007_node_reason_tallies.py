"""Per-node counts the nodes page reads instead of walking the latest cycles: why nodes were filtered out
(``NodeReasonTally``: one row per node, plugin and reason) and how many cycles preferred each node
(``NodeTally.preferred``), kept by the ingester and the pruner from now on.

The counts of the record already stored are backfilled as the ingester and the rebuild counted calls when this
migration was written (``dashboard.services.node_tallies``), so that pruning it later subtracts exactly what was added.
That code is frozen here, so what this migration computes does not change when the live module does. A binary body is
read with ``dashboard.storage.call_body_read.body_read``, as migrations name their fields' classes: it is the codec of a
stored format, which must read every body ever stored as it was written (tests/golden pins those bytes).

Every answered filter call is decoded once, in one transaction (the verbs keep answering and spooling meanwhile, the
ingester catches up after); the preferred nodes are one grouped read of the cycles. ``preferred`` keeps its database
default so that a replica still running the previous code can insert node counts during a rolling upgrade (what such
a replica ingests meanwhile is not counted here: ``node_tallies_rebuild`` recounts it all).
"""

import hashlib
from collections.abc import Mapping
from typing import Any

from django.db import migrations, models
from django.db.models import Count

from dashboard.storage.call_body_read import body_read
from dashboard.storage.call_record import record_builtins

CHUNK = 2000
REASON_PLUGIN_LIMIT = 128
REASON_LIMIT = 256
"""The widths of ``NodeReasonTally``'s plugin and reason columns (below)."""

Reasons = dict[tuple[str, str], int]


def clip(value: str, limit: int) -> str:
    """A string cut to ``limit`` characters, ending in "…" and 12 hex digits of its SHA-256 so that cut strings stay
    distinct (``dashboard.ingest.sanitize.clip``)."""
    if len(value) <= limit:
        return value
    digest = hashlib.sha256(value.encode("utf-8", "surrogatepass")).hexdigest()[:12]
    return f"{value[: limit - 13]}…{digest}"


def count_reasons(reasons: Reasons, verdicts: Mapping[str, str]) -> None:
    for plugin, reason in verdicts.items():
        key = (plugin, reason)
        if len(plugin) > REASON_PLUGIN_LIMIT or len(reason) > REASON_LIMIT:
            key = clip(plugin, REASON_PLUGIN_LIMIT), clip(reason, REASON_LIMIT)
        reasons[key] = reasons.get(key, 0) + 1


def filter_record(values: Mapping[str, Any], shared_parts: Any) -> dict[str, Any]:
    """An answered filter call's record: its binary body's, else its JSON column's."""
    if values["body"] is not None:  # a filter's body refers to no other call
        record = body_read(bytes(values["body"]), filter_records=lambda _event_id: None, shared_parts=shared_parts)[0]
        return record_builtins(record)  # the stored form's decoder and its dict, as the record was when 0007 ran
    return values["record_json"] or {}


def backfill(apps, schema_editor):  # type: ignore[no-untyped-def]
    call_model = apps.get_model("dashboard", "VerbCall")
    cycle_model = apps.get_model("dashboard", "SchedulingCycle")
    tally_model = apps.get_model("dashboard", "NodeTally")
    reason_model = apps.get_model("dashboard", "NodeReasonTally")
    shared_part_model = apps.get_model("dashboard", "SharedPart")

    def shared_parts(digest: str) -> bytes | None:
        data = shared_part_model.objects.filter(digest=digest).values_list("data", flat=True).first()
        return None if data is None else bytes(data)

    reasons: dict[str, Reasons] = {}
    fields = ("record_json", "body")
    for values in call_model.objects.filter(verb="filter", http_status=200).values(*fields).iterator(CHUNK):
        failures: Mapping[str, Mapping[str, str]] = filter_record(values, shared_parts).get("failures", {})
        for node, verdicts in failures.items():
            count_reasons(reasons.setdefault(node, {}), verdicts)
    reason_model.objects.bulk_create(
        [
            reason_model(node=node, plugin=plugin, reason=reason, count=count)
            for node, counted in sorted(reasons.items())
            if counted
            for (plugin, reason), count in sorted(counted.items())
        ],
        batch_size=CHUNK,
    )
    preferred = cycle_model.objects.exclude(preferred_node="").values_list("preferred_node").annotate(Count("id"))
    for node, cycles in preferred:
        if not tally_model.objects.filter(node=node).update(preferred=cycles):
            tally_model.objects.create(node=node, preferred=cycles)


class Migration(migrations.Migration):
    dependencies = [
        ("dashboard", "0006_cycle_answer_tie"),
    ]

    operations = [
        migrations.AddField(
            model_name="nodetally",
            name="preferred",
            field=models.PositiveBigIntegerField(
                db_default=0,
                default=0,
                help_text="Cycles whose highest-scored node it was (SchedulingCycle.preferred_node).",
            ),
        ),
        migrations.CreateModel(
            name="NodeReasonTally",
            fields=[
                ("id", models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name="ID")),
                ("node", models.CharField(max_length=253)),
                ("plugin", models.CharField(max_length=128)),
                ("reason", models.CharField(max_length=256)),
                (
                    "count",
                    models.PositiveBigIntegerField(
                        default=0, help_text="Filter calls that failed the node for this reason."
                    ),
                ),
            ],
            options={
                "ordering": ["node", "-count", "plugin", "reason"],
                "constraints": [
                    models.UniqueConstraint(
                        fields=("node", "plugin", "reason"), name="nodereasontally_node_plugin_reason"
                    )
                ],
            },
        ),
        migrations.RunPython(backfill, migrations.RunPython.noop),
    ]
