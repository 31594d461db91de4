"""Per-node counts the nodes page reads instead of walking the latest cycles: why nodes were filtered out
(``NodeReasonTally``: one row per node, plugin and reason) and how many cycles preferred each node
(``NodeTally.preferred``), kept by the ingester and the pruner from now on.

The counts of the record already stored are backfilled with the functions the ingester and the rebuild use
(``dashboard.services.node_tallies``), so that pruning it later subtracts exactly what was added: every answered
filter call is decoded once (about 0.5 ms a filter call of 1000 nodes: some 10 minutes a million cycles, in one
transaction; the verbs keep answering and spooling meanwhile, the ingester catches up after), the preferred nodes
are one grouped read of the cycles. ``preferred`` keeps its database default so that a replica still running
the previous code can insert node counts during a rolling upgrade (what such a replica ingests meanwhile is not
counted here: ``node_tallies_rebuild`` recounts it all).
"""

from django.db import migrations, models
from django.db.models import Count

from dashboard.services.node_tallies import NodeCounts, tally_call

CHUNK = 2000


def backfill(apps, schema_editor):  # type: ignore[no-untyped-def]
    call_model = apps.get_model("dashboard", "VerbCall")
    cycle_model = apps.get_model("dashboard", "SchedulingCycle")
    tally_model = apps.get_model("dashboard", "NodeTally")
    reason_model = apps.get_model("dashboard", "NodeReasonTally")

    tallies: dict[str, NodeCounts] = {}
    fields = ("verb", "http_status", "error", "record_json", "body", "started_at")
    for values in call_model.objects.filter(verb="filter", http_status=200).values(*fields).iterator(CHUNK):
        tally_call(tallies, values)
    reason_model.objects.bulk_create(
        [
            reason_model(node=node, plugin=plugin, reason=reason, count=count)
            for node, counts in sorted(tallies.items())
            if counts.reasons
            for (plugin, reason), count in sorted(counts.reasons.items())
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
