"""On PostgreSQL, cycles and calls become tables partitioned by day (node postings by slot range), so that
retention drops a day whole (``dashboard.services.partitions``) instead of deleting its rows one by one.

- Cycles are partitioned by ``started_at``, calls by ``recorded_at`` (when the ingester stored them, by the database's
  clock under the chain lock: a day of calls is then a stretch of the audit chain, and dropping the oldest days drops
  a prefix of it, which a checkpoint seals). Node postings are partitioned by ``block`` (ranges of cycle slots, which
  grow with the cycles' ids): a range goes once no retained cycle has a slot in it.
- The rows already stored are not copied: the existing table becomes its new parent's DEFAULT partition, attached in
  place. What it holds is pruned row by row as before; the days from now on get their own partitions, created ahead
  by ``schedlens.ensure_partitions`` (and by ``manage.py ensure_partitions``). Attaching builds one index, on
  (id, started_at), (id, recorded_at) or (id, block), over the rows stored, plus the calls' new index on event_id:
  the migration takes about as long as those index builds (docs/operations.md), while the verbs keep answering into
  the spool.
- A partitioned table's unique indexes must hold its partition key, so the call's ``event_id`` is no longer unique in
  the database (the ingester skips event ids it stored, under the chain lock), and calls no longer have a foreign key
  to their cycle.

SQLite (the demo) keeps plain tables. Going back on PostgreSQL copies every row into plain tables.
"""

from django.db import migrations, models
from django.db.models.functions import Now

# (table, partition key) of the partitioned models: ``dashboard.services.partitions`` names them too.
TABLES = (
    ("dashboard_schedulingcycle", "started_at"),
    ("dashboard_verbcall", "recorded_at"),
    ("dashboard_nodeposting", "block"),
)


def _indexes_and_uniques(cursor, table: str) -> tuple[list[tuple[str, str]], list[tuple[str, str]]]:  # type: ignore[no-untyped-def]
    """The table's plain indexes (name, CREATE INDEX …) and unique constraints (name, UNIQUE (…)), primary key apart."""
    cursor.execute(
        "SELECT conname, pg_get_constraintdef(oid) FROM pg_constraint WHERE conrelid = %s::regclass AND contype = 'u'",
        [table],
    )
    uniques = cursor.fetchall()
    cursor.execute(
        "SELECT indexname, indexdef FROM pg_indexes WHERE schemaname = current_schema() AND tablename = %s", [table]
    )
    named = {name for name, _ in uniques}
    return [(name, definition) for name, definition in cursor.fetchall() if name not in named], uniques


def _partition(cursor, table: str, key: str) -> None:  # type: ignore[no-untyped-def]
    default = f"{table}_default"
    indexes, uniques = _indexes_and_uniques(cursor, table)
    cursor.execute("SELECT conname FROM pg_constraint WHERE conrelid = %s::regclass AND contype = 'p'", [table])
    (primary,) = cursor.fetchone()
    cursor.execute(f"SELECT coalesce(max(id), 0) FROM {table}")  # noqa: S608
    (highest,) = cursor.fetchone()
    cursor.execute("SELECT pg_get_serial_sequence(%s, 'id')", [table])
    (sequence,) = cursor.fetchone()
    cursor.execute(f"SELECT last_value FROM {sequence}")  # noqa: S608
    (last_value,) = cursor.fetchone()

    cursor.execute(f"ALTER TABLE {table} DROP CONSTRAINT {primary}")
    cursor.execute(f"ALTER TABLE {table} RENAME TO {default}")
    for name, _ in indexes:
        if name != primary:
            cursor.execute(f"ALTER INDEX {name} RENAME TO {name[:55]}_default")
    for name, _ in uniques:
        cursor.execute(f"ALTER TABLE {default} RENAME CONSTRAINT {name} TO {name[:55]}_default")
    cursor.execute(f"ALTER TABLE {default} ALTER COLUMN id DROP IDENTITY IF EXISTS")
    cursor.execute(f"ALTER TABLE {default} ALTER COLUMN id DROP DEFAULT")  # a sequence of its own after a way back
    cursor.execute(
        f"CREATE TABLE {table} (LIKE {default} INCLUDING DEFAULTS INCLUDING CONSTRAINTS) PARTITION BY RANGE ({key})"
    )
    cursor.execute(f"CREATE SEQUENCE IF NOT EXISTS {table}_id_seq")
    cursor.execute(f"ALTER SEQUENCE {table}_id_seq OWNED BY {table}.id")
    cursor.execute("SELECT setval(%s, %s)", [f"{table}_id_seq", max(highest, last_value, 1)])
    cursor.execute(f"ALTER TABLE {table} ALTER COLUMN id SET DEFAULT nextval('{table}_id_seq')")
    cursor.execute(f"ALTER TABLE {table} ADD PRIMARY KEY (id, {key})")
    for name, definition in indexes:
        if name != primary:  # the same definition on the parent: attaching adopts the partition's equal index
            cursor.execute(definition)
    for name, definition in uniques:
        cursor.execute(f"ALTER TABLE {table} ADD CONSTRAINT {name} {definition}")
    cursor.execute(f"ALTER TABLE {table} ATTACH PARTITION {default} DEFAULT")


