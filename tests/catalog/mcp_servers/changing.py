"""A small MCP server (the SDK's MCPServer, formerly FastMCP) whose tools come from a state
file, so a test can change the server between two discoveries.

    python changing.py STATE.json                 # stdio
    python changing.py STATE.json --http PORT     # Streamable HTTP on 127.0.0.1:PORT/mcp
    python changing.py STATE.json --sse PORT      # the deprecated HTTP+SSE transport of
                                                  # MCP 2024-11-05: GET 127.0.0.1:PORT/sse

STATE.json: {"description": str, "read_only": bool, "legacy": bool, "token": str,
"instructions": str, "refuse_as_notion": bool, "serve": [str], "allowed_hosts": [str]}.
``serve`` names the tools listed (default: lookup_part and reserve_slot; an empty list
lists none). With ``token`` set, the HTTP endpoint answers 401 unless
``Authorization: Bearer <token>``; with ``refuse_as_notion`` too, it answers as
@notionhq/notion-mcp-server 2.5.2 does: 403 with a JSON-RPC error. With ``allowed_hosts``
the SDK's DNS rebinding protection allows only those Host headers (others are answered
421 "Invalid Host header").
"""

from __future__ import annotations

import json
import sys

from mcp.server.mcpserver import MCPServer
from mcp.types import ToolAnnotations

# What @notionhq/notion-mcp-server 2.5.2 (--transport http) answers a wrong bearer token.
NOTION_REFUSAL = {
    "jsonrpc": "2.0",
    "error": {"code": -32002, "message": "Forbidden: Invalid bearer token"},
    "id": None,
}


def maybe(server: MCPServer, listed: bool):  # type: ignore[no-untyped-def]
    """``server.tool`` when the tool is listed, else a decorator that registers nothing."""
    return server.tool if listed else (lambda **_: lambda fn: fn)


def build(state: dict) -> MCPServer:
    server = MCPServer(
        "fieldops-test-parts",
        version="1.0.0",
        instructions=state.get("instructions", "Test parts server."),
    )

    serve = state.get("serve", ["lookup_part", "reserve_slot"])

    @maybe(server, "lookup_part" in serve)(
        name="lookup_part",
        title="Look up a part",
        description=state.get("description", "Look up one spare part by id."),
        annotations=ToolAnnotations(readOnlyHint=state.get("read_only", True), openWorldHint=False),
    )
    def lookup_part(part_id: str) -> str:
        return part_id

    @maybe(server, "reserve_slot" in serve)(
        name="reserve_slot",
        description="Reserve one inventory slot for a part.",
        annotations=ToolAnnotations(readOnlyHint=False, destructiveHint=True),
    )
    def reserve_slot(part_id: str, slot: str, quantity: int = 1) -> str:
        return slot

    if state.get("legacy", False):

        @server.tool(name="legacy_export", description="Export the whole catalogue (old).")
        def legacy_export() -> str:
            return ""

    return server


def _security(state: dict):  # type: ignore[no-untyped-def]
    """The SDK's DNS rebinding protection, allowing only ``allowed_hosts`` when the state
    names them (a server configured for the name it is deployed under), else its default."""
    if not state.get("allowed_hosts"):
        return None
    from mcp.server.transport_security import TransportSecuritySettings

    return TransportSecuritySettings(allowed_hosts=state["allowed_hosts"])


def main() -> None:
    with open(sys.argv[1], encoding="utf-8") as handle:
        state = json.load(handle)
    server = build(state)
    mode = "--sse" if "--sse" in sys.argv else "--http" if "--http" in sys.argv else ""
    if not mode:
        server.run()
        return
    import uvicorn
    from starlette.responses import JSONResponse

    port = int(sys.argv[sys.argv.index(mode) + 1])
    app = (
        server.sse_app()
        if mode == "--sse"
        else server.streamable_http_app(transport_security=_security(state))
    )
    token = state.get("token", "")

    async def guarded(scope, receive, send):  # type: ignore[no-untyped-def]
        if scope["type"] == "http" and token:
            headers = dict(scope.get("headers") or [])
            if headers.get(b"authorization", b"").decode() != f"Bearer {token}":
                refusal = (
                    JSONResponse(NOTION_REFUSAL, status_code=403)
                    if state.get("refuse_as_notion")
                    else JSONResponse({"error": "unauthorized"}, status_code=401)
                )
                await refusal(scope, receive, send)
                return
        await app(scope, receive, send)

    uvicorn.run(guarded, host="127.0.0.1", port=port, log_level="warning", lifespan="on")


if __name__ == "__main__":
    main()
