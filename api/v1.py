"""FieldOps API v1 (django-ninja): pending checkpoints, the exact proposal, decisions with
``seen_hash``, starting and cancelling runs, a run with its timeline.

django-ninja was chosen over Django REST Framework + drf-spectacular because the schema
comes straight from the typed signatures (pydantic, already installed with the MCP SDK),
it adds one small dependency instead of two large ones, and it keeps views as thin as the
console's: access check, one service call, the response.

Every route authenticates with a per-user bearer token and acts as that user: the same
roles, the same tenant, the same services (and so the same refusals and records) as the
console. Another tenant's ids are 404; a missing role is 403; bad input is 400.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import functools
import json
import logging
import sys
from collections.abc import Callable, Iterator
from typing import Annotated, Any, Literal
from uuid import UUID

from django.conf import settings
from django.core.exceptions import PermissionDenied, RequestDataTooBig
from django.db import transaction
from django.http import Http404, HttpRequest, HttpResponse
from django.http.request import RawPostDataException
from django.urls import reverse
from django.utils.text import capfirst
from ninja import Field, NinjaAPI, Router, Schema, Status
from ninja.errors import AuthenticationError, HttpError
from ninja.errors import ValidationError as NinjaValidationError
from ninja.parser import Parser
from ninja.security import HttpBearer
from pydantic import BeforeValidator, ConfigDict
from pydantic_core import PydanticCustomError

from access.objects import get_checkpoint_for_user, get_run_for_user
from access.roles import APPROVER, OPERATOR, principal_ref_of, require_role, tenant_of
from api.tokens import TOKEN_SHAPE, TokenExpired, token_authenticate, token_held
from approvals import domain as approval_domain
from approvals import selectors as approval_selectors
from approvals import services as approvals
from approvals.models import Checkpoint
from fieldops import db, points
from fieldops.http import declares_json
from kernel.canonical import RepeatedKey, object_without_repeated_keys, unstorable
from runs import services as runs
from runs.console import filters
from runs.domain.validation import delegated_locations
from runs.models import Event, Run
from runs.policies import DEFAULT_SCENARIO

logger = logging.getLogger("fieldops.api")


class TokenInQuery(Exception):
    """A request that carries an API token in its address instead of its header."""


class BearerToken(HttpBearer):
    def __call__(self, request: HttpRequest) -> Any:
        # A token in the address is refused even beside a good header: it is already in
        # the access logs, and answering 200 would teach the client that it works.
        if any(TOKEN_SHAPE.search(v) for _, values in request.GET.lists() for v in values):
            raise TokenInQuery
        # django-ninja's own __call__ logs the whole header under DEBUG when its scheme is
        # not "Bearer" (a token sent without the scheme would land in the log).
        scheme, _, token = request.headers.get("Authorization", "").partition(" ")
        if scheme.lower() != "bearer" or not token:
            return None
        return self.authenticate(request, token)

    def authenticate(self, request: HttpRequest, token: str) -> Any:
        row = token_authenticate(token)
        if row is None:
            return None
        request.user = row.user
        request.api_token_id = row.pk  # type: ignore[attr-defined]  # for token_still_held
        # A drill point: a revoke may land here, after the check and before the action.
        points.reach(AUTHENTICATED_POINT, str(row.pk))
        return row.user


# Drill points (fieldops.points; the run id argument is the token's id): authenticated,
# before the action's transaction; and inside it, the token's row held (token_still_held).
AUTHENTICATED_POINT = "api.token_authenticated"
HELD_POINT = "api.token_held"


@contextlib.contextmanager
def token_still_held(request: HttpRequest) -> Iterator[None]:
    """The transaction of an action that writes (start, cancel, decide): the request's
    token and its user are read again in it with a share lock (``api.tokens.token_held``)
    and the action is refused, as any unknown token, with nothing written when the token
    was revoked or the user deactivated since the request authenticated. A revoke or a
    deactivation waits for the action's commit: once it returned, no action with that
    token commits. The service's own transactions nest in
    this one (savepoints); its refusals that are recorded commit with it."""
    token_id = request.api_token_id  # type: ignore[attr-defined]
    with transaction.atomic():
        if not token_held(token_id):
            raise AuthenticationError
        points.reach(HELD_POINT, str(token_id))
        yield


class BodyRefused(ValueError):
    """A request body that is JSON but no input of the API (its message says why)."""


class NotJson(ValueError):
    """A request body whose Content-Type does not declare JSON (answered 415)."""


def _reject_constant(name: str) -> Any:
    raise BodyRefused(f"{name} is not JSON")


class StorableJsonParser(Parser):
    """Every body is one JSON object whose strings and numbers the database can store.

    The console's forms get the same rule from ``fieldops.middleware`` (NUL is a 400); a
    JSON body is parsed here, so a NUL or an unpaired surrogate in a reason or a seen hash
    is a 400 instead of a PostgreSQL error after the checks, and ``[]`` or ``null`` is
    not taken for an empty object (which would start a run with every default)."""

    def parse_body(self, request: HttpRequest) -> dict[str, Any]:
        # A body sent as text/plain or a form was read as JSON: a browser page of another
        # origin may send those without a preflight, and a client that forgot the header
        # worked by accident. The type is checked before the body is read.
        if not declares_json(request):
            raise NotJson(request.headers.get("Content-Type", ""))
        try:
            # Decoded here, as UTF-8 only: given bytes, Python's json guesses UTF-16 and
            # UTF-32 too. A leading byte order mark is ignored (RFC 8259 allows it).
            data = json.loads(
                request.body.decode("utf-8-sig"),
                parse_constant=_reject_constant,
                object_pairs_hook=object_without_repeated_keys,
            )
        except UnicodeDecodeError:
            raise BodyRefused("the body is not UTF-8 text") from None
        except json.JSONDecodeError as exc:
            raise BodyRefused(
                f"the body is not JSON ({exc.msg} at line {exc.lineno} column {exc.colno})"
            ) from None
        except RepeatedKey as exc:
            raise BodyRefused(str(exc)) from None
        except RecursionError:
            raise BodyRefused("the body nests objects or arrays too deeply") from None
        except BodyRefused:
            raise
        except ValueError:  # the only other one: an integer over Python's digit limit
            raise BodyRefused(
                f"a number has more than {sys.get_int_max_str_digits()} digits"
            ) from None
        if not isinstance(data, dict):
            raise BodyRefused("the body must be a JSON object")
        problem = unstorable(data)
        if problem:
            raise BodyRefused(problem)
        return data


api = NinjaAPI(
    title="FieldOps API",
    version="1",
    description="Exact approvals and governed runs for integrations. Authenticate with "
    "`Authorization: Bearer <token>` (create tokens in the console under API tokens; "
    "never in the query string). Every token expires: an expired one is a 401 "
    "`token_expired` naming when, an unknown or revoked one a 401 `unauthenticated`.",
    urls_namespace="api-v1",
    # The schema is served by api.urls (GET only) at /api/v1/schema/; no docs page (its
    # inline scripts would break the console's CSP).
    openapi_url=None,
    docs_url=None,
    auth=BearerToken(),
    parser=StorableJsonParser(),
)


class ErrorOut(Schema):
    code: str
    message: str


def _error(request: HttpRequest, status: int, code: str, message: str) -> HttpResponse:
    return api.create_response(request, {"code": code, "message": message}, status=status)


def _body_is_empty(request: HttpRequest) -> bool:
    try:
        return not request.body
    except RawPostDataException:  # a multipart body, read as a stream: not empty
        return False


@api.exception_handler(NinjaValidationError)
def _invalid(request: HttpRequest, exc: NinjaValidationError) -> HttpResponse:
    # django-ninja does not parse an empty body: the whole body is then a missing field
    # ("body.body: Field required"), which names no field a client sent.
    if request.method == "POST" and _body_is_empty(request):
        message = "The request body is empty: send a JSON object."
        return _error(request, 400, "invalid_request", message)
    where = "; ".join(
        f"{'.'.join(str(p) for p in e.get('loc', ()))}: {e.get('msg', 'invalid')}"
        for e in exc.errors[:5]
    )
    return _error(request, 400, "invalid_request", where or "invalid request")


@api.exception_handler(AuthenticationError)
def _unauthenticated(request: HttpRequest, exc: AuthenticationError) -> HttpResponse:
    response = _error(request, 401, "unauthenticated", "A valid API token is required.")
    response["WWW-Authenticate"] = "Bearer"  # RFC 6750: a 401 names the scheme it wants
    return response


@api.exception_handler(TokenExpired)
def _token_expired(request: HttpRequest, exc: TokenExpired) -> HttpResponse:
    # Only for a token whose secret is right: an unknown or revoked one stays
    # "unauthenticated", so the answer tells nothing to someone guessing.
    at = exc.expires_at.astimezone(dt.UTC).strftime("%Y-%m-%d %H:%M:%S UTC")
    response = _error(
        request,
        401,
        "token_expired",
        f"This API token expired at {at}; create a new one on the console's API tokens "
        "page (the expired one can be revoked there).",
    )
    response["WWW-Authenticate"] = 'Bearer error="invalid_token", error_description="expired"'
    return response


@api.exception_handler(TokenInQuery)
def _token_in_query(request: HttpRequest, exc: TokenInQuery) -> HttpResponse:
    response = _error(
        request,
        401,
        "token_in_query",
        "An API token is accepted only in the Authorization header (Authorization: Bearer "
        "<token>), never in the address: addresses are written to server and proxy logs. "
        "Consider this token exposed: revoke it and create a new one.",
    )
    response["WWW-Authenticate"] = "Bearer"
    return response


@api.exception_handler(PermissionDenied)
def _forbidden(request: HttpRequest, exc: PermissionDenied) -> HttpResponse:
    return _error(request, 403, "forbidden", str(exc) or "Not allowed.")


@api.exception_handler(Http404)
def _not_found(request: HttpRequest, exc: Http404) -> HttpResponse:
    return _error(request, 404, "not_found", "No such object.")


@api.exception_handler(RequestDataTooBig)
def _too_large(request: HttpRequest, exc: RequestDataTooBig) -> HttpResponse:
    # Raised by request.body before the parser runs; Django's own answer is an HTML page.
    limit = settings.DATA_UPLOAD_MAX_MEMORY_SIZE
    return _error(
        request,
        400,
        "request_too_large",
        f"The request body is larger than the {limit} bytes this API accepts.",
    )


def database_lost(request: HttpRequest, exc: BaseException) -> HttpResponse:
    """The connection to PostgreSQL broke under the request (a restart, a failover, a
    terminated backend): a JSON 503 the client can act on, not the console's HTML 500.
    Whether a write committed before the break is unknown, so the client reads again.

    A lock wait that gave up (``db.lock_wait_failed``: another transaction held what the
    request needed past lock_timeout, such as the Idempotency-Key of a stalled first
    request) is no lost connection: the statement that waited wrote nothing, and the
    answer is the 409 ``busy`` every refusal of a held run gives."""
    if db.lock_wait_failed(exc):
        logger.warning("lock wait gave up: %s %s", request.method, request.path)
        response = _error(
            request,
            409,
            "busy",
            "Another transaction holds what this request needs (a run, a checkpoint, this "
            "Idempotency-Key of a request still in progress); nothing of it was written. "
            "Try again in a few seconds.",
        )
        response["Retry-After"] = str(db.RETRY_AFTER_SECONDS)
        return response
    logger.warning("database connection lost: %s %s", request.method, request.path, exc_info=exc)
    response = _error(
        request,
        503,
        "database_unavailable",
        "The connection to the database was lost while answering; the request may or may "
        "not have taken effect: read the object again before you retry (a run start sent "
        "again with the same Idempotency-Key starts at most one run).",
    )
    response["Retry-After"] = str(db.RETRY_AFTER_SECONDS)
    return response


for _lost in db.CONNECTION_LOST:  # the console's 503 page shares the same detection
    api.add_exception_handler(_lost, database_lost)


@api.exception_handler(HttpError)
def _http_error(request: HttpRequest, exc: HttpError) -> HttpResponse:
    # django-ninja wraps every failure of the parser in "Cannot parse request body".
    if isinstance(exc.__cause__, NotJson):
        sent = str(exc.__cause__)
        how = f"as {sent[:80]!r}" if sent else "with no Content-Type"
        message = (
            "The request body must be JSON sent with Content-Type: application/json "
            f"(this one was sent {how}); nothing was changed."
        )
        return _error(request, 415, "unsupported_media_type", message)
    if isinstance(exc.__cause__, BodyRefused):
        message = f"Cannot parse request body: {exc.__cause__}"
        return _error(request, 400, "invalid_request", message)
    return _error(request, exc.status_code, "error", str(exc))


def _json_kind(value: Any) -> str:
    if isinstance(value, bool):
        return f"a boolean ({json.dumps(value)})"
    if isinstance(value, float):
        return f"a number with a decimal point ({json.dumps(value)})"
    if isinstance(value, str):
        return "a string"
    if value is None:
        return "null"
    return "an array" if isinstance(value, list) else "an object"


def _json_integer(value: Any) -> Any:
    """Admit a JSON integer only: pydantic's lax mode would take true, 1.0 and "1" as 1."""
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    raise PydanticCustomError(
        "json_integer", "must be a JSON integer, not {kind}", {"kind": _json_kind(value)}
    )


