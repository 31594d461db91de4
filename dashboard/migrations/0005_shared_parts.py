"""Shared parts: the per-node lists a filter call shares with many others (candidates, failures, traffic figures),
stored once by their SHA-256 instead of in every body (``dashboard.storage.shared_parts.SharedFilterPart``). Bodies
written before keep theirs; bodies of format 2 may refer to a part."""

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("dashboard", "0004_call_body_node_postings"),
    ]

    operations = [
        migrations.CreateModel(
            name="SharedPart",
            fields=[
                (
                    "digest",
                    models.CharField(
                        help_text="SHA-256 of data, hex.", max_length=64, primary_key=True, serialize=False
                    ),
                ),
                (
                    "data",
                    models.BinaryField(
                        help_text="zstd-compressed MessagePack (dashboard.storage.shared_parts.SharedFilterPart)."
                    ),
                ),
                (
                    "last_used_at",
                    models.DateTimeField(db_index=True, help_text="The latest start of a call referring to it."),
                ),
            ],
        ),
    ]
