"""A local HTTP server on 127.0.0.1 that answers like a model provider, for the SDK clients.

It replays wire responses: recorded bodies from tests/fixtures/provider_outputs (their
sources are in each folder's sources.toml), with the status, headers, delay or truncation a
test asks for. In ``double`` mode it plays a policy-double scenario instead, reading the
context projection from the request exactly as a model would and answering in the API's
own wire shape inside a recorded response envelope (id, model and usage of a recording).

The SDKs under test are the real ``openai`` and ``anthropic`` packages talking HTTP to this
server: nothing in them is replaced.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from runs.policies import model_client
from sim import double

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "provider_outputs"
PATHS = {
    "openai-chat": "/v1/chat/completions",
    "openai-responses": "/v1/responses",
    "anthropic-messages": "/v1/messages",
}
# The recorded envelope each API's answers are dressed in (see sources.toml).
ENVELOPES = {
    "openai-chat": ("openai", "recorded_openai_tool_call"),
    "openai-responses": ("openai-responses", "recorded_function_call"),
    "anthropic-messages": ("anthropic", "recorded_preamble_one_call_empty_input"),
}


def fixture(vocabulary: str, name: str) -> Any:
    return json.loads((FIXTURES / vocabulary / f"{name}.json").read_text())


@dataclass
class Reply:
    """One wire response: a status, a body (bytes or JSON), headers, an optional delay,
    or ``truncate`` (announce more bytes than are sent, then close the connection), or
    ``trickle`` (send the body one byte at a time, this many seconds apart)."""

    status: int = 200
    body: Any = b""
    headers: dict[str, str] = field(default_factory=dict)
    delay: float = 0.0
    truncate: bool = False
    trickle: float = 0.0

    def payload(self) -> bytes:
        if isinstance(self.body, bytes):
            return self.body
        return json.dumps(self.body).encode()


@dataclass
class Received:
    path: str
    headers: dict[str, str]
    body: dict[str, Any]


@dataclass
class ReplayServer:
    api: str
    # Replies in order (the last one repeats); or a scenario name to play the double.
    replies: list[Reply] = field(default_factory=list)
    scenario: str = ""
    preamble: bool = False
    received: list[Received] = field(default_factory=list)
    url: str = ""

    @property
    def base_url(self) -> str:
        """The base URL the SDK is configured with (the OpenAI SDK appends /chat/completions
        or /responses to it, the Anthropic SDK /v1/messages)."""
        return self.url + ("/v1" if self.api.startswith("openai") else "")

    def answer(self, request: Received) -> Reply:
        if self.scenario:
            return Reply(200, self.play(request))
        index = min(len(self.received) - 1, len(self.replies) - 1)
        return self.replies[index]

    def play(self, request: Received) -> dict[str, Any]:
        """The double's decision for the projection in ``request``, in this API's shape."""
        context = json.loads(self.projection(request.body))
        step = double.SCENARIOS[self.scenario].decide(context)
        if self.preamble and isinstance(step, double.Call):
            step = double.Preamble(f"I'll call {step.name} now.", step)
        vocabulary = model_client.APIS[self.api]
        call_id = f"call_{len(self.received):04d}"
        body = double.render(step, vocabulary, call_id)
        envelope = fixture(*ENVELOPES[self.api])
        for key in ("model", "usage", "created", "created_at", "system_fingerprint"):
            if key in envelope and key not in body:
                body[key] = envelope[key]
        return body

    def projection(self, body: dict[str, Any]) -> str:
        if self.api == "openai-responses":
            return str(body["input"][-1]["content"])
        return str(body["messages"][-1]["content"])


@contextmanager
def serve(server: ReplayServer) -> Iterator[ReplayServer]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def do_POST(self) -> None:
            length = int(self.headers.get("Content-Length", "0"))
            raw = self.rfile.read(length)
            request = Received(self.path.split("?")[0], dict(self.headers.items()), json.loads(raw))
            server.received.append(request)
            reply = server.answer(request)
            if reply.delay:
                time.sleep(reply.delay)
            payload = reply.payload()
            try:
                self.send_response(reply.status)
                self.send_header("Content-Type", "application/json")
                self.send_header(
                    "Content-Length", str(len(payload) + (100 if reply.truncate else 0))
                )
                for name, value in reply.headers.items():
                    self.send_header(name, value)
                if reply.truncate:
                    self.send_header("Connection", "close")
                self.end_headers()
                if reply.trickle:
                    for byte in payload:
                        self.wfile.write(bytes([byte]))
                        self.wfile.flush()
                        time.sleep(reply.trickle)
                else:
                    self.wfile.write(payload)
                self.wfile.flush()
                if reply.truncate:
                    self.close_connection = True
            except (BrokenPipeError, ConnectionResetError):
                pass  # the client gave up (timeout tests)

        def log_message(self, format: str, *args: Any) -> None:
            pass

    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    httpd.daemon_threads = True
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    server.url = f"http://127.0.0.1:{httpd.server_address[1]}"
    try:
        yield server
    finally:
        httpd.shutdown()
        httpd.server_close()
        thread.join(timeout=5)
