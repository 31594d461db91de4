"""Who writes a binding's Explained Event is claimed on the observation (``dashboard.ingest.observed_binds``).
The observations already linked to a cycle had theirs settled by the version before: marked so, or the first
reconcile after the upgrade would explain their cycles again."""

from django.db import migrations, models
from django.db.backends.base.schema import BaseDatabaseSchemaEditor
from django.db.migrations.state import StateApps
from django.db.models import F


def settle_linked(apps: StateApps, schema_editor: BaseDatabaseSchemaEditor) -> None:
    observation = apps.get_model("placements", "PlacementObservation")
    observation.objects.filter(cycle__isnull=False, explained_at__isnull=True).update(explained_at=F("observed_at"))


class Migration(migrations.Migration):
    dependencies = [("placements", "0002_cycle_without_constraint")]

    operations = [
        migrations.AddField(
            model_name="placementobservation",
            name="explained_at",
            field=models.DateTimeField(
                blank=True,
                help_text="A binding: when its cycle's Explained Event was settled (queued by the watcher or the "
                "ingester, or left to the cycle's bind call); claimed once, by whichever of the two completes the "
                "cycle last.",
                null=True,
            ),
        ),
        migrations.RunPython(settle_linked, migrations.RunPython.noop),
    ]