def _text_or_json_integer(value: Any) -> Any:
    """Admit a string or a JSON integer only (true is no integer, 1.0 is no string)."""
    if isinstance(value, str) or (isinstance(value, int) and not isinstance(value, bool)):
        return value
    raise PydanticCustomError(
        "text_or_json_integer",
        "must be a string or a JSON integer, not {kind}",
        {"kind": _json_kind(value)},
    )


# Every integer of a request body is one of these (tests/api/test_integers.py walks the
# schema): a boolean, a float and a numeric string are refused, never coerced.
JsonInt = Annotated[int, BeforeValidator(_json_integer)]
TextOrJsonInt = Annotated[str | int, BeforeValidator(_text_or_json_integer)]

# 503: the database connection was lost while answering (see database_lost).
ERRORS: dict[int, Any] = {
    400: ErrorOut,
    401: ErrorOut,
    403: ErrorOut,
    404: ErrorOut,
    503: ErrorOut,
}
# 415: a route that reads a body refuses one not declared JSON (StorableJsonParser).
BODY_ERRORS: dict[int, Any] = {**ERRORS, 415: ErrorOut}


# -- schemas ----------------------------------------------------------------------------
class CheckpointOut(Schema):
    id: str
    run_id: UUID
    kind: str
    status: str
    effect_summary: str
    question: str
    requested_by: str
    expires_at: dt.datetime
    quorum: int
    approvals: int
    url: str


