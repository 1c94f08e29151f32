"""Live discovery over MCP: connect to one tool server with the official Python SDK, run the
handshake and ``tools/list`` through every ``nextCursor``, and hand back the wire results.

The I/O shell of discovery, and nothing more: no ORM, no Django settings, no parsing of
tool definitions (``catalog.domain.discovery`` does that). The SDK (``mcp.Client``) drives
the protocol: version negotiation (``server/discover``, falling back to ``initialize``),
request ids, cursors. A tap between the transport and the SDK keeps the *wire* dict of
each ``tools/list`` result, so fields the SDK does not model are kept as untrusted data and
one malformed tool does not sink its page: the SDK validates a page as a whole, the catalog
accepts or refuses each tool alone.

Bounds (``Limits``): one deadline for the whole conversation, a byte budget over all pages,
a tool count, a page count, and cursor-loop detection. A server that hangs, crashes,
speaks another protocol version or writes junk raises ``DiscoveryFailed`` with a stable
code and a sentence an admin can act on. The server process is always stopped (the SDK
closes stdin, then terminates the process tree). One answer is bounded on every transport:
an HTTP body or event stream, and a stdio line (``_bounded_stdio``: the SDK's own line
reader is quadratic in the length of a line).

An HTTP target is first spoken to in Streamable HTTP. When its ``initialize`` POST is
answered with an HTTP 4xx that a credential cannot fix (404, 405, ...), the URL is tried
as the deprecated HTTP+SSE transport of MCP 2024-11-05 (a GET opening an event stream whose
first event names the endpoint for POSTs), as the specification's backwards-compatibility
section asks of clients; the identity records which one answered (``http_transport``).

``fetch_tools`` runs the coroutine with ``asyncio.run`` in a worker thread of its own, so a
caller's thread never hosts the event loop (a thread that already runs one, such as
Playwright's, would refuse ``asyncio.run``; Django refuses ORM calls inside one).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import re
import signal
import threading
import urllib.request
from collections.abc import AsyncIterator, Mapping
from concurrent.futures import ThreadPoolExecutor
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from http import HTTPStatus
from typing import IO, Any

import anyio
import anyio.lowlevel
import httpx2
from mcp import Client, StdioServerParameters
from mcp.client import stdio as sdk_stdio
from mcp.client.sse import sse_client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.dispatcher import coerce_request_id
from mcp.shared.exceptions import MCPError
from mcp.shared.message import SessionMessage
from mcp.types import JSONRPCRequest, JSONRPCResponse, PaginatedRequestParams
from pydantic import ValidationError

from catalog.domain import discovery
from kernel.canonical import storable

STDERR_TAIL = 600
MAX_INSTRUCTIONS = 2000
# The identity is recorded with the discovery and every sighting of its listing: a text of
# serverInfo is cut, and serverInfo or capabilities past this many bytes is not kept.
MAX_IDENTITY_TEXT = 200
MAX_IDENTITY_PART = 8 * 1024

STREAMABLE_HTTP = "streamable-http"
LEGACY_SSE = "sse"
# A 4xx answer to the initialize POST that says "not this transport here" (404, 405, ...),
# or 501 (a server that implements no POST at all), sends discovery to the deprecated
# HTTP+SSE transport; these 4xx say something else, which the older transport would not
# fix: a credential refused or missing, a timeout, a rate limit, a Host the server does not
# serve (421: the MCP SDKs' DNS rebinding protection answers so).
NOT_A_TRANSPORT_ANSWER = frozenset({401, 403, 407, 408, 421, 429})


HANDSHAKE = "the handshake (initialize)"
# Commands that fetch the server they run on first use (a stdio server registered as
# ``npx -y PACKAGE`` ...).
LAUNCHERS = frozenset({"npx", "uvx", "bunx", "pnpx", "pipx"})
# What a stdio server is given of this process's environment (the SDK's safe default).
_INHERITED = (
    ", ".join(sdk_stdio.DEFAULT_INHERITED_ENV_VARS[:-1])
    + " and "
    + sdk_stdio.DEFAULT_INHERITED_ENV_VARS[-1]
)
CLOSING = "closing the session"
# Once every page is read, closing the session may take this long, no more (the server's
# process is stopped all the same: the SDK's stdio shutdown is shielded and bounded).
CLOSE_SECONDS = 3.0


def _try_legacy_after(status: int) -> bool:
    return (400 <= status < 500 and status not in NOT_A_TRANSPORT_ANSWER) or status == 501


@dataclass(frozen=True)
class Target:
    """Where the server is. ``headers`` carry a resolved credential, ``env`` the resolved
    values of a stdio server's environment entries: never stored, shown or logged."""

    transport: str  # "stdio" | "http"
    command: str = ""
    args: tuple[str, ...] = ()
    url: str = ""
    cwd: str | None = None
    headers: Mapping[str, str] = field(default_factory=dict, repr=False)
    env: Mapping[str, str] = field(default_factory=dict, repr=False)

    @property
    def label(self) -> str:
        if self.transport == "stdio":
            return " ".join((self.command, *self.args))[:300]
        return self.url


@dataclass(frozen=True)
class Limits:
    timeout_seconds: float = 30.0
    max_bytes: int = discovery.MAX_DISCOVERY_BYTES
    max_tools: int = discovery.MAX_TOOLS
    max_pages: int = discovery.MAX_PAGES


@dataclass
class Fetched:
    """What one complete listing returned: the server's identity and every raw tool."""

    identity: dict[str, Any]
    tools: list[Any]
    pages: int
    bytes: int
    seconds: float = 0.0


