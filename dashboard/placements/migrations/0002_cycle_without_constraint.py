"""The link to the cycle loses its database constraint before the cycles become partitioned by day
(``dashboard`` migration 0008): a foreign key could only refer to (id, started_at) then. Retention empties the link
of the observations whose cycle it drops (``dashboard.services.partitions``), as the row-by-row prune does."""

import django.db.models.deletion
from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("placements", "0001_initial"),
        ("dashboard", "0007_node_reason_tallies"),
    ]

    operations = [
        migrations.AlterField(
            model_name="placementobservation",
            name="cycle",
            field=models.ForeignKey(
                blank=True,
                db_constraint=False,
                help_text="The pod's newest cycle started before the observation; empty until it is recorded.",
                null=True,
                on_delete=django.db.models.deletion.SET_NULL,
                related_name="placement_observations",
                to="dashboard.schedulingcycle",
            ),
        ),
    ]
