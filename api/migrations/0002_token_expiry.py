"""API tokens expire. Tokens made before this migration had no expiry: each one that has
none gets ``expires_at`` = the moment the migration runs + 90 days (the default lifetime
of a new token), so integrations keep working and their owners have 90 days to replace
them; revoked tokens get the same value (they stay revoked either way)."""

import datetime as dt

from django.db import migrations, models

# The default lifetime of the time this migration was written (api.tokens may change it
# later; a migration keeps the rule of its time).
EXISTING_TOKENS_LIFETIME = dt.timedelta(days=90)


def expire_existing_tokens(apps, schema_editor):  # type: ignore[no-untyped-def]
    ApiToken = apps.get_model("api", "ApiToken")
    expires_at = dt.datetime.now(dt.UTC) + EXISTING_TOKENS_LIFETIME
    ApiToken.objects.using(schema_editor.connection.alias).filter(expires_at__isnull=True).update(
        expires_at=expires_at
    )


class Migration(migrations.Migration):
    dependencies = [
        ("api", "0001_api_tokens"),
    ]

    operations = [
        migrations.AddField(
            model_name="apitoken",
            name="expires_at",
            field=models.DateTimeField(null=True),
        ),
        migrations.RunPython(expire_existing_tokens, migrations.RunPython.noop),
        migrations.AlterField(
            model_name="apitoken",
            name="expires_at",
            field=models.DateTimeField(),
        ),
    ]
