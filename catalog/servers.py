"""Tool servers: register one, discover its tools live, and record what changed.

``tool_server_discover`` is the sync shell around ``catalog.mcp_client`` (the SDK runs in
its own thread and event loop; no ORM call happens inside it) and
``catalog.services.candidates_record`` (one transaction). It never stores anything
half-way: a failure records one ``Discovery`` row with its code and message, and no
candidate, sighting or drift. Discovery never admits: candidates are DISCOVERED only.

Registration rules:
- stdio commands run on this host, so only commands named in
  ``settings.FIELDOPS_MCP_STDIO_COMMANDS`` may be registered (a catalog admin cannot make
  the web process run an arbitrary program); arguments are split like a shell would,
  but no shell runs them;
- an HTTP server is a plain ``http(s)`` URL without user info; its credential is a
  *reference* (``env:FIELDOPS_MCP_TOKEN_<NAME>``: only variables with that prefix, so no
  other secret of the process can be sent), resolved at connect time and never stored,
  shown or logged;
- a stdio server gets no variable of this process's environment beyond the SDK's minimal
  set, except the *environment entries* it is registered with: ``NAME=env:FIELDOPS_MCP_ENV_<X>``
  (or ``env:FIELDOPS_MCP_TOKEN_<X>``), each a reference read when the server is started and
  never stored, shown or logged; names are POSIX names, and none that would let the value
  steer the loader, an interpreter, a launcher or the server's TLS (``LD_PRELOAD``,
  ``PYTHONPATH``, ``NODE_OPTIONS``, ``PATH`` ...).
"""

from __future__ import annotations

import datetime as dt
import os
import re
import shlex
import sys
import time
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from django.conf import settings
from django.db import IntegrityError, transaction
from django.utils import timezone

from catalog import mcp_client, schemas
from catalog.domain import discovery
from catalog.domain.lifecycle import Refusal
from catalog.models import Discovery, DiscoveryOutcome, ToolServer, ToolSighting, Transport
from catalog.services import candidates_record, reviewer_ref
from fieldops.secrets import redact

SERVER_NAME = re.compile(r"^[a-z0-9][a-z0-9-]{0,62}$")
# Only variables made for this purpose can be referenced: a reference to DATABASE_URL or
# SECRET_KEY would send that secret as a bearer token to a URL an admin typed.
CREDENTIAL_PREFIX = "FIELDOPS_MCP_TOKEN_"
CREDENTIAL_REF = re.compile(r"^env:FIELDOPS_MCP_TOKEN_[A-Z0-9_]{1,48}$")
MAX_ARGS = 40
MAX_ARG = 500
# Environment entries of a stdio server: NAME=env:FIELDOPS_MCP_ENV_<X>, one a line.
ENV_PREFIX = "FIELDOPS_MCP_ENV_"
ENV_REF = re.compile(r"^env:(FIELDOPS_MCP_ENV_|FIELDOPS_MCP_TOKEN_)[A-Z0-9_]{1,48}$")
ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,63}$")
MAX_ENV = 16
MAX_ENV_TEXT = 2000
# Names a value could steer the child with, whatever the value is: the dynamic loader, an
# interpreter or launcher's start-up (code run before the server's own), where programs
# are found, the shell's start-up, TLS trust and proxies (where the key is sent), and the
# variables the SDK already sets from this host (HOME, PATH ...). Compared in upper case.
ENV_FORBIDDEN = frozenset(
    {
        "PATH",
        "HOME",
        "LOGNAME",
        "SHELL",
        "TERM",
        "USER",
        "IFS",
        "ENV",
        "BASH_ENV",
        "SHELLOPTS",
        "BASHOPTS",
        "PS4",
        "CDPATH",
        "TMPDIR",
        "GCONV_PATH",
        "GETCONF_DIR",
        "GLIBC_TUNABLES",
        "HOSTALIASES",
        "LOCPATH",
        "NLSPATH",
        "RESOLV_HOST_CONF",
        "CLASSPATH",
        "JAVA_TOOL_OPTIONS",
        "_JAVA_OPTIONS",
        "JDK_JAVA_OPTIONS",
        "PERL5LIB",
        "PERL5OPT",
        "PERLLIB",
        "PERL5DB",
        "RUBYOPT",
        "RUBYLIB",
        "GEM_HOME",
        "GEM_PATH",
        "BUNDLE_GEMFILE",
        "SSL_CERT_FILE",
        "SSL_CERT_DIR",
        "REQUESTS_CA_BUNDLE",
        "CURL_CA_BUNDLE",
        "HTTP_PROXY",
        "HTTPS_PROXY",
        "ALL_PROXY",
        "NO_PROXY",
        "FTP_PROXY",
        "XDG_CONFIG_HOME",
        "XDG_DATA_HOME",
        "XDG_CACHE_HOME",
        "EDITOR",
        "VISUAL",
        "PAGER",
    }
)
ENV_FORBIDDEN_PREFIXES = (
    "LD_",  # LD_PRELOAD, LD_LIBRARY_PATH, LD_AUDIT ...
    "DYLD_",
    "MALLOC_",
    "PYTHON",  # PYTHONPATH, PYTHONSTARTUP, PYTHONHOME, PYTHONINSPECT ...
    "NODE_",  # NODE_OPTIONS, NODE_PATH, NODE_EXTRA_CA_CERTS, NODE_TLS_REJECT_UNAUTHORIZED
    "NPM_CONFIG_",  # npx reads npm_config_node_options, npm_config_registry ...
    "YARN_",
    "BUN_",
    "DENO_",
    "COREPACK_",
    "UV_",  # uvx: UV_INDEX_URL, UV_PYTHON ...
    "PIP_",
    "PIPX_",
    "VIRTUAL_ENV",
    "CONDA",
    "GIT_",  # GIT_SSH_COMMAND, GIT_CONFIG_* (mcp-server-git runs git)
    "SSH_",
    "GNUPG",
    "LC_",
    "LANG",
    "FIELDOPS_",  # this process's own settings are not the child's to have
)
TRIGGERS = ("manual", "schedule", "command")


