"""Smaller and faster to write: a call's binary body, per-node cycle postings instead of a GIN index, two indexes.

- ``VerbCall.body`` (``bytea``): the ingester stores a per-node record and its answer there
  (``dashboard.storage.call_body.body_encode``). The two jsonb columns stay, renamed in the model only (``record_json``,
  ``response_json``; same columns): rows written before keep their JSON, read and hashed exactly as before, and
  smaller calls keep being written there. Nothing is rewritten, so every chain hash stays valid.
- ``NodePosting`` + ``SchedulingCycle.candidate_slot`` (PostgreSQL): which cycles considered a node, one bit per
  cycle, replacing the GIN index over ``candidate_nodes`` (1000 index entries per 1000-node cycle: most of the
  ingester's database time). Existing cycles get their slot (their id) and postings from ``candidate_nodes``, which
  they keep; the index goes.
- Indexes on (outcome, started_at, id) and (chosen_node, started_at, id) for the dashboard's rare filters.
"""

from django.db import migrations, models

import dashboard.models
import dashboard.storage.packed_json

GIN_INDEX = "cycle_candidate_nodes_gin"
BLOCK = 256
CHUNK = 2000


def backfill_postings(apps, schema_editor):  # type: ignore[no-untyped-def]
    connection = schema_editor.connection
    if connection.vendor != "postgresql":
        return  # SQLite keeps filtering on candidate_nodes
    cycle_model = apps.get_model("dashboard", "SchedulingCycle")
    with connection.cursor() as cursor:
        cursor.execute(f"DROP INDEX IF EXISTS {GIN_INDEX}")
        # Each cycle's slot is its id; then one bit per (node, slot), OR-ed per block of 256 slots, in SQL.
        cursor.execute("UPDATE dashboard_schedulingcycle SET candidate_slot = id WHERE candidate_nodes <> ''")
    last = 0
    while True:
        ids = list(
            cycle_model.objects.filter(id__gt=last, candidate_slot__isnull=False)
            .order_by("id")
            .values_list("id", flat=True)[:CHUNK]
        )
        if not ids:
            return
        with connection.cursor() as cursor:
            cursor.execute(
                f"""
                INSERT INTO dashboard_nodeposting (node, block, bits)
                SELECT node, c.candidate_slot / {BLOCK},
                       bit_or(set_bit(repeat('0', {BLOCK})::bit({BLOCK}), mod(c.candidate_slot, {BLOCK})::int, 1))
                FROM dashboard_schedulingcycle c, unnest(string_to_array(c.candidate_nodes, '|')) AS node
                WHERE c.id BETWEEN %s AND %s AND c.candidate_slot IS NOT NULL AND node <> ''
                GROUP BY 1, 2
                ON CONFLICT (node, block) DO UPDATE SET bits = dashboard_nodeposting.bits | excluded.bits
                """,  # noqa: S608  (constants only)
                [ids[0], ids[-1]],
            )
        last = ids[-1]


def restore_gin_index(apps, schema_editor):  # type: ignore[no-untyped-def]
    if schema_editor.connection.vendor == "postgresql":
        schema_editor.execute(
            f"CREATE INDEX IF NOT EXISTS {GIN_INDEX} ON dashboard_schedulingcycle "
            "USING gin (string_to_array(candidate_nodes, '|'))"
        )


def body_storage(apps, schema_editor):  # type: ignore[no-untyped-def]
    if schema_editor.connection.vendor == "postgresql":
        # zstd output does not compress: do not let TOAST try (pglz) before storing it out of line.
        schema_editor.execute("ALTER TABLE dashboard_verbcall ALTER COLUMN body SET STORAGE EXTERNAL")


class Migration(migrations.Migration):
    dependencies = [
        ("dashboard", "0003_verbcall_packed_json"),
    ]

    operations = [
        migrations.RenameField(model_name="verbcall", old_name="record", new_name="record_json"),
        migrations.RenameField(model_name="verbcall", old_name="response", new_name="response_json"),
        migrations.AlterField(
            model_name="verbcall",
            name="record_json",
            field=dashboard.storage.packed_json.PackedJSONField(
                blank=True, db_column="record", help_text="The record as JSON (calls without a body).", null=True
            ),
        ),
        migrations.AlterField(
            model_name="verbcall",
            name="response_json",
            field=dashboard.storage.packed_json.PackedJSONField(
                blank=True, db_column="response", help_text="The answer as JSON (calls without a body).", null=True
            ),
        ),
        migrations.AddField(
            model_name="verbcall",
            name="body",
            field=models.BinaryField(
                blank=True,
                help_text="Record and answer in binary form (dashboard.storage.call_body.body_encode).",
                null=True,
            ),
        ),
        migrations.RunPython(body_storage, migrations.RunPython.noop),
        migrations.AlterField(
            model_name="schedulingcycle",
            name="candidate_nodes",
            field=models.TextField(
                blank=True,
                default="",
                editable=False,
                help_text=(
                    "Candidate nodes as '|node-1|node-2|' (the filter's, else prioritize's). On PostgreSQL only for "
                    "cycles recorded before migration 0004: later ones are in NodePosting (dashboard.filters)."
                ),
            ),
        ),
        migrations.AddField(
            model_name="schedulingcycle",
            name="candidate_slot",
            field=models.BigIntegerField(
                blank=True,
                editable=False,
                help_text=(
                    "This cycle's bit in the NodePosting rows of its candidates (PostgreSQL): slot // 256, slot % 256."
                ),
                null=True,
            ),
        ),
        migrations.CreateModel(
            name="NodePosting",
            fields=[
                ("id", models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name="ID")),
                ("node", models.CharField(max_length=253)),
                ("block", models.BigIntegerField(help_text="candidate_slot // 256 of the cycles this row covers.")),
                (
                    "bits",
                    dashboard.models.BitStringField(
                        help_text="Bit (slot % 256), from the left, is set when that cycle considered the node."
                    ),
                ),
            ],
            options={
                "constraints": [models.UniqueConstraint(fields=("node", "block"), name="nodeposting_node_block")],
            },
        ),
        migrations.AddIndex(
            model_name="schedulingcycle",
            index=models.Index(fields=["outcome", "started_at", "id"], name="cycle_outcome"),
        ),
        migrations.AddIndex(
            model_name="schedulingcycle",
            index=models.Index(fields=["chosen_node", "started_at", "id"], name="cycle_chosen_node"),
        ),
        migrations.AddIndex(
            model_name="schedulingcycle",
            index=models.Index(fields=["candidate_slot"], name="cycle_candidate_slot"),
        ),
        migrations.RunPython(backfill_postings, restore_gin_index),
    ]
