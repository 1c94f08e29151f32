"""The request log is read by run (its run_id index) and by (namespace, run, capability),
never by a run-id prefix: PostgreSQL's ``varchar_pattern_ops`` copy of the run_id index
goes (fieldops/pattern_indexes.py; issue 21)."""

from django.db import migrations

from fieldops import pattern_indexes


class Migration(migrations.Migration):
    dependencies = [
        ("world", "0002_ledger_fence"),
    ]

    operations = [pattern_indexes.drop([("world_servicerequest", "run_id")])]