def allowed_commands() -> list[str]:
    raw = getattr(settings, "FIELDOPS_MCP_STDIO_COMMANDS", [])
    return [c for c in raw if c]


def _clean_command(command: str) -> str:
    command = (command or "").strip()
    if not command:
        raise Refusal("command_required", "a stdio server needs the command that starts it")
    allowed = allowed_commands()
    if command not in allowed:
        listed = ", ".join(allowed) if allowed else "none are configured"
        raise Refusal(
            "command_not_allowed",
            f"{command[:80]!r} is not an allowed stdio server command on this host "
            f"(FIELDOPS_MCP_STDIO_COMMANDS: {listed})",
        )
    return command


def _clean_args(args_text: str) -> list[str]:
    try:
        args = shlex.split(args_text or "")
    except ValueError as exc:
        raise Refusal("bad_arguments", f"the arguments cannot be split: {exc}") from None
    if len(args) > MAX_ARGS or any(len(a) > MAX_ARG or "\x00" in a for a in args):
        raise Refusal(
            "bad_arguments", f"at most {MAX_ARGS} arguments of at most {MAX_ARG} characters"
        )
    return args


def _clean_url(url: str) -> str:
    url = (url or "").strip()
    try:
        parts = urlsplit(url)
    except ValueError:
        parts = None
    if parts is None or parts.scheme not in ("http", "https") or not parts.hostname:
        raise Refusal("bad_url", "an HTTP server needs an http:// or https:// URL")
    if parts.username or parts.password:
        raise Refusal(
            "credential_in_url",
            "the URL carries user info: put the credential in the environment and give "
            "its reference (env:FIELDOPS_MCP_TOKEN_...) instead; credentials are never stored",
        )
    if len(url) > 500:
        raise Refusal("bad_url", "the URL is longer than 500 characters")
    return url


def _clean_credential_ref(ref: str) -> str:
    ref = (ref or "").strip()
    if ref and not CREDENTIAL_REF.match(ref):
        raise Refusal(
            "credential_ref_invalid",
            f"give a credential reference such as env:{CREDENTIAL_PREFIX}GITHUB (an "
            f"environment variable of this process whose name starts with {CREDENTIAL_PREFIX}), "
            "never the credential itself",
        )
    return ref


