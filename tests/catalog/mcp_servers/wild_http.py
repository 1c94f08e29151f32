"""A Streamable HTTP endpoint at /mcp (standard library) that misbehaves the way real
servers do, in ways an SDK server cannot be made to:

python wild_http.py hang-init PORT   # initialize: headers sent, then the body never comes
python wild_http.py drip PORT        # tools/list: an event stream of keep-alive comments,
                                     # one a second, that never carries the answer
python wild_http.py chatty PORT      # tools/list: an event stream with a log notification,
                                     # a ping request to the client, then the answer
python wild_http.py init-error PORT  # initialize: a JSON-RPC error
python wild_http.py gone PORT        # a session id at initialize, then 404 for it
python wild_http.py is-error PORT    # tools/list: a result with isError true and no tools
python wild_http.py hang-delete PORT # a sound listing; the DELETE that ends the session hangs
python wild_http.py hostcheck PORT   # every request: 403 with the JSON-RPC error the
                                     # TypeScript SDK's hostHeaderValidation middleware
                                     # (@modelcontextprotocol/sdk 1.24.3, the one of
                                     # createMcpExpressApp) answers a Host it does not allow
python wild_http.py oauth PORT       # an OAuth-protected resource: every POST without the
                                     # bearer token "good-token" is answered 401 with the
                                     # WWW-Authenticate and body FastMCP 4.2.3's
                                     # RemoteAuthProvider sends (RFC 9728 resource_metadata;
                                     # error="invalid_token" for a token it does not know)

A mode prefixed ``ts-`` (``ts-gone`` ...) also answers a request sent before the session
exists (the client's ``server/discover`` probe) with HTTP 400 and a JSON-RPC error, as a
server of the TypeScript SDK does ("Bad Request: Server not initialized"); unprefixed, it
answers it -32601 in a 200.
"""

from __future__ import annotations

import json
import sys
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

MODE, PORT = sys.argv[1], int(sys.argv[2])
TS_SDK = MODE.startswith("ts-")
MODE = MODE.removeprefix("ts-")
INIT = {
    "protocolVersion": "2025-06-18",
    "capabilities": {"tools": {}, "logging": {}},
    "serverInfo": {"name": "wild-http", "version": "0.1.0"},
}
TOOLS = [{"name": "lookup_part", "inputSchema": {"type": "object"}}]


# What FastMCP 4.2.3 (RemoteAuthProvider, StaticTokenVerifier) answered, seen with curl.
OAUTH_METADATA = f"http://127.0.0.1:{PORT}/.well-known/oauth-protected-resource/mcp"
OAUTH_INVALID = (
    "Authentication failed. The provided bearer token is invalid, expired, or no longer "
    "recognized by the server. To resolve: clear authentication tokens in your MCP client and "
    "reconnect. Your client should automatically re-register and obtain new tokens."
)


def event(body: object) -> bytes:
    return b"event: message\ndata: " + json.dumps(body).encode() + b"\n\n"


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args: object) -> None:
        pass

    def answer(self, status: int, body: bytes, content_type: str, **headers: str) -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        for key, value in headers.items():
            self.send_header(key.replace("_", "-"), value)
        self.end_headers()
        self.wfile.write(body)

    def stream_head(self) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Cache-Control", "no-cache")
        self.end_headers()

    def do_GET(self) -> None:
        self.answer(405, b"", "text/plain")

    def do_DELETE(self) -> None:
        if MODE == "hang-delete":
            time.sleep(3600)
        self.answer(405, b"", "text/plain")

    def do_POST(self) -> None:
        message = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))))
        if MODE == "hostcheck":
            host = self.headers.get("Host", "").rpartition(":")[0]
            error = {"code": -32000, "message": f"Invalid Host: {host}"}
            body = json.dumps({"jsonrpc": "2.0", "error": error, "id": None}).encode()
            self.answer(403, body, "application/json")
            return
        given = self.headers.get("Authorization")
        if MODE == "oauth" and given != "Bearer good-token":
            challenge = f'Bearer resource_metadata="{OAUTH_METADATA}"'
            body = b""
            if given:
                challenge = (
                    f'Bearer error="invalid_token", error_description="{OAUTH_INVALID}", '
                    f'resource_metadata="{OAUTH_METADATA}"'
                )
                error = {"error": "invalid_token", "error_description": OAUTH_INVALID}
                body = json.dumps(error).encode()
            self.answer(401, body, "application/json", WWW_Authenticate=challenge)
            return
        if "id" not in message:
            self.answer(202, b"", "application/json")
            return
        reply: dict[str, object] = {"jsonrpc": "2.0", "id": message["id"]}
        method = message.get("method")
        if TS_SDK and method != "initialize" and "Mcp-Session-Id" not in self.headers:
            error = {"code": -32000, "message": "Bad Request: Server not initialized"}
            body = {"jsonrpc": "2.0", "error": error, "id": None}
            self.answer(400, json.dumps(body).encode(), "application/json")
            return
        if MODE == "gone" and method != "initialize":
            self.answer(404, b"", "text/plain")
            return
        if method == "initialize":
            if MODE == "hang-init":
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", "100")
                self.end_headers()
                time.sleep(3600)
                return
            if MODE == "init-error":
                reply["error"] = {"code": -32603, "message": "license server unreachable"}
            else:
                reply["result"] = INIT
            self.answer(200, json.dumps(reply).encode(), "application/json", Mcp_Session_Id="s-1")
            return
        if method == "tools/list" and MODE == "drip":
            self.stream_head()
            try:
                while True:
                    self.wfile.write(b": keep-alive\n\n")
                    self.wfile.flush()
                    time.sleep(1)
            except OSError:
                return
        if method == "tools/list" and MODE == "chatty":
            self.stream_head()
            log = {"level": "info", "logger": "wild", "data": "listing"}
            self.wfile.write(
                event({"jsonrpc": "2.0", "method": "notifications/message", "params": log})
            )
            self.wfile.write(event({"jsonrpc": "2.0", "id": "srv-1", "method": "ping"}))
            reply["result"] = {"tools": TOOLS}
            self.wfile.write(event(reply))
            self.wfile.flush()
            self.close_connection = True
            return
        if method == "tools/list" and MODE == "is-error":
            reply["result"] = {"isError": True, "content": [{"type": "text", "text": "boom"}]}
        elif method == "tools/list":
            reply["result"] = {"tools": TOOLS}
        else:
            reply["error"] = {"code": -32601, "message": "Method not found"}
        self.answer(200, json.dumps(reply).encode(), "application/json")


ThreadingHTTPServer(("127.0.0.1", PORT), Handler).serve_forever()
