"""Catalog test fixtures: the second catalog admin (two-person rule) and tool lists."""

from __future__ import annotations

import json
import os
from typing import Any

import pytest

from tests.conftest import make_user

# Playwright's sync API runs an event loop in this thread; Django would then refuse ORM
# calls of the live_server fixtures. Tests only, never in settings.
os.environ.setdefault("DJANGO_ALLOW_ASYNC_UNSAFE", "true")


@pytest.fixture
def catalog_reviewer(world: None) -> Any:
    return make_user("catalog-reviewer", "north", "catalog-admin")


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
