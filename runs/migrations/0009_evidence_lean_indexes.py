"""Indexes that only cost the run path's writes.

Evidence is looked up by run through its (run, kind) index, so the foreign key's own index
on run alone goes. Nothing searches evidence, effect attempt or correlation ids, or
idempotency keys, by prefix: PostgreSQL's ``varchar_pattern_ops`` copies of those indexes
go too (fieldops/pattern_indexes.py). Issue 21: one index insert fewer per evidence row,
attempt and correlation.
"""

import django.db.models.deletion
from django.db import migrations, models

from fieldops import pattern_indexes


class Migration(migrations.Migration):
    dependencies = [
        ("runs", "0008_console_history_indexes"),
    ]

    operations = [
        migrations.AlterField(
            model_name="evidence",
            name="run",
            field=models.ForeignKey(
                db_index=False,
                on_delete=django.db.models.deletion.PROTECT,
                related_name="evidence",
                to="runs.run",
            ),
        ),
        pattern_indexes.drop(
            [
                ("runs_evidence", "id"),
                ("runs_effectattempt", "id"),
                ("runs_effectattempt", "idempotency_key"),
                ("runs_correlation", "id"),
            ]
        ),
    ]