class ApprovalOut(Schema):
    by: str
    seen_hash: str
    at: dt.datetime


class ProposalOut(CheckpointOut):
    proposal_hash: str
    canonical: dict[str, Any]
    evidence: list[dict[str, Any]]
    idempotency_note: str
    lost_response_note: str
    compensation_note: str
    data_crossing: list[str]
    eligibility: str
    approved_by: list[ApprovalOut]
    still_may: list[str]
    delegated_locations: list[str] = Field(
        description="The locations the run may use: the only ones a declining "
        "requested_change may name as location_id (any other is location_out_of_scope)."
    )


class BodyIn(Schema):
    """A request body: a field it does not name is refused (a misspelt field was ignored,
    so the request went ahead with the default the client meant to change)."""

    model_config = ConfigDict(extra="forbid")


class DecisionIn(BodyIn):
    verdict: Literal["approve", "decline"]
    seen_hash: str = Field(description="The proposal hash you reviewed (64 hex characters).")
    reason: str = Field(
        description=f"Why (required; at most {approval_domain.MAX_REASON_CHARS} characters)."
    )
    requested_change: dict[str, TextOrJsonInt] | None = Field(
        default=None,
        description="Decline only: proposal fields a new proposal should change "
        f"({', '.join(approval_domain.CHANGEABLE_FIELDS)}; each value at most "
        f"{approval_domain.MAX_CHANGE_VALUE_CHARS} characters; a location_id only one of "
        "the checkpoint's delegated_locations; a quantity a whole number from 1 to "
        f"{approval_domain.MAX_QUANTITY}).",
    )


