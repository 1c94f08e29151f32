"""Discover a registered tool server now (or every scheduled one) and print the outcome.

    python manage.py catalog_discover SERVER          # by name; exit 1 if it failed
    python manage.py catalog_discover --all           # every scheduled server (cron-able)
    python manage.py catalog_discover SERVER --timeout 10

Candidates are DISCOVERED only: discovery never admits anything.

What a server said (its serverInfo, its errors, its refused tools) is printed with control
characters escaped (``\x1b``): a hostile server must not drive the admin's terminal (retitle
it, clear it, move the cursor up to overwrite a failure with "ok").
"""

from __future__ import annotations

from typing import Any

from django.core.management.base import CommandError, CommandParser

from catalog import mcp_client, servers
from catalog.models import Discovery, ToolServer
from fieldops.arguments import decimal_number
from fieldops.commands import FieldOpsCommand
from kernel.text import quoted_shortly


def terminal_safe(text: str) -> str:
    """``text`` with every character a terminal would not print as itself (C0 and C1
    controls, ESC above all, and other invisible format characters) shown escaped."""
    return "".join(c if c.isprintable() else repr(c)[1:-1] for c in text)


class Command(FieldOpsCommand):
    help = "Discover the tools of a registered MCP tool server (candidates only)."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("server", nargs="?", help="the registered server's name")
        parser.add_argument("--all", action="store_true", help="every scheduled server")
        parser.add_argument(
            "--timeout", type=decimal_number, help="seconds for the whole discovery (at most 3600)"
        )

    def handle(self, *args: Any, **options: Any) -> None:
        if bool(options["server"]) == bool(options["all"]):
            raise CommandError("name one server, or pass --all")
        limits = servers.limits_from_settings()
        if options["timeout"] is not None:
            if not 0 < options["timeout"] <= 3600:  # NaN fails this too
                raise CommandError("--timeout must be seconds, above 0 and at most 3600")
            limits = mcp_client.Limits(timeout_seconds=options["timeout"])
        if options["all"]:
            ids = list(ToolServer.objects.filter(scheduled=True).values_list("pk", flat=True))
        else:
            server = ToolServer.objects.filter(name=options["server"]).first()
            if server is None:
                known = ", ".join(ToolServer.objects.values_list("name", flat=True)) or "none"
                raise CommandError(
                    f"no tool server named {quoted_shortly(options['server'])} (known: {known})"
                )
            ids = [server.pk]
        failed = 0
        for server_id in ids:
            run = servers.tool_server_discover(
                server_id=server_id, trigger="command", limits=limits
            )
            self._report(run)
            failed += not run.ok
        if failed:
            raise CommandError(f"{failed} discovery(ies) failed; nothing was stored for them")

    def _report(self, run: Discovery) -> None:
        head = f"{run.server.name}: discovery #{run.pk} {run.outcome}"
        if not run.ok:
            self._say(f"{head} ({run.code}): {run.message}")
            if run.stderr:  # often the only words saying why a server exited
                self._say(f"  stderr: {run.stderr}")
            return
        info = run.identity.get("server_info", {})
        self._say(
            f"{head}: {info.get('name', '?')} {info.get('version', '')} over "
            f"{run.identity.get('protocol_version', '?')}, {run.pages} page(s), "
            f"{run.tools_listed} tool(s): {run.message}"
        )
        for pair in run.summary.get("changed", []):
            self._say(f"  changed: {pair[0]} -> {pair[1]}")
        for ref in run.summary.get("gone", []):
            self._say(f"  gone: {ref}")
        for refused in run.summary.get("refused", []):
            self._say(
                f"  refused tools[{refused['index']}] {refused['name']}: "
                + "; ".join(refused["reasons"])
            )

    def _say(self, line: str) -> None:
        self.stdout.write(terminal_safe(line))