class DiscoveryFailed(Exception):
    """Discovery could not complete; nothing it saw may be stored.

    ``code`` is a stable snake_case reason; ``message`` says what happened and what to do;
    ``said`` is the server's own JSON-RPC error ("error -32002: ..."), when it sent one.
    """

    def __init__(
        self, code: str, message: str, *, stage: str = "", stderr: str = "", said: str = ""
    ) -> None:
        self.code = code
        self.message = message
        self.stage = stage
        self.stderr = stderr
        self.said = said
        super().__init__(f"{code}: {message}")


class _Tap:
    """Watches every message between the transport and the SDK session.

    Keeps the wire dict of each ``tools/list`` result, counts its bytes, and turns
    junk on the wire (a line that is not JSON-RPC) into an immediate failure.
    """

    def __init__(self, limits: Limits) -> None:
        self.limits = limits
        self.pages: list[dict[str, Any]] = []
        self.bytes = 0
        self.failure: DiscoveryFailed | None = None
        self.scope: anyio.CancelScope | None = None
        self.stage = "starting the server"
        self.sent: set[Any] = set()

    def send(self, item: SessionMessage) -> None:
        if isinstance(item.message, JSONRPCRequest):
            self.sent.add(coerce_request_id(item.message.id))

    def fail(self, failure: DiscoveryFailed) -> None:
        if self.failure is None:
            self.failure = failure
        if self.scope is not None:
            self.scope.cancel()

    def observe(self, item: SessionMessage | Exception) -> None:
        if isinstance(item, Exception) and _too_deep(str(item)):
            self.fail(_nested_too_deep(self.stage))
            return
        if isinstance(item, Exception):
            self.fail(
                DiscoveryFailed(
                    "not_mcp",
                    f"the server wrote output that is not an MCP JSON-RPC message during "
                    f"{self.stage} ({_offending(item)}). Its stdout must carry MCP "
                    "messages only: is this an MCP server, and does it log to stdout?",
                    stage=self.stage,
                )
            )
            return
        message = item.message
        answered = message.id if isinstance(message, JSONRPCResponse) else None
        if answered is not None and coerce_request_id(answered) not in self.sent:
            # A result for no request: the SDK would drop it and wait for the real answer
            # until the deadline. (An error for no request is dropped: a server may answer
            # the client's own answers to its requests so.)
            self.fail(
                DiscoveryFailed(
                    "not_mcp",
                    f"the server answered a request with id {_short(repr(answered), 40)} "
                    f"during {self.stage}, but no request had that id: it does not "
                    "speak JSON-RPC correctly; nothing was stored",
                    stage=self.stage,
                )
            )
            return
        if isinstance(message, JSONRPCResponse) and isinstance(message.result, dict):
            if "tools" not in message.result:
                return
            size = len(json.dumps(message.result, ensure_ascii=False).encode("utf-8", "replace"))
            self.bytes += size
            self.pages.append(message.result)
            if self.bytes > self.limits.max_bytes:
                self.fail(
                    DiscoveryFailed(
                        "too_large",
                        f"the tool list passed {self.limits.max_bytes} bytes at page "
                        f"{len(self.pages)} (limit {self.limits.max_bytes}); nothing was stored",
                        stage=self.stage,
                    )
                )


@asynccontextmanager
async def _tapped(inner: Any, tap: _Tap) -> AsyncIterator[Any]:
    """A transport that forwards the inner one's streams through ``tap``."""
    async with inner as (read, write):
        send, receive = anyio.create_memory_object_stream[SessionMessage | Exception](0)
        out, outgoing = anyio.create_memory_object_stream[SessionMessage](0)

        async def forward() -> None:
            async with send:
                async for item in read:
                    tap.observe(item)
                    if tap.failure is not None:
                        return
                    await send.send(item)

        async def forward_out() -> None:
            async with write, outgoing:
                async for item in outgoing:
                    tap.send(item)
                    await write.send(item)

        async with anyio.create_task_group() as group:
            group.start_soon(forward)
            group.start_soon(forward_out)
            try:
                yield receive, out
            finally:
                group.cancel_scope.cancel()


# One HTTP answer (a JSON body, or an event stream, read as it comes) may carry at most this
# many times the listing's byte budget, plus a mebibyte: the budget counts tools re-encoded
# as UTF-8, a server may escape each character (``\ud83d\ude00`` is 12 bytes for 4).
WIRE_FACTOR = 3


def wire_limit(limits: Limits) -> int:
    return WIRE_FACTOR * limits.max_bytes + 1024 * 1024