def _unpartition(cursor, table: str) -> None:  # type: ignore[no-untyped-def]
    indexes, uniques = _indexes_and_uniques(cursor, table)
    cursor.execute("SELECT conname FROM pg_constraint WHERE conrelid = %s::regclass AND contype = 'p'", [table])
    (primary,) = cursor.fetchone()
    cursor.execute(f"ALTER TABLE {table} RENAME TO {table}_partitioned")
    like = f"LIKE {table}_partitioned INCLUDING DEFAULTS INCLUDING CONSTRAINTS"
    cursor.execute(f"CREATE TABLE {table} ({like})")
    cursor.execute(f"INSERT INTO {table} SELECT * FROM {table}_partitioned")  # noqa: S608
    cursor.execute(f"ALTER SEQUENCE {table}_id_seq OWNED BY {table}.id")
    cursor.execute(f"DROP TABLE {table}_partitioned")
    cursor.execute(f"ALTER TABLE {table} ADD PRIMARY KEY (id)")
    for name, definition in indexes:
        if name != primary:
            cursor.execute(definition)
    for name, definition in uniques:
        cursor.execute(f"ALTER TABLE {table} ADD CONSTRAINT {name} {definition}")


def unpartition_tables(apps, schema_editor):  # type: ignore[no-untyped-def]
    """Back to plain tables: every row is copied (the way back is for a rollback soon after the upgrade)."""
    if schema_editor.connection.vendor != "postgresql":
        return
    with schema_editor.connection.cursor() as cursor:
        for table, _ in reversed(TABLES):
            _unpartition(cursor, table)


def partition_tables(apps, schema_editor):  # type: ignore[no-untyped-def]
    if schema_editor.connection.vendor != "postgresql":
        return
    with schema_editor.connection.cursor() as cursor:
        for table, key in TABLES:
            _partition(cursor, table, key)


class Migration(migrations.Migration):
    atomic = True

    dependencies = [
        ("dashboard", "0007_node_reason_tallies"),
        ("placements", "0002_cycle_without_constraint"),  # its key to the cycles goes first
    ]

    operations = [
        migrations.AlterField(
            model_name="verbcall",
            name="cycle",
            field=models.ForeignKey(
                db_constraint=False,
                on_delete=models.deletion.CASCADE,
                related_name="calls",
                to="dashboard.schedulingcycle",
            ),
        ),
        migrations.AlterField(
            model_name="verbcall",
            name="event_id",
            field=models.CharField(
                db_index=True,
                help_text="Makes re-ingesting a record harmless: the ingester skips an event_id it stored (under the "
                "chain lock; a unique index cannot span the day partitions).",
                max_length=32,
            ),
        ),
        migrations.AddField(
            model_name="verbcall",
            name="recorded_at",
            field=models.DateTimeField(
                db_default=Now(),
                editable=False,
                help_text="When the ingester stored the call (the database's clock, under the chain lock, so it grows "
                "with the id): the day partition it lives in on PostgreSQL (dashboard.services.partitions).",
            ),
        ),
        migrations.RunPython(partition_tables, unpartition_tables, elidable=False),
    ]
