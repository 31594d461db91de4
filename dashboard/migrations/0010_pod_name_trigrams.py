"""PostgreSQL: a trigram index on the cycles' pod names, for the history's and the API's "pod name contains" filter.

Without it, a name that few cycles hold (one pod's full name, say) is looked for by reading every day partition's
cycles newest first until each yields one: the whole history when the pod is recent. With it, each day partition
finds its few matches in the index; for a common fragment the planner still walks the newest-first index.

The index needs the ``pg_trgm`` extension, which a database owner may create (PostgreSQL 13 and later trust it).
Where it cannot be created, the migration says so and goes on without the index: the filter works, only slower; an
administrator's ``CREATE EXTENSION pg_trgm`` and ``manage.py migrate dashboard 0009`` then ``migrate`` add it.
SQLite (the demo) has no such index.
"""

import sys

from django.db import DatabaseError, migrations

INDEX = "cycle_pod_name_trgm"


def add_index(apps, schema_editor):  # type: ignore[no-untyped-def]
    connection = schema_editor.connection
    if connection.vendor != "postgresql":
        return
    with connection.cursor() as cursor:
        cursor.execute("SELECT 1 FROM pg_extension WHERE extname = 'pg_trgm'")
        if cursor.fetchone() is None:
            try:
                cursor.execute("SAVEPOINT trgm")
                cursor.execute("CREATE EXTENSION IF NOT EXISTS pg_trgm")
                cursor.execute("RELEASE SAVEPOINT trgm")
            except DatabaseError as exc:
                cursor.execute("ROLLBACK TO SAVEPOINT trgm")
                sys.stderr.write(
                    f"schedlens: no trigram index on pod names ({exc}): the 'pod name contains' filter reads the "
                    "history instead; CREATE EXTENSION pg_trgm as an administrator, then migrate again.\n"
                )
                return
        cursor.execute(
            f"CREATE INDEX IF NOT EXISTS {INDEX} ON dashboard_schedulingcycle USING gin (UPPER(pod_name) gin_trgm_ops)"
        )


def drop_index(apps, schema_editor):  # type: ignore[no-untyped-def]
    if schema_editor.connection.vendor == "postgresql":
        with schema_editor.connection.cursor() as cursor:
            cursor.execute(f"DROP INDEX IF EXISTS {INDEX}")


class Migration(migrations.Migration):
    dependencies = [
        ("dashboard", "0009_audit_verification_day_tallies"),
    ]

    operations = [migrations.RunPython(add_index, drop_index, elidable=False)]
