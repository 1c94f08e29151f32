"""Catalog test fixtures: the second catalog admin (two-person rule) and tool lists."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

import pytest
from django.test import Client

from catalog.models import CapabilityVersion
from tests.conftest import make_user

# Playwright's sync API runs an event loop in this thread; Django would then refuse ORM
# calls of the live_server fixtures. Tests only, never in settings.
os.environ.setdefault("DJANGO_ALLOW_ASYNC_UNSAFE", "true")


@pytest.fixture
def catalog_reviewer(world: None) -> Any:
    return make_user("catalog-reviewer", "north", "catalog-admin")


# A complete admission record for search_manual@1.1.0, as the admit form posts it.
ADMISSION = {
    "task_transition": "NEED_PROCEDURE -> HAVE_COMPATIBILITY_EVIDENCE",
    "alternatives": "keep 1.0.0\nhuman lookup",
    "decision": "ADMIT_BOUNDED",
    "expiry": "expires on contract change (digest)",
    "reason": "longer procedures need more passages",
}


def client_for(user: Any) -> Client:
    c = Client()
    c.force_login(user)
    return c


def as_shown(target: CapabilityVersion, form: dict[str, Any]) -> dict[str, Any]:
    """``form`` as a version page loaded now posts it: with the lifecycle state the page
    shows (its decision forms' hidden ``lifecycle``; a post without it is refused)."""
    return {**form, "lifecycle": CapabilityVersion.objects.get(pk=target.pk).lifecycle}


def version_row(ref: str) -> CapabilityVersion:
    """The catalog row of ``ref`` ("capability@version")."""
    capability_id, _, version = ref.rpartition("@")
    return CapabilityVersion.objects.get(capability_id=capability_id, version=version)


def tool(name: str, **extra: Any) -> dict[str, Any]:
    """One tool definition in the tools/list format."""
    definition: dict[str, Any] = {
        "name": name,
        "description": f"{name} (remote)",
        "inputSchema": {"type": "object", "properties": {"q": {"type": "string"}}},
    }
    definition.update(extra)
    return definition


def tool_list(*tools: dict[str, Any]) -> str:
    return json.dumps({"tools": list(tools)})


# -- live discovery ---------------------------------------------------------------------
SERVERS_DIR = Path(__file__).resolve().parent / "mcp_servers"
VENV_BIN = Path(sys.executable).parent


def server_script(name: str) -> str:
    return str(SERVERS_DIR / f"{name}.py")


@pytest.fixture
def stdio_commands(settings: Any) -> list[str]:
    """Allow the test servers (run by this Python) and the reference servers (venv bin)."""
    settings.FIELDOPS_MCP_STDIO_COMMANDS = [sys.executable, "mcp-server-time", "mcp-server-git"]
    return settings.FIELDOPS_MCP_STDIO_COMMANDS


class ChangingServer:
    """The SDK test server of ``mcp_servers/changing.py`` and its state file."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.set(description="Look up one spare part by id.", legacy=True)

    def set(self, **state: Any) -> None:
        self.path.write_text(json.dumps(state), encoding="utf-8")

    @property
    def args(self) -> str:
        return f"{server_script('changing')} {self.path}"

    def register(self, user: Any, name: str) -> Any:
        """Register this server over stdio, run by this Python, as ``user``."""
        from catalog import servers

        return servers.tool_server_register(
            user=user, name=name, transport="stdio", command=sys.executable, args_text=self.args
        )


@pytest.fixture
def changing_server(tmp_path: Path) -> ChangingServer:
    return ChangingServer(tmp_path / "state.json")
