"""A token remembers the one-time key of the console form that created it (unique per
user): the same form posted twice at once made two tokens when the key lived in the session."""

from django.conf import settings
from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("api", "0002_token_expiry"),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.AddField(
            model_name="apitoken",
            name="create_key",
            field=models.CharField(blank=True, default="", max_length=64),
        ),
        migrations.AddConstraint(
            model_name="apitoken",
            constraint=models.UniqueConstraint(
                condition=models.Q(("create_key", ""), _negated=True),
                fields=("user", "create_key"),
                name="api_token_create_key",
            ),
        ),
    ]
