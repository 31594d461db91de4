"""One upsert of many rows on PostgreSQL, without a statement that spells out every value."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from django.db import connection


def copy_upsert(table: str, columns: Sequence[str], rows: Iterable[Sequence[Any]], conflict: str) -> None:
    """PostgreSQL: COPY ``rows`` into a temporary table like ``table``, then one ``INSERT … SELECT … ON CONFLICT``.

    COPY streams thousands of values without building (and quoting, client side) a statement that holds them all.
    ``conflict`` is the ``ON CONFLICT`` clause; ``table`` and ``columns`` are identifiers from a model.
    """
    q = connection.ops.quote_name
    staging = q(f"staging_{table}")
    names = ", ".join(q(c) for c in columns)
    with connection.cursor() as cursor:
        cursor.execute(  # the columns' types, without constraints or defaults; once per connection
            f"CREATE TEMPORARY TABLE IF NOT EXISTS {staging} AS SELECT {names} FROM {q(table)} WITH NO DATA"  # noqa: S608
        )
        with cursor.cursor.copy(f"COPY {staging} ({names}) FROM STDIN") as copy:
            for row in rows:
                copy.write_row(row)
        cursor.execute(f"INSERT INTO {q(table)} ({names}) SELECT {names} FROM {staging} {conflict}")  # noqa: S608
        cursor.execute(f"TRUNCATE {staging}")
