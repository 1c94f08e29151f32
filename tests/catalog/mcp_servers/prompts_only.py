"""An MCP server (the SDK's low-level Server) with prompts and resources and no tools: its
initialize declares no ``tools`` capability and the SDK answers tools/list "Method not
found", as a real prompts-only server does.

    python prompts_only.py
"""

from __future__ import annotations

import anyio
from mcp import types
from mcp.server.lowlevel import Server
from mcp.server.stdio import stdio_server


async def list_prompts(ctx, params):  # type: ignore[no-untyped-def]
    return types.ListPromptsResult(prompts=[types.Prompt(name="summarise_incident")])


async def list_resources(ctx, params):  # type: ignore[no-untyped-def]
    return types.ListResourcesResult(
        resources=[types.Resource(name="runbook", uri="memo://runbook")]
    )


server = Server(
    "fieldops-test-prompts-only",
    version="0.1.0",
    on_list_prompts=list_prompts,
    on_list_resources=list_resources,
)


async def main() -> None:
    async with stdio_server() as (read, write):
        await server.run(read, write, server.create_initialization_options())


if __name__ == "__main__":
    anyio.run(main)
