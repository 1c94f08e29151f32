"""Dropping the ``varchar_pattern_ops`` indexes Django adds on PostgreSQL.

For every indexed ``CharField`` (a primary key, a foreign key to one, ``db_index=True``),
Django's PostgreSQL backend creates a second index with ``varchar_pattern_ops`` (named
``..._like``) so that ``LIKE 'prefix%'`` lookups can use an index. Where nothing ever
searches a column by prefix, that index only costs: one more insert into it, and its WAL,
for every row written. ``drop(...)`` returns a migration operation removing those of the
given ``(table, column)`` pairs (and recreating them on the way back); SQLite has none.
Django does not track these indexes in its migration state, so nothing re-adds them
unless a later migration alters the field itself.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from django.db import migrations

_FIND = """
    SELECT i.relname
    FROM pg_index x
    JOIN pg_class i ON i.oid = x.indexrelid
    JOIN pg_class t ON t.oid = x.indrelid
    JOIN pg_attribute a ON a.attrelid = t.oid AND a.attnum = x.indkey[0]
    JOIN pg_opclass o ON o.oid = x.indclass[0]
    WHERE t.relname = %s AND a.attname = %s AND x.indnatts = 1
      AND o.opcname = 'varchar_pattern_ops' AND pg_table_is_visible(t.oid)
"""


def drop(pairs: Sequence[tuple[str, str]]) -> migrations.RunPython:
    def forwards(apps: Any, schema_editor: Any) -> None:
        if schema_editor.connection.vendor != "postgresql":
            return
        with schema_editor.connection.cursor() as cursor:
            for table, column in pairs:
                cursor.execute(_FIND, [table, column])
                for (name,) in cursor.fetchall():
                    schema_editor.execute(f"DROP INDEX IF EXISTS {schema_editor.quote_name(name)}")

    def backwards(apps: Any, schema_editor: Any) -> None:
        if schema_editor.connection.vendor != "postgresql":
            return
        quote = schema_editor.quote_name
        for table, column in pairs:
            name = f"{table}_{column}_like"[:63]
            schema_editor.execute(
                f"CREATE INDEX IF NOT EXISTS {quote(name)} "
                f"ON {quote(table)} ({quote(column)} varchar_pattern_ops)"
            )

    return migrations.RunPython(forwards, backwards)