def _clean_env(env_text: str) -> dict[str, str]:
    """``NAME=env:FIELDOPS_MCP_ENV_<X>`` lines (blank lines skipped) as {NAME: reference}.

    A refusal names the line and the name, never what follows ``=`` when it is not a
    reference (it may be the secret itself, pasted)."""
    entries: dict[str, str] = {}
    if len(env_text or "") > MAX_ENV_TEXT:
        raise Refusal(
            "env_invalid",
            f"the environment entries are {len(env_text)} characters long, over the "
            f"{MAX_ENV_TEXT} allowed",
        )
    lines = [line.strip() for line in (env_text or "").splitlines()]
    lines = [(number, line) for number, line in enumerate(lines, 1) if line]
    if len(lines) > MAX_ENV:
        raise Refusal("env_invalid", f"at most {MAX_ENV} environment entries ({len(lines)} given)")
    for number, line in lines:
        name, equals, ref = (part.strip() for part in line.partition("="))
        if not equals:
            raise Refusal(
                "env_invalid",
                f"line {number} is not NAME=env:{ENV_PREFIX}<X> (one entry a line; the value "
                "is never given here, only the variable of this process that holds it)",
            )
        if not ENV_NAME.match(name):
            raise Refusal(
                "env_invalid",
                f"line {number}: {name[:64]!r} is not an environment variable name (a letter or _, "
                "then letters, digits and _, 64 at most)",
            )
        upper = name.upper()
        if upper in ENV_FORBIDDEN or upper.startswith(ENV_FORBIDDEN_PREFIXES):
            raise Refusal(
                "env_name_forbidden",
                f"line {number}: {name} may not be set for a server: it would let the value "
                "steer the loader, an interpreter or launcher, where programs are found, TLS "
                "or a proxy, or it is set from this host already; the server's own variables "
                "(an API key, a URL) are what entries are for",
            )
        if name in entries:
            raise Refusal("env_invalid", f"line {number}: {name} is given twice")
        if not ENV_REF.match(ref):
            raise Refusal(
                "env_ref_invalid",
                f"line {number}: the value of {name} must be a reference such as "
                f"env:{ENV_PREFIX}{upper[:40]} (an environment variable of this process whose "
                f"name starts with {ENV_PREFIX} or {CREDENTIAL_PREFIX}), never the value "
                "itself; what was typed after = is not repeated here and was not kept",
            )
        entries[name] = ref
    return entries


def env_text(entries: dict[str, str]) -> str:
    """The registration form's text of ``entries``, one ``NAME=reference`` a line."""
    return "\n".join(f"{name}={ref}" for name, ref in entries.items())


def env_text_as_kept(text: str) -> str:
    """What a refused form shows again of the entries typed: each line whose value is not a
    reference loses its value (it may be the secret itself, pasted by mistake)."""
    kept = []
    for line in (text or "").splitlines():
        name, equals, ref = line.partition("=")
        kept.append(line if not equals or ENV_REF.match(ref.strip()) else f"{name}=")
    return "\n".join(kept)


def tool_server_register(
    *,
    user: Any,
    name: str,
    transport: str,
    command: str = "",
    args_text: str = "",
    url: str = "",
    credential_ref: str = "",
    env_text: str = "",
    scheduled: bool = True,
) -> ToolServer:
    """Register a tool server; raise Refusal with a clear reason (nothing stored)."""
    name = (name or "").strip().lower()
    if not SERVER_NAME.match(name):
        raise Refusal(
            "bad_name", "name the server with lower-case letters, digits and - (63 at most)"
        )
    fields: dict[str, Any] = {"name": name, "transport": transport, "scheduled": scheduled}
    if transport == Transport.STDIO:
        fields.update(command=_clean_command(command), args=_clean_args(args_text))
        if credential_ref:
            raise Refusal(
                "credential_ref_stdio",
                "a stdio server gets no bearer credential: give the variable it reads as an "
                f"environment entry instead (e.g. API_KEY=env:{ENV_PREFIX}API_KEY)",
            )
        fields["env"] = _clean_env(env_text)
    elif transport == Transport.HTTP:
        fields.update(url=_clean_url(url), credential_ref=_clean_credential_ref(credential_ref))
        if (env_text or "").strip():
            raise Refusal(
                "env_http",
                "environment entries are for stdio servers, which this host starts; an HTTP "
                "server's credential is its credential reference",
            )
    else:
        raise Refusal("bad_transport", "choose stdio or HTTP")
    try:
        with transaction.atomic():
            return ToolServer.objects.create(created_by=user, **fields)
    except IntegrityError:
        raise Refusal("name_taken", f"a tool server named {name!r} is registered") from None


def _executable(command: str) -> str:
    """A bare name is looked up beside the Python executable first (the project's venv
    installs the reference servers there), then on PATH (by the SDK)."""
    if "/" not in command:
        beside = Path(sys.executable).parent / command
        if beside.is_file():
            return str(beside)
    return command


def limits_from_settings() -> mcp_client.Limits:
    return mcp_client.Limits(
        timeout_seconds=float(getattr(settings, "FIELDOPS_DISCOVERY_TIMEOUT_SECONDS", 20.0))
    )


