"""Record a real MCP server's tools/list result as a test fixture (tests/fixtures/mcp_tools/).

    python scripts/record_tools_list.py NAME "how it was obtained" -- COMMAND [ARGS...]
    python scripts/record_tools_list.py NAME "how it was obtained" -- http://HOST:PORT/mcp

Starts COMMAND over stdio (or connects to the URL: Streamable HTTP, else HTTP+SSE), talks
to it with the official MCP Python SDK through the catalog's own discovery client
(catalog/mcp_client.py: handshake, then every tools/list page), and writes
``{"_source": {...}, "result": {"tools": [...]}}``: the wire result with the server's
declared identity and the note. The fixture can be pasted into the import
page as it is (the import reads the ``result`` envelope).
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "fieldops.settings")


def main() -> None:
    name, note = sys.argv[1], sys.argv[2]
    command = sys.argv[sys.argv.index("--") + 1 :]
    from catalog.mcp_client import Limits, Target, fetch_tools

    if command[0].startswith(("http://", "https://")):
        target = Target("http", url=command[0])
    else:
        target = Target("stdio", command=command[0], args=tuple(command[1:]))
    fetched = fetch_tools(target, Limits(timeout_seconds=60))
    document = {
        "_source": {
            "how": note,
            "server_info": fetched.identity.get("server_info", {}),
            "protocol_version": fetched.identity.get("protocol_version", ""),
            **(
                {"http_transport": fetched.identity["http_transport"]}
                if "http_transport" in fetched.identity
                else {}
            ),
            "pages": fetched.pages,
            "recorded_with": "catalog/mcp_client.py (mcp Python SDK), scripts/record_tools_list.py",
        },
        "result": {"tools": fetched.tools},
    }
    out = ROOT / "tests" / "fixtures" / "mcp_tools" / f"{name}.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(document, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    print(f"{out.relative_to(ROOT)}: {len(fetched.tools)} tools, {fetched.identity}")


if __name__ == "__main__":
    main()
