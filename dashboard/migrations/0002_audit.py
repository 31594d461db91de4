"""Audit API: candidate nodes per cycle, the call hash chain, prune checkpoints, node tallies, the auditor group.

Rows recorded before this migration are backfilled with the same functions the ingester uses (pure functions
of plain values, so this migration does not depend on the current models).
"""

from django.db import migrations, models

from dashboard.audit.chain import CONTENT_FIELDS, GENESIS, call_content, chain_link
from dashboard.services.node_tallies import NodeCounts, tally_call

CHUNK = 1000
GIN_INDEX = "cycle_candidate_nodes_gin"


def backfill(apps, schema_editor):  # type: ignore[no-untyped-def]
    cycle_model = apps.get_model("dashboard", "SchedulingCycle")
    call_model = apps.get_model("dashboard", "VerbCall")
    tally_model = apps.get_model("dashboard", "NodeTally")

    # Candidate nodes: the filter's win over prioritize's, as in dashboard.services.cycle_summary.summarize.
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
