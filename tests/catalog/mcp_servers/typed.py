"""An MCP server (the SDK's MCPServer, formerly FastMCP) written the way typed Python servers
are: pydantic models for arguments and results, so the SDK generates schemas with ``$defs``
and ``$ref`` (input and output), ``anyOf`` for optional fields, enums, and a tool of each
kind real servers list beside the usual ones.

    python typed.py

Tools: ``plan_visit`` (a nested pydantic argument and a pydantic result: ``$defs`` / ``$ref``
in ``inputSchema`` and ``outputSchema``, title, icons, ``_meta``, annotations with a vendor
key), ``list_parts`` (no arguments: an ``inputSchema`` without ``properties``, a list result),
``manual_digest`` (a 15,000-character description: under the catalog's limit),
``manual_dump`` (a 20,000-character description: over it, refused alone) and
``depot/transfer`` (a name with a slash, which the specification's tool names do not allow:
refused alone).
"""

from __future__ import annotations

from enum import StrEnum

from mcp.server.mcpserver import MCPServer
from mcp.types import Icon, ToolAnnotations
from pydantic import BaseModel, Field


class Urgency(StrEnum):
    LOW = "low"
    HIGH = "high"


class Part(BaseModel):
    part_id: str = Field(description="The part's catalogue id.")
    quantity: int = Field(1, ge=1)


class Visit(BaseModel):
    equipment_id: str
    parts: list[Part]
    urgency: Urgency = Urgency.LOW
    note: str | None = None


class Slot(BaseModel):
    slot_id: str
    depot: str


class Plan(BaseModel):
    visit_id: str
    slots: list[Slot]


server = MCPServer("fieldops-test-typed", version="2.0.0")


@server.tool(
    name="plan_visit",
    title="Plan a technician visit",
    description="Plan a visit for one piece of equipment and the parts it needs.",
    annotations=ToolAnnotations(readOnlyHint=False, destructiveHint=False, idempotentHint=True),
    icons=[Icon(src="data:image/svg+xml;base64,PHN2Zy8+", mimeType="image/svg+xml", sizes=["any"])],
    meta={"com.example/owner": "field-ops", "tags": ["planning"]},
)
def plan_visit(visit: Visit) -> Plan:
    return Plan(visit_id="V-1", slots=[Slot(slot_id="S-1", depot="N1")])


@server.tool(name="list_parts", description="List every part id.")
def list_parts() -> list[str]:
    return []


@server.tool(name="manual_digest", description="Digest of the manual. " + "d" * 15_000)
def manual_digest(section: str) -> str:
    return section


@server.tool(name="manual_dump", description="The whole manual. " + "m" * 20_000)
def manual_dump(section: str) -> str:
    return section


@server.tool(name="depot/transfer", description="Move stock between depots.")
def depot_transfer(part_id: str, quantity: int) -> str:
    return part_id


if __name__ == "__main__":
    server.run()
