"""Nothing searches checkpoint ids by prefix: PostgreSQL's ``varchar_pattern_ops`` copies
of the checkpoint's primary key and of the vote's and decision's checkpoint keys go
(fieldops/pattern_indexes.py; issue 21)."""

from django.db import migrations

from fieldops import pattern_indexes


class Migration(migrations.Migration):
    dependencies = [
        ("approvals", "0003_checkpoint_run_created"),
    ]

    operations = [
        pattern_indexes.drop(
            [
                ("approvals_checkpoint", "id"),
                ("approvals_approvalvote", "checkpoint_id"),
                ("approvals_decision", "checkpoint_id"),
            ]
        )
    ]
