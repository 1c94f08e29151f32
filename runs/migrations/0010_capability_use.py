"""The capability-use projection (``runs.models.CapabilityUse``) behind the runs list's
capability filter, filled from the ``proposal.allowed`` events already stored: each run's
first admitted call of each capability, read in (run, sequence) order a batch at a time."""

import django.db.models.deletion
from django.db import migrations, models

BATCH = 5_000


def record_uses(apps, schema_editor):  # type: ignore[no-untyped-def]
    Event = apps.get_model("runs", "Event")
    CapabilityUse = apps.get_model("runs", "CapabilityUse")
    allowed = (
        Event.objects.using(schema_editor.connection.alias)
        .filter(type="proposal.allowed")
        .order_by("run_id", "sequence")
        .values_list("run_id", "sequence", "payload", "run__tenant", "run__created_at")
    )
    current, seen = None, set()  # the run being read and the capabilities it called so far
    batch = []
    for run_id, sequence, payload, tenant, created_at in allowed.iterator(BATCH):
        # runs.event_rows.capability_called's rule, copied: a migration keeps the rule of
        # its time whatever the code later becomes.
        capability = (payload or {}).get("capability")
        if type(capability) is not str or not 0 < len(capability) <= 64:
            continue
        if run_id != current:
            current, seen = run_id, set()
        if capability in seen:
            continue
        seen.add(capability)
        batch.append(
            CapabilityUse(
                run_id=run_id,
                capability_id=capability,
                tenant=tenant,
                run_created_at=created_at,
                first_sequence=sequence,
            )
        )
        if len(batch) >= BATCH:
            CapabilityUse.objects.bulk_create(batch, ignore_conflicts=True)
            batch = []
    if batch:
        CapabilityUse.objects.bulk_create(batch, ignore_conflicts=True)


class Migration(migrations.Migration):
    dependencies = [
        ("runs", "0009_evidence_lean_indexes"),
    ]

    operations = [
        migrations.CreateModel(
            name="CapabilityUse",
            fields=[
                ("id", models.BigAutoField(primary_key=True, serialize=False)),
                ("capability_id", models.CharField(max_length=64)),
                ("tenant", models.CharField(max_length=32)),
                ("run_created_at", models.DateTimeField()),
                ("first_sequence", models.PositiveIntegerField()),
                (
                    "run",
                    models.ForeignKey(
                        db_index=False,
                        on_delete=django.db.models.deletion.PROTECT,
                        related_name="capability_uses",
                        to="runs.run",
                    ),
                ),
            ],
            options={
                "indexes": [
                    models.Index(
                        fields=["tenant", "capability_id", "-run_created_at", "-run"],
                        name="capability_use_listing",
                    )
                ],
                "constraints": [
                    models.UniqueConstraint(
                        fields=("run", "capability_id"), name="capability_use_run"
                    )
                ],
            },
        ),
        migrations.RunPython(record_uses, migrations.RunPython.noop, elidable=True),
    ]