class DecisionOut(Schema):
    recorded: bool
    counted: bool
    checkpoint_status: str
    approvals: int
    quorum: int


class RunIn(BodyIn):
    scenario: str = DEFAULT_SCENARIO
    equipment_id: str | None = Field(
        default=None, description="Your tenant's equipment (default: its first, as the console)."
    )
    location_id: str | None = None
    quantity: JsonInt = 1


class CancelIn(BodyIn):
    reason: str = Field(description=f"Why (required; at most {runs.REASON_MAX} characters).")


class EventOut(Schema):
    sequence: int
    type: str
    actor: str
    prev_state: str
    next_state: str
    reason_code: str
    occurred_at: str


class RunOut(Schema):
    id: UUID
    scenario: str
    state: str
    revision: int
    disposition: str
    terminal_reason: str
    waiting_checkpoint: str
    requested_by: str
    created_at: dt.datetime
    url: str


class RunDetailOut(RunOut):
    timeline: list[EventOut]


# -- helpers -----------------------------------------------------------------------------
def _tenant(request: HttpRequest) -> str:
    tenant = tenant_of(request.user)
    if not tenant:
        raise PermissionDenied("this user belongs to no tenant")
    return tenant


def _checkpoint_out(c: Checkpoint, approvals_count: int) -> dict[str, Any]:
    return {
        "id": c.pk,
        "run_id": c.run_id,
        "kind": c.kind,
        "status": c.status,
        "effect_summary": c.effect_summary,
        "question": c.question,
        "requested_by": c.requested_by_ref,
        "expires_at": c.expires_at,
        "quorum": c.quorum,
        "approvals": approvals_count,
        "url": reverse("approvals-detail", args=[c.pk]),
    }


