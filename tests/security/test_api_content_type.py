"""The JSON API reads a body only when it is declared JSON (round three, 2026-12-07).

Before, ``POST /api/v1/runs`` with ``Content-Type: text/plain`` (or a form's type, or none)
parsed the body as JSON anyway and started the run: a browser can send text/plain across
origins without a preflight, and a client that forgot the header worked by accident. Now
a body whose Content-Type is not ``application/json`` (or a ``+json`` type), with or
without ``charset=utf-8``, is a 415 in the API's error shape that says what to send, and
nothing changes.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from django.test import Client

from api.tokens import token_create
from tests.security.world import World, changed, snapshot

V1 = "/api/v1"
NOT_JSON = [
    "text/plain",
    "text/plain; charset=utf-8",
    "application/x-www-form-urlencoded",
    "multipart/form-data; boundary=b",
    "text/json",
    "application/jsonp",
    "application/+json",  # a suffix with no type before it
    "application/json; charset=latin-1",  # JSON is UTF-8 (RFC 8259)
    "",  # no type at all
]
JSON_TYPES = [
    "application/json",
    "application/json; charset=utf-8",
    "Application/JSON;charset=UTF-8",
    "application/vnd.fieldops+json",
]


def _posts(world: World) -> list[tuple[str, str, dict[str, Any]]]:
    """(principal, path, body) of every API route that reads a body, each valid as JSON."""
    checkpoint = world.checkpoint("approval")
    return [
        ("operator", "/runs", {"scenario": "reservation"}),
        ("operator", f"/runs/{world.runs['waiting']}/cancel", {"reason": "stop it"}),
        (
            "approver",
            f"/checkpoints/{checkpoint.pk}/decision",
            {"verdict": "approve", "seen_hash": checkpoint.proposal_hash, "reason": "ok"},
        ),
    ]


def _post(world: World, principal: str, path: str, body: bytes, content_type: str) -> Any:
    _, secret = token_create(user=world.users[principal], name="content-type")
    return Client().generic(
        "POST",
        V1 + path,
        body,
        content_type=content_type,
        HTTP_AUTHORIZATION=f"Bearer {secret}",
    )


@pytest.mark.parametrize("content_type", NOT_JSON)
def test_a_body_not_declared_json_is_a_415_that_says_what_to_send(
    sworld: World, content_type: str
) -> None:
    for principal, path, body in _posts(sworld):
        raw = json.dumps(body).encode()
        if content_type.startswith("application/x-www-form-urlencoded"):
            raw = b"&".join(f"{k}={v}".encode() for k, v in body.items())
        # The token is made first: its row is the test's, not the request's.
        _, secret = token_create(user=sworld.users[principal], name="content-type")
        before = snapshot()
        response = Client().generic(
            "POST", V1 + path, raw, content_type=content_type, HTTP_AUTHORIZATION=f"Bearer {secret}"
        )
        assert response.status_code == 415, (path, response.content[:300])
        assert response["Content-Type"].startswith("application/json")
        answer = response.json()
        assert answer["code"] == "unsupported_media_type"
        assert "Content-Type: application/json" in answer["message"]
        # Only the token's last use may be written (authentication comes first).
        differences = changed(before, snapshot())
        assert [d for d in differences if not d.startswith("api.ApiToken ")] == [], differences


def test_without_a_token_the_answer_is_still_the_401(sworld: World) -> None:
    # The type is checked after authentication: an anonymous caller learns nothing more.
    response = Client().post(V1 + "/runs", b'{"scenario": "reservation"}', "text/plain")
    assert response.status_code == 401


@pytest.mark.parametrize("content_type", JSON_TYPES)
def test_json_declared_in_any_usual_spelling_is_read(sworld: World, content_type: str) -> None:
    response = _post(sworld, "operator", "/runs", b'{"scenario": "reservation"}', content_type)
    assert response.status_code == 201, response.content[:300]


@pytest.mark.parametrize("encoding", ["utf-16", "utf-32", "utf-16-le"])
def test_a_json_body_that_is_not_utf8_is_refused_and_changes_nothing(
    sworld: World, encoding: str
) -> None:
    """Found over HTTP (2026-12-07): a cancel sent as UTF-16 under ``application/json``
    cancelled the run (Python's json guesses the encoding of bytes), while the same body
    declared ``charset=utf-16`` is a 415. JSON is UTF-8: the body is refused, nothing
    changes."""
    run = sworld.runs["waiting"]
    _, secret = token_create(user=sworld.users["operator"], name="utf-16")
    before = snapshot()
    response = Client().generic(
        "POST",
        f"{V1}/runs/{run}/cancel",
        json.dumps({"reason": "stop it"}).encode(encoding),
        content_type="application/json",
        HTTP_AUTHORIZATION=f"Bearer {secret}",
    )
    assert response.status_code == 400, response.content[:300]
    assert response.json()["code"] == "invalid_request"
    differences = changed(before, snapshot())
    assert [d for d in differences if not d.startswith("api.ApiToken ")] == [], differences


def test_a_utf8_body_with_a_byte_order_mark_is_read(sworld: World) -> None:
    # RFC 8259 lets a parser ignore the mark; some clients on Windows send it.
    body = b"\xef\xbb\xbf" + json.dumps({"scenario": "reservation"}).encode()
    response = _post(sworld, "operator", "/runs", body, "application/json")
    assert response.status_code == 201, response.content[:300]