@dataclass
class _Wire:
    """How one attempt speaks to its target: ``kind`` is "stdio", ``STREAMABLE_HTTP`` or
    ``LEGACY_SSE``. ``status`` and ``content_type`` are the handshake's answer, once
    answered: for Streamable HTTP the answer to the initialize POST (to the client's
    ``server/discover`` probe only when no initialize was sent, as to a server that speaks
    the stateless revision), for the legacy transport the answer to its GET; ``listing``
    is the status of the latest tools/list POST. A redirect is no answer (the SDK follows
    one within the endpoint's origin). ``tap`` (set by the attempt) hears of an HTTP answer
    read past ``limit`` bytes."""

    kind: str
    limit: int = 0
    tap: _Tap | None = None
    listing: int | None = None
    asked: set[str] = field(default_factory=set)
    answers: dict[str, tuple[int, str]] = field(default_factory=dict)
    # The WWW-Authenticate of the latest 401 (an OAuth server's names its metadata).
    challenge: str = ""

    def overflow(self, failure: DiscoveryFailed) -> None:
        if self.tap is not None:
            failure.stage = self.tap.stage
            failure.message = failure.message.replace("{stage}", self.tap.stage)
            self.tap.fail(failure)

    def _handshake(self) -> tuple[int, str] | None:
        if self.kind == LEGACY_SSE:
            return self.answers.get("GET")
        if "initialize" in self.asked:
            return self.answers.get("initialize")
        return self.answers.get("server/discover")

    @property
    def status(self) -> int | None:
        answer = self._handshake()
        return answer[0] if answer else None

    @property
    def content_type(self) -> str:
        answer = self._handshake()
        return answer[1] if answer else ""

    async def ask(self, request: httpx2.Request) -> None:
        self.asked.add(_method_of(request))

    async def saw(self, response: httpx2.Response) -> None:
        status = response.status_code
        if 300 <= status < 400:
            return
        if status == 401:
            self.challenge = response.headers.get("www-authenticate", "")[:2000]
        method = _method_of(response.request)
        if method == "tools/list":
            self.listing = status
        elif method not in self.answers:
            content_type = response.headers.get("content-type", "").split(";")[0].strip()
            self.answers[method] = (status, content_type)

    def answer(self) -> str:
        """The first answer in a few words, e.g. "HTTP 200 (text/html, not an event stream)"."""
        if self.status is None:
            return "no answer"
        if self.status >= 400 or self.content_type == "text/event-stream":
            return f"HTTP {self.status} ({_reason(self.status)})"
        kind = self.content_type or "no content type"
        return f"HTTP {self.status} ({kind}, not an event stream)"

    def client(self, headers: Mapping[str, str] | None = None, **options: Any) -> Any:
        """An HTTP client that notes the answers' statuses (for either HTTP transport;
        the SDK never follows a redirect off the endpoint's origin, whatever it is told)."""
        options.setdefault("timeout", httpx2.Timeout(30.0, read=60.0))
        return httpx2.AsyncClient(
            # Uncompressed: a compressed answer's size is only known once it is decoded.
            headers={**dict(headers or {}), "Accept-Encoding": "identity"},
            follow_redirects=False,
            event_hooks={"request": [self.ask], "response": [self.saw]},
            transport=_Bounded(self),
            **options,
        )


def _method_of(request: httpx2.Request) -> str:
    """The JSON-RPC method a POST carries ("GET" for any other request, "" for an answer)."""
    if request.method != "POST":
        return request.method
    try:
        body = json.loads(request.content)
    except (ValueError, httpx2.RequestNotRead):
        return ""
    method = body.get("method") if isinstance(body, dict) else None
    return method if isinstance(method, str) else ""


class _Bounded(httpx2.AsyncBaseTransport):
    """Reads every HTTP answer through ``_BoundedBody``: never more than ``wire.limit``.

    A client given its own transport no longer reads the environment's proxy settings:
    each request goes through the proxy they name for its URL (``HTTP_PROXY``,
    ``HTTPS_PROXY``, ``ALL_PROXY``, ``NO_PROXY``), as the client's default transport did.
    """

    def __init__(self, wire: _Wire) -> None:
        self.wire = wire
        self.transports: dict[str | None, httpx2.AsyncHTTPTransport] = {}

    def _inner(self, url: httpx2.URL) -> httpx2.AsyncHTTPTransport:
        proxies = urllib.request.getproxies_environment()
        proxy = None
        if not urllib.request.proxy_bypass_environment(url.host, proxies):
            proxy = proxies.get(url.scheme) or proxies.get("all")
        if proxy not in self.transports:
            self.transports[proxy] = httpx2.AsyncHTTPTransport(proxy=proxy)
        return self.transports[proxy]

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        response = await self._inner(request.url).handle_async_request(request)
        encoding = response.headers.get("content-encoding", "identity").strip().lower()
        assert isinstance(response.stream, httpx2.AsyncByteStream)
        response.stream = _BoundedBody(response.stream, self.wire, encoding)
        return response

    async def aclose(self) -> None:
        for transport in self.transports.values():
            await transport.aclose()


class _BoundedBody(httpx2.AsyncByteStream):
    def __init__(self, inner: httpx2.AsyncByteStream, wire: _Wire, encoding: str) -> None:
        self.inner = inner
        self.wire = wire
        self.encoding = encoding

    async def __aiter__(self) -> AsyncIterator[bytes]:
        if self.encoding not in ("", "identity"):
            self.wire.overflow(
                DiscoveryFailed(
                    "http_error",
                    f"the server answered {{stage}} compressed ({self.encoding[:40]}) though "
                    "asked for an uncompressed answer: its size cannot be bounded before it "
                    "is decoded; nothing was stored",
                )
            )
            raise httpx2.DecodingError("compressed answer refused")
        read = 0
        async for chunk in self.inner:
            read += len(chunk)
            if read > self.wire.limit:
                self.wire.overflow(
                    DiscoveryFailed(
                        "too_large",
                        f"one HTTP answer to {{stage}} passed {self.wire.limit} bytes (the "
                        "tool list may have at most "
                        f"{(self.wire.limit - 1024 * 1024) // WIRE_FACTOR} bytes); it was not "
                        "read further and nothing was stored",
                    )
                )
                raise httpx2.ReadError("answer too large")
            yield chunk

    async def aclose(self) -> None:
        await self.inner.aclose()


def _transport(target: Target, errlog: _StderrTail, wire: _Wire) -> Any:
    if target.transport == "stdio":
        params = StdioServerParameters(
            command=target.command, args=list(target.args), cwd=target.cwd, env=dict(target.env)
        )
        return _bounded_stdio(params, errlog.file, wire)
    if wire.kind == LEGACY_SSE:
        return sse_client(
            target.url, headers=dict(target.headers), httpx_client_factory=wire.client
        )
    client = wire.client(target.headers)
    # An event may be as large as any answer (the SDK's own default is 1 MiB).
    stream = streamable_http_client(target.url, http_client=client, max_sse_event_size=wire.limit)
    return _owning(client, stream)