def _run_out(run: Run) -> dict[str, Any]:
    return {
        "id": run.pk,
        "scenario": run.scenario,
        "state": run.state,
        "revision": run.revision,
        "disposition": run.disposition,
        "terminal_reason": run.terminal_reason,
        "waiting_checkpoint": run.waiting_checkpoint,
        "requested_by": run.principal_ref,
        "created_at": run.created_at,
        "url": reverse("runs-detail", args=[run.pk]),
    }


def _readable_checkpoint(request: HttpRequest, checkpoint_id: str) -> Checkpoint:
    checkpoint: Checkpoint = get_checkpoint_for_user(request.user, checkpoint_id)
    is_requester = principal_ref_of(request.user) == checkpoint.requested_by_ref
    if not (checkpoint.kind == Checkpoint.Kind.CLARIFICATION and is_requester):
        require_role(request.user, APPROVER)
    return checkpoint


# -- checkpoints -------------------------------------------------------------------------
checkpoints = Router(tags=["approvals"])


@checkpoints.get("", response={200: list[CheckpointOut], **ERRORS}, summary="Pending checkpoints")
def checkpoints_list(request: HttpRequest, world: str = "live", assigned: bool = False) -> Any:
    """Pending checkpoints of your tenant, soonest expiry first. ``world`` is one of live
    (default), faultlab, simulation, all; ``assigned=true`` keeps those you may decide."""
    require_role(request.user, APPROVER)
    if world not in filters.WORLDS:
        return Status(
            400, {"code": "invalid_world", "message": f"world is one of {list(filters.WORLDS)}"}
        )
    rows = approval_selectors.checkpoint_queue(
        tenant=_tenant(request),
        world=world,
        assigned_to=request.user if assigned else None,
    )
    return Status(200, [_checkpoint_out(c, getattr(c, "vote_count", 0)) for c in rows])


