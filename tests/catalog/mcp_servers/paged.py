"""An MCP server (the SDK's low-level Server) that pages its tools/list.

    python paged.py COUNT PAGE_SIZE [--description-bytes N] [--exit-on-page K]

COUNT tools named t00000..., PAGE_SIZE per page, cursors "page-<n>". ``--description-bytes``
gives tool t00001 a description of N bytes; ``--exit-on-page K`` makes the process exit
abruptly when page K is requested (a server that crashes mid-list).
"""

from __future__ import annotations

import os
import sys

import anyio
from mcp import types
from mcp.server.lowlevel import Server
from mcp.server.stdio import stdio_server


def _option(name: str, default: int) -> int:
    return int(sys.argv[sys.argv.index(name) + 1]) if name in sys.argv else default


COUNT, PAGE = int(sys.argv[1]), int(sys.argv[2])
DESCRIPTION_BYTES = _option("--description-bytes", 0)
EXIT_ON_PAGE = _option("--exit-on-page", 0)


def tool(i: int) -> types.Tool:
    description = f"Tool number {i}."
    if i == 1 and DESCRIPTION_BYTES:
        description = "x" * DESCRIPTION_BYTES
    return types.Tool(
        name=f"t{i:05d}",
        description=description,
        input_schema={"type": "object", "properties": {"n": {"type": "integer"}}},
    )


async def list_tools(ctx, params):  # type: ignore[no-untyped-def]
    cursor = params.cursor if params is not None else None
    page = int(cursor.removeprefix("page-")) if cursor else 1
    if EXIT_ON_PAGE and page >= EXIT_ON_PAGE:
        os._exit(3)
    start = (page - 1) * PAGE
    tools = [tool(i) for i in range(start, min(start + PAGE, COUNT))]
    more = start + PAGE < COUNT
    return types.ListToolsResult(tools=tools, next_cursor=f"page-{page + 1}" if more else None)


server = Server("fieldops-test-paged", version="0.1.0", on_list_tools=list_tools)


async def main() -> None:
    async with stdio_server() as (read, write):
        await server.run(read, write, server.create_initialization_options())


if __name__ == "__main__":
    anyio.run(main)