# How much of the server's stdout one read takes.
STDIO_READ = 64 * 1024


@asynccontextmanager
async def _bounded_stdio(
    server: StdioServerParameters, errlog: IO[str], wire: _Wire
) -> AsyncIterator[Any]:
    """The SDK's stdio transport (``mcp.client.stdio.stdio_client``) with a bounded reader.

    The SDK's reader joins every chunk to the line read so far (``buffer + chunk``), so one
    line without a newline costs time and memory quadratic in its length (30 MB: seconds
    and hundreds of MB). Here a line is kept as a list of chunks and refused once it passes
    ``wire.limit`` bytes, the bound of one HTTP answer: ``too_large`` (through
    ``wire.overflow``), nothing more is read, and the server's process group is killed at
    once. Everything else is the SDK's: spawning the process in its own session, parsing a
    line (``_parse_line``), the writer, and the shutdown (close stdin, wait, kill the tree).
    Those helpers are private to the SDK (pinned at mcp==2.3.0 in pyproject.toml).
    """
    command = await sdk_stdio._get_executable_command(server.command)
    process = await sdk_stdio._create_platform_compatible_process(
        command=command,
        args=server.args,
        env=sdk_stdio.get_default_environment() | (server.env or {}),
        errlog=errlog,
        cwd=server.cwd,
    )
    # As in the SDK: no awaits until the task group is entered (a cancellation there would
    # leak the live process).
    read_stream_writer, read_stream = anyio.create_memory_object_stream[SessionMessage | Exception](
        0
    )
    write_stream, write_stream_reader = anyio.create_memory_object_stream[SessionMessage](0)
    writer_done = anyio.Event()

    def kill() -> None:
        # The server was started in a session of its own: its group is its whole tree.
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(process.pid, signal.SIGKILL)

    async def stdout_reader() -> None:
        assert process.stdout, "Opened process is missing stdout"
        pieces: list[bytes] = []
        size = 0
        try:
            async with read_stream_writer:
                try:
                    while True:
                        try:
                            chunk = await process.stdout.receive(STDIO_READ)
                        except anyio.EndOfStream:
                            return
                        start = 0
                        while (end := chunk.find(b"\n", start)) != -1:
                            size += end - start
                            if size > wire.limit:
                                break
                            pieces.append(chunk[start:end])
                            line = b"".join(pieces)
                            pieces, size = [], 0
                            start = end + 1
                            try:
                                await read_stream_writer.send(_stdio_message(line, server))
                            except (anyio.ClosedResourceError, anyio.BrokenResourceError):
                                return  # the session is gone; only the drain remains
                        else:
                            size += len(chunk) - start
                            pieces.append(chunk[start:])
                        if size > wire.limit:
                            pieces.clear()
                            kill()
                            wire.overflow(
                                DiscoveryFailed(
                                    "too_large",
                                    f"one line the server wrote to stdout during {{stage}} "
                                    f"passed {wire.limit} bytes (the tool list may have at "
                                    f"most {(wire.limit - 1024 * 1024) // WIRE_FACTOR} bytes); "
                                    "it was not read further, the server was stopped and "
                                    "nothing was stored",
                                )
                            )
                            return
                finally:
                    await sdk_stdio._drain_stdout(process)
        except (anyio.ClosedResourceError, anyio.BrokenResourceError, ConnectionError):
            pass  # the shutdown closed stdout under the read; the session sees the end

    async def stdin_writer() -> None:
        assert process.stdin, "Opened process is missing stdin"
        try:
            async with write_stream_reader:
                async for session_message in write_stream_reader:
                    text = session_message.message.model_dump_json(
                        by_alias=True, exclude_unset=True
                    )
                    data = (text + "\n").encode(server.encoding, server.encoding_error_handler)
                    await process.stdin.send(data)
        except (anyio.ClosedResourceError, anyio.BrokenResourceError, OSError):
            await read_stream_writer.aclose()
        finally:
            writer_done.set()

    async def shutdown() -> None:
        read_stream.close()
        write_stream.close()
        with anyio.move_on_after(sdk_stdio._WRITER_FLUSH_TIMEOUT):
            await writer_done.wait()
        await sdk_stdio._stop_server_process(process)
        await sdk_stdio._aclose_all(
            read_stream, write_stream, read_stream_writer, write_stream_reader
        )
        await anyio.lowlevel.checkpoint()

    async with anyio.create_task_group() as group:
        group.start_soon(stdout_reader)
        group.start_soon(stdin_writer)
        try:
            yield read_stream, write_stream
        finally:
            # Shielded and bounded, as in the SDK: the server process never outlives us.
            with anyio.CancelScope(shield=True):
                await shutdown()
            group.cancel_scope.cancel()


def _stdio_message(line: bytes, server: StdioServerParameters) -> SessionMessage | Exception:
    """One stdout line as the SDK reads it (a message, or the parse error as a value)."""
    try:
        text = line.decode(server.encoding, server.encoding_error_handler)
    except UnicodeDecodeError as exc:
        return exc
    return sdk_stdio._parse_line(text)


@asynccontextmanager
async def _owning(client: httpx2.AsyncClient, inner: Any) -> AsyncIterator[Any]:
    async with client, inner as streams:
        yield streams


def _dump(model: Any) -> Any:
    if model is None:
        return None
    return model.model_dump(by_alias=True, mode="json", exclude_none=True)