@checkpoints.get(
    "/{checkpoint_id}", response={200: ProposalOut, **ERRORS}, summary="The exact proposal"
)
def checkpoints_read(request: HttpRequest, checkpoint_id: str) -> Any:
    """Exactly what will be sent, the hash a decision must bind, who approved so far."""
    checkpoint = _readable_checkpoint(request, checkpoint_id)
    quorum = approval_selectors.quorum_view(checkpoint)
    return Status(
        200,
        {
            **_checkpoint_out(checkpoint, len(quorum.approved)),
            "proposal_hash": checkpoint.proposal_hash,
            "canonical": checkpoint.canonical,
            "evidence": checkpoint.evidence_view,
            "idempotency_note": checkpoint.idempotency_note,
            "lost_response_note": checkpoint.lost_response_note,
            "compensation_note": checkpoint.compensation_note,
            "data_crossing": checkpoint.data_crossing,
            "eligibility": checkpoint.eligibility.describe(),
            "approved_by": [
                {"by": v.by_ref, "seen_hash": v.seen_hash, "at": v.created_at}
                for v in quorum.approved
            ],
            "still_may": quorum.still_may,
            "delegated_locations": list(delegated_locations(checkpoint.run.scope)),
        },
    )


@checkpoints.post(
    "/{checkpoint_id}/decision",
    response={200: DecisionOut, 409: ErrorOut, **BODY_ERRORS},
    summary="Approve or decline exactly what you saw",
)
def checkpoints_decide(request: HttpRequest, checkpoint_id: str, body: DecisionIn) -> Any:
    """Decide with the ``seen_hash`` you reviewed. Refusals are recorded and answered with
    their code: 403 for authority (role, self-approval, eligibility), 409 for the
    checkpoint's state (changed proposal, expired, cancelled, quorum complete), 400 for
    input (reason required, too large, unknown field)."""
    with token_still_held(request):
        checkpoint = get_checkpoint_for_user(request.user, checkpoint_id)
        if approval_domain.approval_with_change(
            approve=body.verdict == "approve", change=body.requested_change
        ):
            # Dropping it would approve the proposal the client asked to change.
            return Status(
                400,
                {
                    "code": "invalid_request",
                    "message": "requested_change is for a decline only; an approval approves "
                    "the proposal as it stands. Decline with the change, or approve without it.",
                },
            )
        result = approvals.approval_decide(
            checkpoint_id=checkpoint.pk,
            user=request.user,
            approve=body.verdict == "approve",
            seen_hash=body.seen_hash,
            reason=body.reason,
            requested_change=body.requested_change if body.verdict == "decline" else None,
        )
        if not result.recorded:
            from approvals.views import CONFLICT_REFUSALS, FORBIDDEN_REFUSALS

            status = (
                403
                if result.refusal in FORBIDDEN_REFUSALS
                else 409
                if result.refusal in CONFLICT_REFUSALS
                else 400
            )
            return Status(status, {"code": result.refusal, "message": result.message})
        checkpoint.refresh_from_db()
        return Status(
            200,
            {
                "recorded": True,
                "counted": result.counted,
                "checkpoint_status": checkpoint.status,
                "approvals": checkpoint.votes.count(),
                "quorum": checkpoint.quorum,
            },
        )


# -- runs --------------------------------------------------------------------------------
runs_router = Router(tags=["runs"])


@runs_router.post(
    "", response={200: RunOut, 201: RunOut, 409: ErrorOut, **BODY_ERRORS}, summary="Start a run"
)
def runs_start(request: HttpRequest, body: RunIn) -> Any:
    """Start a run in the live world as yourself (operator role).

    With an ``Idempotency-Key`` header (1 to 64 printable ASCII characters) the request
    starts at most one run: the same key again answers 200 with the run the first request
    started (201); the key with a different body is a 409 ``idempotency_key_reused``."""
    with token_still_held(request):
        require_role(request.user, OPERATOR)
        create = {
            "scenario": body.scenario,
            "tenant": _tenant(request),
            "principal_ref": principal_ref_of(request.user),
            "requested_by": request.user,
            "equipment_id": body.equipment_id,
            "location_id": body.location_id,
            "quantity": body.quantity,
        }
        key = request.headers.get("Idempotency-Key")
        try:
            if key is None:
                return Status(201, _run_out(runs.run_create(**create)))
            started = runs.run_start_once(key=key, **create)
        except runs.RunInputError as exc:
            if exc.field == "start_key_reused":
                return Status(409, {"code": "idempotency_key_reused", "message": str(exc)})
            field = "idempotency_key" if exc.field == "start_key" else exc.field
            return Status(400, {"code": f"invalid_{field}", "message": str(exc)})
        return Status(201 if started.created else 200, _run_out(started.run))


