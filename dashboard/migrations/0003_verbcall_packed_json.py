"""VerbCall.record and .response: the same jsonb columns, whose large values the ingester now stores packed.

No SQL: the column type does not change, rows written before stay plain JSON and read (and hash) as before.
"""

from django.db import migrations

import dashboard.storage.packed_json


class Migration(migrations.Migration):
    dependencies = [
        ("dashboard", "0002_audit"),
    ]

    operations = [
        migrations.AlterField(
            model_name="verbcall",
            name="record",
            field=dashboard.storage.packed_json.PackedJSONField(
                default=dict, help_text="The plugins' verdicts and scores (columnar)."
            ),
        ),
        migrations.AlterField(
            model_name="verbcall",
            name="response",
            field=dashboard.storage.packed_json.PackedJSONField(
                blank=True, help_text="The JSON answered to kube-scheduler.", null=True
            ),
        ),
    ]