def _target(server: ToolServer) -> mcp_client.Target:
    if server.transport == Transport.STDIO:
        # Re-checked at every run: a command removed from the allow-list stops running.
        command = _executable(_clean_command(server.command))
        # Checked again at every run too: a rule tightened since registration applies.
        entries = _clean_env(env_text(server.env or {}))
        return mcp_client.Target(
            "stdio", command=command, args=tuple(server.args), env=_resolved(entries)
        )
    headers: dict[str, str] = {}
    if server.credential_ref:
        variable = server.credential_ref.removeprefix("env:")
        value = os.environ.get(variable, "")
        if not value:
            raise mcp_client.DiscoveryFailed(
                "credential_missing",
                f"the credential reference {server.credential_ref} names no variable set "
                "in this process's environment",
                stage="resolving the credential",
            )
        headers["Authorization"] = f"Bearer {value}"
    return mcp_client.Target("http", url=server.url, headers=headers)


def _resolved(entries: dict[str, str]) -> dict[str, str]:
    """The values of a stdio server's environment entries, read now from this process's
    environment; a reference naming no set variable is ``credential_missing`` (the message
    names the reference, never a value)."""
    values: dict[str, str] = {}
    for name, ref in entries.items():
        value = os.environ.get(ref.removeprefix("env:"), "")
        if not value:
            raise mcp_client.DiscoveryFailed(
                "credential_missing",
                f"the environment entry {name}={ref} names no variable set in this process's "
                f"environment: set {ref.removeprefix('env:')} where FieldOps runs (the web "
                "process and the worker) and discover again; the server was not started",
                stage="resolving the server's environment",
            )
        values[name] = value
    return values


def target_secrets(target: mcp_client.Target) -> dict[str, str]:
    """Every value a target carries that must never be stored, by what it is: its bearer
    credential and the values of its environment entries. Longest first: a value inside
    another is redacted with it."""
    found = {
        f"the value of its environment entry {name}": value for name, value in target.env.items()
    }
    bearer = target.headers.get("Authorization", "").removeprefix("Bearer ")
    if bearer:
        found["its credential"] = bearer
    return dict(sorted(found.items(), key=lambda item: len(item[1]), reverse=True))


# A value this short is looked for in a server's answer no more: it would be found by chance.
ECHO_MIN = 8


def _echoed(data: Any, value: str) -> bool:
    if isinstance(data, str):
        return value in data
    if isinstance(data, dict):
        return any(_echoed(k, value) or _echoed(v, value) for k, v in data.items())
    if isinstance(data, list | tuple):
        return any(_echoed(item, value) for item in data)
    return False


def _failed(
    server: ToolServer,
    *,
    user: Any,
    trigger: str,
    code: str,
    message: str,
    stage: str = "",
    stderr: str = "",
    summary: dict[str, Any] | None = None,
    fetched: mcp_client.Fetched | None = None,
    secrets: tuple[str, ...] = (),
    seconds: float = 0.0,
    started_at: dt.datetime | None = None,
    pending: Discovery | None = None,
) -> Discovery:
    def clean(text: str, limit: int) -> str:
        # The server's own words (its error, its stderr) are untrusted: storable, redacted.
        text = redact(discovery.storable_text(text))
        for secret in secrets:
            text = text.replace(secret, "[redacted]")
        return text[:limit]

    return _record(
        pending,
        server=server,
        trigger=trigger,
        requested_by=user,
        requested_ref=reviewer_ref(user) if user is not None else f"system:{trigger}",
        started_at=started_at or timezone.now(),
        finished_at=timezone.now(),
        outcome=DiscoveryOutcome.FAILED,
        code=code,
        message=clean(message, 2000),
        stderr=clean(stderr, 1000),
        identity={**(fetched.identity if fetched else {}), "stage": stage},
        pages=fetched.pages if fetched else 0,
        tools_listed=len(fetched.tools) if fetched else 0,
        wire_bytes=fetched.bytes if fetched else 0,
        seconds=round(fetched.seconds if fetched else seconds, 3),
        summary=summary or {},
    )


def _record(pending: Discovery | None, **fields: Any) -> Discovery:
    """Write a discovery's outcome: into its running record when one was requested ahead
    (``discovery_request``) and is still running, else as a new record. A record closed
    meanwhile (as lost: its worker was paused past the deadline) keeps what it said."""
    with transaction.atomic():
        if pending is None or not (
            Discovery.objects.select_for_update()
            .filter(pk=pending.pk, outcome=DiscoveryOutcome.RUNNING)
            .exists()
        ):
            return Discovery.objects.create(**fields)
        for name, value in fields.items():
            setattr(pending, name, value)
        pending.save()
        return pending