def identity_of(client: Client, target: Target, wire: _Wire) -> dict[str, Any]:
    """The server's identity as negotiated: what every candidate of this listing records."""
    session = client.session
    instructions = session.instructions or ""
    # Untrusted text: storable as sent (a NUL shown as \u0000, never a failed save).
    info = {
        key: _cut(value, MAX_IDENTITY_TEXT) if isinstance(value, str) else value
        for key, value in (_dump(session.server_info) or {}).items()
    }
    return storable(
        {
            "server_info": _bounded(info),
            "protocol_version": session.protocol_version or "",
            "capabilities": _bounded(_dump(session.server_capabilities) or {}),
            "instructions": _cut(instructions.strip(), MAX_INSTRUCTIONS),
            "transport": target.transport,
            **({"http_transport": wire.kind} if target.transport == "http" else {}),
        }
    )


def _bounded(part: dict[str, Any]) -> dict[str, Any]:
    """``part`` of the identity as sent, or past ``MAX_IDENTITY_PART`` bytes a note of its
    size and its first keys."""
    size = len(json.dumps(part, ensure_ascii=False).encode("utf-8", "replace"))
    if size <= MAX_IDENTITY_PART:
        return part
    return {
        "_cut": f"{size} bytes, over the {MAX_IDENTITY_PART}-byte limit: not kept",
        "keys": sorted(str(key)[:64] for key in part)[:50],
    }


async def _list_all(
    target: Target, limits: Limits, errlog: _StderrTail, tap: _Tap, wire: _Wire, deadline: float
) -> Fetched:
    started = anyio.current_time()
    tools: list[Any] = []
    identity: dict[str, Any] = {}
    pages = 0
    complete = False
    with anyio.CancelScope(deadline=deadline) as scope:
        tap.scope = scope
        transport = _tapped(_transport(target, errlog, wire), tap)
        client = Client(
            transport, mode="auto", cache=None, read_timeout_seconds=limits.timeout_seconds
        )
        tap.stage = HANDSHAKE
        async with client:
            identity = identity_of(client, target, wire)
            cursor: str | None = None
            seen: set[str] = set()
            while True:
                pages += 1
                if pages > limits.max_pages:
                    raise DiscoveryFailed(
                        "too_many_pages",
                        f"the server's listing has more than {limits.max_pages} pages "
                        f"(limit {limits.max_pages}); nothing was stored",
                        stage=tap.stage,
                    )
                tap.stage = f"tools/list page {pages}"
                before = len(tap.pages)
                # The SDK refuses a page as a whole; the catalog judges each tool alone.
                try:
                    with contextlib.suppress(ValidationError):
                        await client.session.list_tools(
                            params=PaginatedRequestParams(cursor=cursor)
                        )
                except MCPError as exc:
                    if pages == 1 and exc.code == -32601 and not offers_tools(identity):
                        # A server without tools (prompts, resources only) says so: its
                        # complete listing is empty.
                        break
                    raise
                if len(tap.pages) == before:
                    raise DiscoveryFailed(
                        "not_mcp",
                        f"the server answered {tap.stage} without a tools list",
                        stage=tap.stage,
                    )
                page = tap.pages[-1]
                listed = page.get("tools")
                if not isinstance(listed, list):
                    raise DiscoveryFailed(
                        "not_mcp",
                        f'{tap.stage}: "tools" is not a list; nothing was stored',
                        stage=tap.stage,
                    )
                tools.extend(listed)
                if len(tools) > limits.max_tools:
                    raise DiscoveryFailed(
                        "too_many_tools",
                        f"the server lists more than {limits.max_tools} tools ({len(tools)} by "
                        f"page {pages}; limit {limits.max_tools}); nothing was stored",
                        stage=tap.stage,
                    )
                cursor = _next_cursor(page.get("nextCursor"), seen, tap.stage)
                if cursor is None:
                    break
            # The listing is complete. Closing the session (over Streamable HTTP a DELETE,
            # which a server or its proxy may never answer) gets a short bound of its own
            # and can no longer turn the listing into a timeout.
            complete = True
            tap.stage = CLOSING
            scope.deadline = min(scope.deadline, anyio.current_time() + CLOSE_SECONDS)
    if tap.failure is not None:
        raise tap.failure
    if scope.cancelled_caught and not complete:
        raise DiscoveryFailed(
            "timeout",
            f"the server did not finish within {limits.timeout_seconds:g} s (stuck in "
            f"{tap.stage}); it was stopped and nothing was stored",
            stage=tap.stage,
        )
    seconds = anyio.current_time() - started
    return Fetched(identity=identity, tools=tools, pages=pages, bytes=tap.bytes, seconds=seconds)


def offers_tools(identity: Mapping[str, Any]) -> bool:
    """Whether the server's initialize declared the ``tools`` capability."""
    capabilities = identity.get("capabilities")
    return not isinstance(capabilities, Mapping) or capabilities.get("tools") is not None


def _next_cursor(value: Any, seen: set[str], stage: str) -> str | None:
    # An empty cursor ends the listing, as no cursor does: the official SDKs' pagination
    # loops (``while cursor``) read it so, and servers written against them send it.
    if value is None or value == "":
        return None
    if not isinstance(value, str) or len(value) > discovery.MAX_CURSOR:
        raise DiscoveryFailed(
            "bad_cursor",
            f"{stage}: nextCursor is not a usable cursor string; nothing was stored",
            stage=stage,
        )
    if value in seen:
        raise DiscoveryFailed(
            "cursor_loop",
            f"{stage}: the server repeated a cursor, so its listing never ends; nothing was stored",
            stage=stage,
        )
    seen.add(value)
    return value


