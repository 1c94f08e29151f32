"""A tool server of MCP 2024-11-05's HTTP+SSE transport, written from that specification
with the standard library only (no MCP SDK), as servers of that time were:

    python legacy_sse.py [--token TOKEN [--route-first]] [--mute] [--endpoint URL] [--big-page] PORT

``GET /sse`` opens an event stream whose first event (``endpoint``) names the URL for the
client's POSTs (``/messages?session_id=...``); each POSTed request is answered ``202`` and
its JSON-RPC response is sent on the stream as a ``message`` event. It speaks protocol
version 2024-11-05 only and knows ``initialize``, ``notifications/initialized``,
``tools/list`` (two pages) and ``ping``. Any other path or method is 404 / 405, as a server
of that time answered the newer transport's POST. With a token, every request without
``Authorization: Bearer TOKEN`` is 401; with ``--route-first`` as well, a path or method
it does not serve is 404 / 405 before the token is checked (an app whose routes carry the
credential check: the newer transport's POST to ``/sse`` is 405, the GET 401). With
``--mute`` the event stream opens and then says nothing (no ``endpoint`` event): a server
stuck before its first event. With ``--endpoint URL`` the endpoint event names that URL
instead (e.g. another origin). With ``--big-page`` the second page lists 400 tools in one
event of ~1.6 MB.
"""

from __future__ import annotations

import json
import queue
import sys
import time
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

PROTOCOL = "2024-11-05"
PAGES: list[list[dict[str, Any]]] = [
    [
        {
            "name": "get_forecast",
            "description": "Get the weather forecast for a location.",
            "inputSchema": {
                "type": "object",
                "properties": {
                    "latitude": {"type": "number"},
                    "longitude": {"type": "number"},
                },
                "required": ["latitude", "longitude"],
            },
        }
    ],
    [
        {
            "name": "get_alerts",
            "description": "Get weather alerts for a US state.",
            "inputSchema": {
                "type": "object",
                "properties": {"state": {"type": "string", "description": "Two-letter code"}},
                "required": ["state"],
            },
        }
    ],
]
SESSIONS: dict[str, queue.Queue[dict[str, Any] | None]] = {}


def answer(request: dict[str, Any]) -> dict[str, Any] | None:
    method, ident = request.get("method"), request.get("id")
    if ident is None:  # a notification: no answer
        return None
    if method == "initialize":
        result: dict[str, Any] = {
            "protocolVersion": PROTOCOL,
            "capabilities": {"tools": {}},
            "serverInfo": {"name": "legacy-weather", "version": "0.4.1"},
        }
    elif method == "tools/list":
        cursor = (request.get("params") or {}).get("cursor")
        page = 1 if cursor == "page-2" else 0
        result = {"tools": PAGES[page]}
        if page == 0:
            result["nextCursor"] = "page-2"
    elif method == "ping":
        result = {}
    else:
        return {
            "jsonrpc": "2.0",
            "id": ident,
            "error": {"code": -32601, "message": f"Method not found: {method}"},
        }
    return {"jsonrpc": "2.0", "id": ident, "result": result}


class Handler(BaseHTTPRequestHandler):
    token = ""
    route_first = False
    mute = False
    endpoint = ""

    def log_message(self, *args: Any) -> None:
        pass

    def _authorized(self) -> bool:
        if self.token and self.headers.get("Authorization") != f"Bearer {self.token}":
            self._plain(401, "unauthorized")
            return False
        return True

    def _plain(self, status: int, text: str) -> None:
        body = text.encode()
        self.send_response(status)
        self.send_header("Content-Type", "text/plain")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self) -> None:
        if not self._authorized():
            return
        if self.path != "/sse":
            self._plain(404, "not found")
            return
        session = uuid.uuid4().hex
        outbox: queue.Queue[dict[str, Any] | None] = queue.Queue()
        SESSIONS[session] = outbox
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Cache-Control", "no-cache")
        self.end_headers()
        try:
            if self.mute:
                self.wfile.flush()
                while True:
                    time.sleep(1)
            self._event("endpoint", self.endpoint or f"/messages?session_id={session}")
            while (message := outbox.get()) is not None:
                self._event("message", json.dumps(message))
        except OSError:
            pass
        finally:
            SESSIONS.pop(session, None)

    def _event(self, name: str, data: str) -> None:
        self.wfile.write(f"event: {name}\ndata: {data}\n\n".encode())
        self.wfile.flush()

    def do_POST(self) -> None:
        path, _, query = self.path.partition("?")
        if not (self.route_first and path != "/messages") and not self._authorized():
            return
        if path != "/messages":
            self._plain(405 if path == "/sse" else 404, "method not allowed")
            return
        outbox = SESSIONS.get(query.removeprefix("session_id="))
        if outbox is None:
            self._plain(404, "unknown session")
            return
        length = int(self.headers.get("Content-Length") or 0)
        request = json.loads(self.rfile.read(length) or b"{}")
        self._plain(202, "Accepted")
        reply = answer(request)
        if reply is not None:
            outbox.put(reply)


def main() -> None:
    if "--token" in sys.argv:
        Handler.token = sys.argv[sys.argv.index("--token") + 1]
    Handler.route_first = "--route-first" in sys.argv
    Handler.mute = "--mute" in sys.argv
    if "--big-page" in sys.argv:  # a second page of ~1.6 MB: one event over 1 MiB
        PAGES[1] = [
            {"name": f"t{i:03d}", "description": "d" * 4000, "inputSchema": {"type": "object"}}
            for i in range(400)
        ]
    if "--endpoint" in sys.argv:
        Handler.endpoint = sys.argv[sys.argv.index("--endpoint") + 1]
    server = ThreadingHTTPServer(("127.0.0.1", int(sys.argv[-1])), Handler)
    server.daemon_threads = True
    server.serve_forever()


if __name__ == "__main__":
    main()