# A running discovery is over within its deadline; one still running this long after it
# started lost the process that ran it (killed, restarted): it is closed as such.
LOST_GRACE_SECONDS = 60


def lost_after() -> dt.timedelta:
    return dt.timedelta(seconds=limits_from_settings().timeout_seconds + LOST_GRACE_SECONDS)


def is_lost(run: Discovery) -> bool:
    """Whether ``run`` is still recorded as running though nothing can be running it."""
    return run.outcome == DiscoveryOutcome.RUNNING and timezone.now() - run.started_at > (
        lost_after()
    )


def discovery_request(*, server_id: int, user: Any) -> tuple[Discovery, bool]:
    """Record that ``user`` asked to discover ``server_id`` now (Discover now), for a worker
    to carry out (``discovery_continue``); return the running record and whether it is new.

    One at a time per server: while a discovery of it still runs, asking again returns that
    one (a double click, a second admin). A running record older than its deadline lost its
    process and is closed as failed (``worker_lost``) first. Raise Refusal for an unknown
    server.
    """
    with transaction.atomic():
        server = ToolServer.objects.select_for_update().filter(pk=server_id).first()
        if server is None:
            raise Refusal("unknown_server", "no such tool server")
        running = Discovery.objects.filter(server=server, outcome=DiscoveryOutcome.RUNNING)
        running.filter(started_at__lt=timezone.now() - lost_after()).update(
            outcome=DiscoveryOutcome.FAILED,
            code="worker_lost",
            message=(
                "the process running this discovery stopped before it ended (restarted or "
                "killed); nothing of it was stored: discover again"
            ),
            finished_at=timezone.now(),
        )
        live = running.order_by("-started_at").first()
        if live is not None:
            return live, False
        return (
            Discovery.objects.create(
                server=server,
                trigger="manual",
                requested_by=user,
                requested_ref=reviewer_ref(user),
            ),
            True,
        )


def discovery_not_handed_over(run: Discovery) -> None:
    """Close ``run`` as failed: the task queue did not take it (nothing was discovered)."""
    Discovery.objects.filter(pk=run.pk, outcome=DiscoveryOutcome.RUNNING).update(
        outcome=DiscoveryOutcome.FAILED,
        code="not_handed_over",
        message=(
            "the task queue did not take this discovery (is the broker up?); nothing was "
            "discovered or stored: try again"
        ),
        finished_at=timezone.now(),
    )


def discovery_continue(
    *, discovery_id: int, limits: mcp_client.Limits | None = None
) -> Discovery | None:
    """Carry out the discovery ``discovery_request`` recorded; return its outcome, or None
    when it is no longer running (done by another delivery, closed as lost, deleted)."""
    pending = (
        Discovery.objects.select_related("requested_by")
        .filter(pk=discovery_id, outcome=DiscoveryOutcome.RUNNING)
        .first()
    )
    if pending is None or is_lost(pending):
        return None
    return tool_server_discover(
        server_id=pending.server_id,
        user=pending.requested_by,
        trigger=pending.trigger,
        limits=limits,
        pending=pending,
    )


