"""approvals_webhook: add, replace or remove a tenant's signed webhook endpoint."""

from __future__ import annotations

import os
from typing import Any
from urllib.parse import urlsplit

from django.core.management.base import BaseCommand, CommandError, CommandParser

from approvals.models import WebhookEndpoint


class Command(BaseCommand):
    help = (
        "Add or replace a webhook endpoint for approval notifications. The signing secret "
        "is read from the environment variable named by --secret-env (never an argument)."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--tenant", required=True)
        parser.add_argument("--name", required=True)
        parser.add_argument("--url")
        parser.add_argument("--secret-env", default="FIELDOPS_WEBHOOK_SECRET")
        parser.add_argument("--format", choices=WebhookEndpoint.Format.values, default="json")
        parser.add_argument("--disable", action="store_true")

    def handle(self, *args: Any, **o: Any) -> None:
        if o["disable"]:
            changed = WebhookEndpoint.objects.filter(tenant=o["tenant"], name=o["name"]).update(
                active=False
            )
            self.stdout.write(f"disabled {changed} endpoint")
            return
        url = o["url"] or ""
        if urlsplit(url).scheme not in ("http", "https") or not urlsplit(url).netloc:
            raise CommandError("--url must be an http(s) URL")
        secret = os.environ.get(o["secret_env"], "")
        if len(secret) < 16:
            raise CommandError(f"set {o['secret_env']} to a signing secret of 16+ characters")
        endpoint, created = WebhookEndpoint.objects.update_or_create(
            tenant=o["tenant"],
            name=o["name"],
            defaults={"url": url, "secret": secret, "format": o["format"], "active": True},
        )
        self.stdout.write(f"{'added' if created else 'replaced'} webhook {endpoint} -> {url}")
