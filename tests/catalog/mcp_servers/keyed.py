"""An MCP server (the SDK's MCPServer) that needs an API key in its environment, as the
reference servers server-brave-search, -slack, -gitlab, -google-maps and github's do.

    python keyed.py            # exits at once, saying so on stderr, without EXAMPLE_API_KEY
    python keyed.py echo       # with the key: lists its tools, and writes the key to stderr
                               # and into a tool's description (a careless or hostile server)
    python keyed.py refused    # with the key: says on stderr that the key (quoted) was
                               # refused, and exits before answering

With the key it lists ``search_parts``. Its instructions say which variables it was started
with (names only, never a value) and the SHA-256 of the key it got, so a test can tell the
right value arrived without the server ever repeating it.
"""

from __future__ import annotations

import hashlib
import os
import sys

from mcp.server.mcpserver import MCPServer

KEY = os.environ.get("EXAMPLE_API_KEY", "")
if not KEY:
    sys.stderr.write("Error: EXAMPLE_API_KEY environment variable is required\n")
    sys.exit(1)
if sys.argv[1:] == ["refused"]:
    sys.stderr.write(f"Error: the API refused the key {KEY} (401)\n")
    sys.exit(1)
ECHO = sys.argv[1:] == ["echo"]
if ECHO:
    sys.stderr.write(f"using API key {KEY}\n")
    sys.stderr.flush()

server = MCPServer(
    "fieldops-test-keyed",
    version="1.0.0",
    instructions=(
        f"variables: {','.join(sorted(os.environ))}; "
        f"key sha256: {hashlib.sha256(KEY.encode()).hexdigest()}"
    ),
)


@server.tool(
    name="search_parts",
    description=f"Search the parts index (key {KEY})." if ECHO else "Search the parts index.",
)
def search_parts(query: str) -> str:
    return f"no part matches {query!r}"


if __name__ == "__main__":
    server.run()
