"""A small OpenAI-compatible chat-completions server on 127.0.0.1 (used by the security
tests; the model client's own tests replay recorded wire responses, see replay_server.py).

``mode`` decides how it answers: ``"double:<scenario>"`` plays a policy-double scenario
(it reads the context projection from the user message, exactly as a model would),
``"status:<code>"`` answers that HTTP status with an error body, ``"malformed"`` answers
200 with a body that is not JSON, ``"nul"`` a call with NUL characters in its text and
arguments (``"nul-arguments"``: in its arguments only), ``"sleep"`` answers after ``delay`` seconds.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from sim import double


@dataclass
class Received:
    path: str
    headers: dict[str, str]
    body: dict[str, Any]


@dataclass
class FakeModel:
    mode: str = "double:reservation"
    delay: float = 0.0
    model: str = "fake-model-2025-01-01"
    received: list[Received] = field(default_factory=list)
    url: str = ""

    def answer(self, request: Received) -> tuple[int, bytes]:
        if self.mode == "sleep":
            time.sleep(self.delay)
            return 200, json.dumps(self.completion(double.Call("read_equipment", {}))).encode()
        if self.mode == "malformed":
            return 200, b"<html>502 Bad Gateway</html>"
        if self.mode in ("nul", "nul-arguments"):  # a NUL in a call's arguments (and text)
            body = self.completion(double.Call("read_equipment", {"equipment_id": "EQ-17\x00"}))
            if self.mode == "nul":
                body["choices"][0]["message"]["content"] = "Reading it\x00 now."
            return 200, json.dumps(body).encode()
        if self.mode == "huge-finish":  # a text answer whose finish_reason is 600,000 characters
            body = self.completion(double.Final({"text": "The part is reserved."}))
            body["choices"][0]["finish_reason"] = "x" * 600_000
            return 200, json.dumps(body).encode()
        if self.mode.startswith("status:"):
            status = int(self.mode.split(":")[1])
            auth = request.headers.get("Authorization", "")
            error = {
                "message": f"Incorrect API key provided: {auth.removeprefix('Bearer ')}",
                "type": "invalid_request_error" if status < 500 else "server_error",
                "code": None,
            }
            return status, json.dumps({"error": error}).encode()
        scenario = double.SCENARIOS[self.mode.split(":")[1]]
        context = json.loads(request.body["messages"][-1]["content"])
        return 200, json.dumps(self.completion(scenario.decide(context))).encode()

    def completion(self, step: double.Step) -> dict[str, Any]:
        body = double.render(step, "openai", f"call_{len(self.received):04d}")
        body.update(
            id=f"chatcmpl-fake{len(self.received)}",
            created=1745582311,
            model=self.model,
            usage={"prompt_tokens": 700, "completion_tokens": 20, "total_tokens": 720},
        )
        return body


@contextmanager
def serve(fake: FakeModel) -> Iterator[FakeModel]:
    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            length = int(self.headers.get("Content-Length", "0"))
            # Header names as HTTP means them (case-insensitive): Title-Case, one spelling.
            headers = {k.title(): v for k, v in self.headers.items()}
            request = Received(self.path, headers, json.loads(self.rfile.read(length)))
            fake.received.append(request)
            status, body = fake.answer(request)
            try:
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)
            except (BrokenPipeError, ConnectionResetError):
                pass  # the client gave up (timeout tests)

        def log_message(self, format: str, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    fake.url = f"http://127.0.0.1:{server.server_address[1]}/v1"
    try:
        yield fake
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)