@runs_router.get("/{run_id}", response={200: RunDetailOut, **ERRORS}, summary="A run")
def runs_read(request: HttpRequest, run_id: UUID) -> Any:
    """The run's state and its timeline (the latest 500 events, in order)."""
    run = get_run_for_user(request.user, run_id)
    events = list(
        Event.objects.filter(run=run)
        .order_by("-sequence")
        .values(
            "sequence", "type", "actor", "prev_state", "next_state", "reason_code", "occurred_at"
        )[:500]
    )
    events.reverse()
    return Status(200, {**_run_out(run), "timeline": events})


@runs_router.post(
    "/{run_id}/cancel",
    response={200: RunOut, 409: ErrorOut, **BODY_ERRORS},
    summary="Cancel a run",
)
def runs_cancel(request: HttpRequest, run_id: UUID, body: CancelIn) -> Any:
    """Cancel with a reason (operator role). 409 when the run has ended or is busy."""
    with token_still_held(request):
        run = get_run_for_user(request.user, run_id, OPERATOR)
        try:
            reason = runs.clean_reason(body.reason, what="a cancellation")
        except runs.RunInputError as exc:
            # Over the limit it is refused whole (input_too_large, as a decision's reason is);
            # empty or holding a bidirectional control character it is an invalid reason.
            too_long = len(body.reason.strip()) > runs.REASON_MAX
            code = "input_too_large" if too_long else "invalid_reason"
            return Status(400, {"code": code, "message": f"{capfirst(str(exc))}."})
        try:
            result = runs.run_cancel(
                run_id=str(run.pk), by_ref=principal_ref_of(request.user), reason=reason
            )
        except runs.RunInputError as exc:
            return Status(400, {"code": f"invalid_{exc.field}", "message": str(exc)})
        if result.refusal == "busy":
            # Held by another transaction (a stalled worker): its state does not forbid the
            # cancellation, and the same request a moment later may be recorded.
            message = (
                "The run is busy (another transaction holds it); nothing was recorded. "
                "Try again in a few seconds."
            )
            return Status(409, {"code": "busy", "message": message})
        if not result.applied:
            cancelled = runs.cancelled_by(run.pk)
            message = (
                f"The run was already cancelled by {cancelled}; this cancellation was not recorded."
                if cancelled
                else f"The run is {result.run.state} and cannot be cancelled now."
            )
            return Status(409, {"code": result.refusal or "not_cancellable", "message": message})
        return Status(200, _run_out(result.run))


api.add_router("/checkpoints", checkpoints)
api.add_router("/runs", runs_router)


def head_served_as_get(view: Callable[..., HttpResponse]) -> Callable[..., HttpResponse]:
    """Wrap one of the API's URL views so HEAD runs its GET operation (RFC 9110 §9.3.2).

    django-ninja matches an operation by method, so HEAD of a read was a 405. The GET
    operation answers instead, token checks included; the WSGI server (gunicorn, runserver)
    sends its status and headers without the body. A 405 names HEAD wherever it names GET.
    The schema still documents GET only."""

    @functools.wraps(view)
    def wrapped(request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        head = request.method == "HEAD"
        if head:
            request.method = "GET"
        try:
            response = view(request, *args, **kwargs)
        finally:
            if head:
                request.method = "HEAD"
        allowed = [m.strip() for m in response.get("Allow", "").split(",") if m.strip()]
        if "GET" in allowed and "HEAD" not in allowed:
            response["Allow"] = ", ".join(sorted([*allowed, "HEAD"]))
        return response

    return wrapped