def _leaf(exc: BaseException) -> BaseException:
    """The first real exception inside (possibly nested) task-group exception groups."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    return exc


def _classify(exc: BaseException, stage: str) -> DiscoveryFailed:
    exc = _leaf(exc)
    if isinstance(exc, DiscoveryFailed):
        return exc
    if isinstance(exc, MCPError):
        if "closed" in exc.message.lower():
            return DiscoveryFailed(
                "connection_closed",
                f"the server closed the connection during {stage} (it exited or crashed); "
                "nothing was stored",
                stage=stage,
            )
        if exc.code == -32001 or "timed out" in exc.message.lower():
            return DiscoveryFailed(
                "timeout",
                f"the server did not answer {stage} in time; nothing was stored",
                stage=stage,
            )
        if _too_deep(exc.message):
            return _nested_too_deep(stage)
        said = f"error {exc.code}: {_short(exc.message, 200)}"
        return DiscoveryFailed(
            "server_error", f"the server answered {stage} with {said}", stage=stage, said=said
        )
    if isinstance(exc, RuntimeError) and "protocol version" in str(exc).lower():
        return DiscoveryFailed(
            "protocol_version",
            f"{_short(str(exc), 200)}. This client speaks MCP "
            f"{', '.join(_known_versions())}; nothing was stored",
            stage=stage,
        )
    if isinstance(exc, ValidationError):
        return DiscoveryFailed(
            "not_mcp",
            f"the server's answer to {stage} is not valid MCP "
            f"({_short(str(exc).splitlines()[0], 160)}); nothing was stored",
            stage=stage,
        )
    if isinstance(exc, FileNotFoundError | PermissionError):
        return DiscoveryFailed(
            "spawn_failed",
            f"the server command could not be started ({_short(str(exc), 200)})",
            stage=stage,
        )
    event = re.search(r"Server-sent event exceeded the (\d+) byte limit", str(exc))
    if isinstance(exc, httpx2.HTTPError) and event:
        return DiscoveryFailed(
            "too_large",
            f"one event of the server's event stream passed {event.group(1)} bytes during "
            f"{stage}: the MCP SDK's limit for one event of the deprecated HTTP+SSE transport "
            "(a page of the tool list, there); list fewer tools per page, or serve Streamable "
            "HTTP. Nothing was stored",
            stage=stage,
        )
    if isinstance(exc, httpx2.HTTPError):
        return DiscoveryFailed(
            "http_error",
            f"HTTP error during {stage}: {_short(str(exc) or type(exc).__name__, 200)}",
            stage=stage,
        )
    if isinstance(exc, OSError | anyio.BrokenResourceError | anyio.ClosedResourceError):
        return DiscoveryFailed(
            "connection_closed",
            f"the connection to the server broke during {stage} ({type(exc).__name__}); "
            "nothing was stored",
            stage=stage,
        )
    return DiscoveryFailed(
        "unexpected",
        f"discovery failed during {stage}: {type(exc).__name__}: {_short(str(exc), 200)}",
        stage=stage,
    )


def _too_deep(text: str) -> bool:
    """The SDK's JSON parser (pydantic's) stops at its recursion limit: not junk, depth."""
    return "recursion limit exceeded" in text


def _nested_too_deep(stage: str) -> DiscoveryFailed:
    return DiscoveryFailed(
        "not_mcp",
        f"the server's answer to {stage} is nested deeper than the MCP client's JSON parser "
        f"reads (a tool definition may nest {discovery.MAX_DEPTH - 2} levels); nothing was "
        "stored",
        stage=stage,
    )


def _offending(exc: Exception) -> str:
    """The line the server wrote, when the parse error quotes it (pydantic does)."""
    match = re.search(r"input_value=('(?:[^'\\\\]|\\\\.)*'|\"[^\"]*\")", str(exc))
    if match:
        return f"it wrote {_short(match.group(1), 120)}"
    return _short(str(exc), 160)


def _known_versions() -> tuple[str, ...]:
    from mcp_types.version import KNOWN_PROTOCOL_VERSIONS

    return KNOWN_PROTOCOL_VERSIONS


def _cut(text: str, limit: int) -> str:
    """``text`` as it was sent (lines, indentation and all), cut to ``limit`` characters."""
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _short(text: str, limit: int) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


async def _run(target: Target, limits: Limits) -> Fetched:
    deadline = anyio.current_time() + limits.timeout_seconds
    if target.transport == "stdio":
        return await _attempt(target, limits, _Wire("stdio"), deadline)
    wire = _Wire(STREAMABLE_HTTP)
    try:
        return await _attempt(target, limits, wire, deadline)
    except DiscoveryFailed as failure:
        if failure.stage.startswith("tools/list"):
            # Past the handshake the server spoke Streamable HTTP: a later refusal is its
            # own, never a sign of the deprecated transport; and it is the answer to
            # tools/list that failed, whatever the handshake's were.
            if wire.listing is None or wire.listing < 400:
                raise
            raise _http_refusal(failure, wire.listing, target, challenge=wire.challenge) from None
        status = wire.status
        answered = status is not None and 200 <= status < 300
        if answered and failure.code == "server_error" and not _mcp_content(wire):
            raise _not_an_endpoint(failure, wire) from None
        if status is None or status < 400:
            raise
        if not _try_legacy_after(status):
            raise _http_refusal(failure, status, target, challenge=wire.challenge) from None
        legacy = _Wire(LEGACY_SSE)
        try:
            return await _attempt(target, limits, legacy, deadline)
        except DiscoveryFailed as second:
            raise _neither(failure, status, second, legacy, target) from None


async def _attempt(target: Target, limits: Limits, wire: _Wire, deadline: float) -> Fetched:
    tap = _Tap(limits)
    wire.tap, wire.limit = tap, wire_limit(limits)
    with _StderrTail() as errlog, _SdkErrors() as sdk:
        try:
            return await _list_all(target, limits, errlog, tap, wire, deadline)
        except Exception as exc:
            failure = tap.failure or _classify(exc, tap.stage)
            failure.stage = failure.stage or tap.stage
            failure.stderr = errlog.tail()
            launcher = os.path.basename(target.command)
            if (
                wire.kind == "stdio"
                and failure.code == "timeout"
                and launcher in LAUNCHERS
                and not failure.stage.startswith("tools/list")
            ):
                failure.message += (
                    f". {launcher} fetches the server's package on its first run, silently "
                    "and often for longer than the deadline (stopped mid-install, it may leave "
                    "a broken cache behind): install the server ahead and register its own "
                    "command, or run the launcher once by hand"
                )
            if (
                wire.kind == "stdio"
                and failure.code == "connection_closed"
                and not failure.stage.startswith("tools/list")
            ):
                # A server that exits at once often misses a variable (an API key) that
                # FieldOps' environment may hold: the child is never given it.
                given = (
                    f" and its environment entries {', '.join(target.env)}" if target.env else ""
                )
                failure.message = failure.message.removesuffix("; nothing was stored") + (
                    f"; it was started with only {_INHERITED} of FieldOps' environment{given} "
                    "(no other variable, such as an API key, is passed on: register the server "
                    "with an environment entry for a variable it needs, e.g. "
                    "API_KEY=env:FIELDOPS_MCP_ENV_API_KEY, the variable of this process that "
                    "holds it; never in the arguments, which are stored and shown)"
                    + ("; see its last stderr output" if failure.stderr else "")
                    + "; nothing was stored"
                )
            if sdk.first and failure.code in ("timeout", "unexpected", "connection_closed"):
                # The SDK's transport tasks log what stopped them (e.g. an HTTP+SSE endpoint
                # on another origin, which it refuses) and leave the session waiting.
                failure.message += f" (the MCP client reported: {_short(sdk.first, 200)})"
            raise failure from None


class _SdkErrors(logging.Handler):
    """While open, keeps the first error the MCP SDK's client logs on this thread (each
    discovery runs on a thread of its own, so another's errors are never taken)."""

    LOGGER = "mcp.client"

    def __init__(self) -> None:
        super().__init__(logging.ERROR)
        self.thread = threading.get_ident()
        self.first = ""

    def emit(self, record: logging.LogRecord) -> None:
        if record.thread == self.thread and not self.first:
            self.first = record.getMessage()

    def __enter__(self) -> _SdkErrors:
        logging.getLogger(self.LOGGER).addHandler(self)
        return self

    def __exit__(self, *exc: object) -> None:
        logging.getLogger(self.LOGGER).removeHandler(self)


