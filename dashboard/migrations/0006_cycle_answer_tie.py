"""``SchedulingCycle.answer_tie``: rounding to kube-scheduler's 0..10 scale erased our preference (our highest-scored
node answered the same as a lower-scored one; ``scheduler_core.extender.scoring.answer.preference_tied``), set by the
ingester.

Cycles recorded before are left False: re-deriving the flag would decode every stored prioritize body. The column
keeps its database default so that a replica still running the previous code can insert cycles during a rolling
upgrade. The index is partial (tied cycles only): ``?answer_tie=true`` pages newest first without walking the rest,
and untied cycles cost it nothing.
"""

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("dashboard", "0005_shared_parts"),
    ]

    operations = [
        migrations.AddField(
            model_name="schedulingcycle",
            name="answer_tie",
            field=models.BooleanField(
                db_default=False,
                default=False,
                help_text=(
                    "Rounding to kube-scheduler's 0..10 scale erased our preference: our highest-scored node was "
                    "answered the same as a node that scored strictly less "
                    "(scheduler_core.extender.scoring.answer.preference_tied)."
                ),
            ),
        ),
        migrations.AddIndex(
            model_name="schedulingcycle",
            index=models.Index(
                condition=models.Q(answer_tie=True), fields=["-started_at", "-id"], name="cycle_answer_tie"
            ),
        ),
    ]
