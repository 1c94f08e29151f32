"""A Streamable HTTP endpoint at /mcp, written with the standard library, that misbehaves
in ways an SDK server cannot be made to:

python hostile_http.py big-sse-page PORT  # tools/list: one SSE event of ~1.6 MB (400 tools)
python hostile_http.py huge-body PORT     # tools/list: a JSON body of 100 MiB
python hostile_http.py html PORT          # every POST: 200 text/html (a web app's catch-all)
python hostile_http.py gzip PORT          # tools/list: gzip-compressed, whatever was asked
python hostile_http.py deep PORT          # tools/list: a tool whose schema nests 300 levels
"""

from __future__ import annotations

import gzip
import json
import sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

MODE, PORT = sys.argv[1], int(sys.argv[2])
HUGE = 100 * 1024 * 1024
INIT = {
    "protocolVersion": "2025-06-18",
    "capabilities": {"tools": {}},
    "serverInfo": {"name": "hostile-http", "version": "0.1.0"},
}


def tools() -> list[dict[str, object]]:
    return [
        {"name": f"t{i:03d}", "description": "d" * 4000, "inputSchema": {"type": "object"}}
        for i in range(400)
    ]


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args: object) -> None:
        pass

    def answer(self, status: int, body: bytes, content_type: str) -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self) -> None:
        self.answer(405, b"", "text/plain")

    def do_DELETE(self) -> None:
        self.answer(405, b"", "text/plain")

    def do_POST(self) -> None:
        message = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))))
        if MODE == "html":
            self.answer(200, b"<!doctype html><title>Shop</title><h1>Welcome</h1>", "text/html")
            return
        if "id" not in message:
            self.answer(202, b"", "application/json")
            return
        reply: dict[str, object] = {"jsonrpc": "2.0", "id": message["id"]}
        method = message.get("method")
        if method == "initialize":
            reply["result"] = INIT
        elif method == "tools/list" and MODE == "big-sse-page":
            reply["result"] = {"tools": tools()}
            event = b"event: message\ndata: " + json.dumps(reply).encode() + b"\n\n"
            self.answer(200, event, "text/event-stream")
            return
        elif method == "tools/list" and MODE == "huge-body":
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(HUGE))
            self.end_headers()
            chunk = b" " * (1024 * 1024)
            try:
                for _ in range(HUGE // len(chunk)):
                    self.wfile.write(chunk)
            except OSError:
                pass  # the client hung up
            return
        elif method == "tools/list" and MODE == "deep":
            schema: dict[str, object] = {"type": "object"}
            for _ in range(150):
                schema = {"type": "object", "properties": {"a": schema}}
            reply["result"] = {"tools": [{"name": "deep", "inputSchema": schema}]}
        elif method == "tools/list" and MODE == "gzip":
            reply["result"] = {"tools": tools()}
            body = gzip.compress(json.dumps(reply).encode())
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Encoding", "gzip")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)
            return
        else:
            reply["error"] = {"code": -32601, "message": "Method not found"}
        self.answer(200, json.dumps(reply).encode(), "application/json")


ThreadingHTTPServer(("127.0.0.1", PORT), Handler).serve_forever()