def _http_refusal(
    failure: DiscoveryFailed,
    status: int,
    target: Target,
    context: str = "",
    *,
    challenge: str = "",
) -> DiscoveryFailed:
    """A request was refused with ``status`` for a reason the deprecated transport would not
    fix (the initialize POST's status says so, or the handshake had succeeded), or the
    deprecated transport's GET was: say so in HTTP's terms, with whatever the server said
    of it (and ``context``, why that request was made; ``challenge``, a 401's
    WWW-Authenticate)."""
    oauth = _oauth_challenge(challenge) if status == 401 else {}
    if oauth.get("error") and target.headers:
        said = oauth["error"] + (
            f": {oauth['error_description']}" if oauth.get("error_description") else ""
        )
        hint = (
            f"the credential the reference names was refused (the server says "
            f"{_short(said, 300)}): check its value; an OAuth access token expires and is "
            "renewed outside FieldOps"
        )
    elif "resource_metadata" in oauth and not target.headers:
        hint = (
            "the server asks for an OAuth access token (its WWW-Authenticate names its "
            f"protected resource metadata at {_short(oauth['resource_metadata'], 200)}); "
            "discovery runs no OAuth authorization flow: obtain an access token for this "
            "server from its authorization server and register the server with a credential "
            "reference (env:FIELDOPS_MCP_TOKEN_<NAME>) holding it"
        )
    elif status == 421 or (status == 403 and "Invalid Host" in failure.said):
        # 421 from the Python SDK; 403 "Invalid Host: ..." from the TypeScript SDK.
        host = httpx2.URL(target.url).netloc.decode("ascii", "replace")
        hint = (
            f"it does not serve the host this URL names ({_short(host, 100)}): its DNS "
            "rebinding protection allows other Host headers (often localhost only); add this "
            "host to the server's allowed hosts, or register a URL with a host it allows"
        )
    elif status in (401, 403, 407):
        hint = (
            "the credential the reference names was refused: check its value"
            if target.headers
            else "if it needs a credential, register the server with a credential reference"
        )
    elif status in (408, 429):
        hint = "it is busy or slow: discover again later"
    elif status == 404 and failure.stage != HANDSHAKE:
        hint = (
            "it no longer knows the session it opened at the handshake (Mcp-Session-Id): "
            "it restarted, expired the session, or runs replicas that share no sessions; "
            "discover again, or route its sessions to one replica"
        )
    else:
        hint = "the server failed: see its logs"
    return DiscoveryFailed(
        "http_error",
        f"the server answered {failure.stage or 'the handshake'} with HTTP {status} "
        f"({_reason(status)}){_said(failure)}; {hint}{f' ({context})' if context else ''}; "
        "nothing was stored",
        stage=failure.stage,
    )


# One auth-param of a WWW-Authenticate challenge (RFC 9110 §11.2): a token, or a quoted string.
_AUTH_PARAM = re.compile(r'([A-Za-z0-9_-]+)\s*=\s*(?:"((?:[^"\\]|\\.)*)"|([^\s,]+))')