def tool_server_discover(
    *,
    server_id: int,
    user: Any = None,
    trigger: str = "manual",
    limits: mcp_client.Limits | None = None,
    pending: Discovery | None = None,
) -> Discovery:
    """Discover every tool of one registered server now and record the outcome.

    Return the Discovery record: ``ok`` with a summary (created, unchanged, changed,
    gone, refused, paused), or ``failed`` with a code and message and nothing else stored.
    ``pending``: the running record an earlier request wrote (``discovery_request``), which
    the outcome fills in; without one a new record is written. Raise Refusal for an
    unknown server.
    """
    if trigger not in TRIGGERS:
        raise ValueError(f"unknown trigger {trigger!r}")
    server = ToolServer.objects.filter(pk=server_id).first()
    if server is None:
        raise Refusal("unknown_server", "no such tool server")
    limits = limits or limits_from_settings()
    secrets: dict[str, str] = {}
    began, started = (pending.started_at if pending else timezone.now()), time.monotonic()
    try:
        target = _target(server)
        secrets = target_secrets(target)
        fetched = mcp_client.fetch_tools(target, limits)
    except Refusal as exc:
        return _failed(
            server,
            user=user,
            trigger=trigger,
            code=exc.code,
            message=exc.message,
            started_at=began,
            pending=pending,
        )
    except mcp_client.DiscoveryFailed as exc:
        # A failure says how long it took (a timeout waited out the whole deadline).
        return _failed(
            server,
            user=user,
            trigger=trigger,
            code=exc.code,
            message=exc.message,
            stage=exc.stage,
            stderr=exc.stderr,
            secrets=tuple(secrets.values()),
            seconds=time.monotonic() - started,
            started_at=began,
            pending=pending,
        )
    for what, value in secrets.items():
        if len(value) >= ECHO_MIN and _echoed([fetched.identity, fetched.tools], value):
            # Definitions are stored verbatim (their digest names them): a secret in one
            # cannot be cut out, so nothing of this answer is stored.
            return _failed(
                server,
                user=user,
                trigger=trigger,
                code="secret_echoed",
                message=(
                    f"the server's answer (its identity or a tool definition) holds {what}, "
                    "which is never stored: nothing of it was stored; a server that writes "
                    "its key into what it serves cannot be discovered"
                ),
                stage="checking the answer",
                seconds=fetched.seconds,
                started_at=began,
                pending=pending,
            )
    try:
        listing = discovery.parse_tools(fetched.tools, schema_check=schemas.meta_problem)
    except discovery.ImportRefused as exc:
        if ToolSighting.objects.filter(server_label=server.name, gone_at=None).exists():
            # The server withdrew or spoiled every tool it served: a complete listing all
            # the same, recorded so that its drift pauses what was admitted from it.
            listing = discovery.parse_tools(
                fetched.tools, allow_none=True, schema_check=schemas.meta_problem
            )
        else:
            why = (
                "the server listed no tool the catalog can accept: " + "; ".join(exc.errors)
                if fetched.tools
                else "the server lists no tools (its tools/list is empty); nothing was stored"
            )
            if not mcp_client.offers_tools(fetched.identity):
                others = sorted(str(k) for k in fetched.identity.get("capabilities") or {})
                why = (
                    "the server offers no tools: it declares no tools capability (only "
                    f"{', '.join(others) or 'none'}) and answered tools/list with Method not "
                    "found; nothing was stored"
                )
            return _failed(
                server,
                user=user,
                trigger=trigger,
                code="refused_all",
                message=why,
                stage="checking the definitions",
                fetched=fetched,
                summary={"refused_errors": exc.errors},
                started_at=began,
                pending=pending,
            )
    identity = {**fetched.identity, "target": server.target_label[:300]}
    with transaction.atomic():
        # One recorder per server at a time: a scheduled and a manual discovery of the same
        # server must not both decide what is new.
        ToolServer.objects.select_for_update().filter(pk=server.pk).first()
        run = _record(
            pending,
            server=server,
            trigger=trigger,
            requested_by=user,
            requested_ref=reviewer_ref(user) if user is not None else f"system:{trigger}",
            started_at=began,
            outcome=DiscoveryOutcome.OK,
            identity=identity,
            pages=fetched.pages,
            tools_listed=len(fetched.tools),
            wire_bytes=fetched.bytes,
            seconds=round(fetched.seconds, 3),
        )
        result = candidates_record(
            listing=listing,
            server_label=server.name,
            user=user,
            source=f"discovery #{run.pk} ({trigger})",
            tool_server=server,
            identity=identity,
            run=run,
            complete=True,
        )
        run.summary = result.summary()
        run.message = summary_sentence(result.summary())
        run.finished_at = timezone.now()
        run.save(update_fields=["summary", "message", "finished_at"])
    return run


def summary_sentence(summary: dict[str, Any]) -> str:
    parts = [
        f"{len(summary.get(key, []))} {label}"
        for key, label in (
            ("created", "new"),
            ("unchanged", "unchanged"),
            ("also_seen", "already known from elsewhere"),
            ("changed", "changed"),
            ("gone", "gone"),
            ("refused", "refused"),
        )
        if summary.get(key)
    ]
    text = ", ".join(parts) or "nothing listed"
    if summary.get("paused"):
        text += f"; {len(summary['paused'])} admitted mapping(s) paused"
    return text + "."


def tool_servers_rediscover(*, trigger: str = "schedule") -> list[Discovery]:
    """Discover every scheduled server once, one after the other (the command's --all)."""
    return [
        tool_server_discover(server_id=pk, trigger=trigger)
        for pk in ToolServer.objects.filter(scheduled=True).values_list("pk", flat=True)
    ]
