"""The help texts of ``HistoryReplay.candidate_scenario`` and ``report`` name the module their structs moved to
(``scheduler_core.history_replay.report``) when the history replay was split by concern. Help texts only: no SQL."""

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("replays", "0001_initial"),
    ]

    operations = [
        migrations.AlterField(
            model_name="historyreplay",
            name="candidate_scenario",
            field=models.JSONField(
                default=dict,
                help_text="The candidate as replayed (scheduler_core.history_replay.report.CandidateDescription).",
            ),
        ),
        migrations.AlterField(
            model_name="historyreplay",
            name="report",
            field=models.JSONField(
                blank=True,
                help_text="scheduler_core.history_replay.report.HistoryReplayReport (when done).",
                null=True,
            ),
        ),
    ]