def _oauth_challenge(header: str) -> dict[str, str]:
    """The parameters of a ``Bearer`` challenge (``resource_metadata``, MCP's pointer to the
    server's RFC 9728 metadata; ``error``, ``error_description`` of RFC 6750), or {} when
    the header has none. Untrusted text: quoted in a message, never fetched."""
    if not header.strip().lower().startswith("bearer"):
        return {}
    params: dict[str, str] = {}
    for match in _AUTH_PARAM.finditer(header.strip()[6:]):
        value = match.group(2) if match.group(2) is not None else match.group(3)
        params.setdefault(match.group(1).lower(), re.sub(r"\\(.)", r"\1", value))
    return params


def _mcp_content(wire: _Wire) -> bool:
    return wire.content_type in ("application/json", "text/event-stream")


def _not_an_endpoint(failure: DiscoveryFailed, wire: _Wire) -> DiscoveryFailed:
    """The initialize POST was answered 2xx with something else than MCP (a web app's page)."""
    return DiscoveryFailed(
        "not_mcp",
        f"the URL is not an MCP endpoint: a Streamable HTTP initialize POST was answered with "
        f"HTTP {wire.status} ({wire.content_type or 'no content type'}), not MCP JSON-RPC "
        "(application/json or text/event-stream). Is the URL the server's MCP endpoint (often "
        "…/mcp, or …/sse for older servers)? Nothing was stored",
        stage=failure.stage,
    )


def _neither(
    first: DiscoveryFailed, status: int, second: DiscoveryFailed, legacy: _Wire, target: Target
) -> DiscoveryFailed:
    """Neither transport answered. When the legacy GET was refused for a reason of its own
    (a credential, a busy or failing server), say that. When it did not open an event
    stream otherwise, the URL is not an MCP endpoint of either kind: say what each
    transport got. When it did, this is a legacy server that failed later: its failure,
    and why that transport was tried."""
    why = (
        f"tried because a Streamable HTTP initialize POST was answered with HTTP {status} "
        f"({_reason(status)}){_said(first)}"
    )
    refused = legacy.status
    if refused is not None and (refused in NOT_A_TRANSPORT_ANSWER or refused >= 500):
        stage = "the deprecated HTTP+SSE transport's GET"
        failure = _http_refusal(
            DiscoveryFailed(second.code, "", stage=stage),
            refused,
            target,
            why,
            challenge=legacy.challenge,
        )
        failure.stage = first.stage
        return failure
    if legacy.content_type != "text/event-stream":
        got = legacy.answer() if legacy.status is not None else second.message
        return DiscoveryFailed(
            "http_error",
            f"the URL is not an MCP endpoint: a Streamable HTTP initialize POST was answered "
            f"with HTTP {status} ({_reason(status)}){_said(first)}, and a GET for the "
            f"deprecated HTTP+SSE transport with {_short(got, 200)}. Is the URL the server's "
            "MCP endpoint (often …/mcp, or …/sse for older servers)? Nothing was stored",
            stage=first.stage,
        )
    second.message = f"{second.message} (over the deprecated HTTP+SSE transport, {why})"
    return second


# What the SDK reports for an HTTP error without a JSON-RPC error in its body: the status
# stands in for it, and says more.
_SDK_STAND_INS = ("Server returned an error response", "Not Found", "Session terminated")


def _said(failure: DiscoveryFailed) -> str:
    """``: <the server's own JSON-RPC error>`` when the HTTP error carried one, else ""."""
    if not failure.said or any(s in failure.said for s in _SDK_STAND_INS):
        return ""
    return f": {failure.said}"


def _reason(status: int) -> str:
    try:
        return HTTPStatus(status).phrase
    except ValueError:
        return "unknown status"


class _StderrTail:
    """The server's stderr: a pipe that a thread drains, keeping only its last bytes.

    Never a file: a server may write gigabytes to stderr before the deadline stops it.
    """

    KEEP = 4 * STDERR_TAIL

    def __init__(self) -> None:
        read, write = os.pipe()
        self._read = read
        self.file: IO[str] = os.fdopen(write, "w", encoding="utf-8", errors="replace")
        self._kept = b""
        self._drainer = threading.Thread(target=self._drain, daemon=True, name="mcp-stderr")
        self._drainer.start()

    def _drain(self) -> None:
        try:
            while chunk := os.read(self._read, 65536):
                self._kept = (self._kept + chunk)[-self.KEEP :]
        finally:
            os.close(self._read)

    def fileno(self) -> int:
        return self.file.fileno()

    def tail(self) -> str:
        """The last of what the server wrote (call once it was stopped), ending with its
        last words: "…" and the end of it when it wrote more."""
        with contextlib.suppress(OSError):
            self.file.close()
        # A process the server started may still hold the pipe: wait a little, no more.
        self._drainer.join(timeout=1.0)
        text = " ".join(self._kept.decode("utf-8", "replace").split())
        return text if len(text) <= STDERR_TAIL else "…" + text[-(STDERR_TAIL - 1) :]

    def __enter__(self) -> _StderrTail:
        return self

    def __exit__(self, *exc: object) -> None:
        with contextlib.suppress(OSError):
            self.file.close()


def fetch_tools(target: Target, limits: Limits) -> Fetched:
    """List every tool of ``target`` within ``limits``; raise DiscoveryFailed otherwise.

    Runs the SDK's event loop in a thread of its own (see the module docstring).
    """
    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="mcp-discovery") as pool:
        return pool.submit(asyncio.run, _run(target, limits)).result()
