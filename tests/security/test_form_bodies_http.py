"""Undecodable form bodies over real HTTP, with a valid session and CSRF token.

Django's test client skips what a real server does after a view-level failure: its 400
and 500 handlers run the CSRF check, which parses ``request.POST`` again. A body that
failed to parse once then fails inside the handler and the server answers a bare
"A server error occurred". So these tests sign in through the login form of a live
server and post with the session's CSRF cookie and token, as a browser or script would.
"""

from __future__ import annotations

import http.client
import json
import re
import uuid
from typing import Any
from urllib.parse import urlencode, urlsplit

import pytest
from django.urls import reverse

from catalog.models import CapabilityVersion
from tests.conftest import make_user
from tests.security.routes import enumerate_routes
from tests.security.test_safe_defaults import CHARSET_BODIES
from tests.security.world import changed, snapshot

pytestmark = pytest.mark.django_db(transaction=True)

BAD_REQUEST_PAGE = "400 · Bad request"
TOOL_LIST = json.dumps(
    {
        "tools": [
            {
                "name": "remote_lookup",
                "description": "Looks a part up (remote).",
                "inputSchema": {"type": "object", "properties": {"q": {"type": "string"}}},
            }
        ]
    }
)
MULTIPART_IMPORT = (
    '--b\r\nContent-Disposition: form-data; name="server"\r\n\r\nmcp://x.invalid\r\n'
    f'--b\r\nContent-Disposition: form-data; name="tool_list"\r\n\r\n{TOOL_LIST}\r\n--b--\r\n'
)
IMPORT_BODIES = [
    *CHARSET_BODIES,
    # A real import, declared in a charset that is not UTF-8.
    (
        "application/x-www-form-urlencoded; charset=utf-16",
        urlencode({"server": "mcp://x.invalid", "tool_list": TOOL_LIST}).encode("utf-16"),
    ),
    ("multipart/form-data; boundary=b; charset=latin-1", MULTIPART_IMPORT.encode("latin-1")),
    ("multipart/form-data; boundary=b; charset=utf-16", MULTIPART_IMPORT.encode("utf-16")),
]


class Session:
    """One signed-in browser session against the live server, cookies kept by hand."""

    def __init__(self, base_url: str) -> None:
        parts = urlsplit(base_url)
        self.address = (parts.hostname or "127.0.0.1", parts.port or 80)
        self.cookies: dict[str, str] = {}

    def send(
        self, method: str, path: str, body: bytes = b"", headers: dict[str, str] | None = None
    ) -> tuple[int, str]:
        connection = http.client.HTTPConnection(*self.address, timeout=30)
        sent = dict(headers or {})
        if self.cookies:
            sent["Cookie"] = "; ".join(f"{k}={v}" for k, v in self.cookies.items())
        try:
            connection.request(method, path, body=body, headers=sent)
            response = connection.getresponse()
            content = response.read().decode("utf-8", "replace")
            for name, value in response.getheaders():
                if name.lower() == "set-cookie":
                    key, _, rest = value.partition("=")
                    self.cookies[key] = rest.split(";", 1)[0]
            return response.status, content
        finally:
            connection.close()

    def sign_in(self, username: str) -> None:
        self.send("GET", reverse("login"))
        form = {
            "csrfmiddlewaretoken": self.cookies["csrftoken"],
            "username": username,
            "password": f"pw-{username}",
        }
        status, _ = self.send(
            "POST",
            reverse("login"),
            urlencode(form).encode(),
            {"Content-Type": "application/x-www-form-urlencoded"},
        )
        assert status == 302 and "sessionid" in self.cookies, "the sign-in did not succeed"

    def post_form(self, path: str, body: bytes, content_type: str) -> tuple[int, str]:
        """POST with this session's CSRF cookie and its token in the header (as HTMX does)."""
        headers = {"Content-Type": content_type, "X-CSRFToken": self.cookies["csrftoken"]}
        return self.send("POST", path, body, headers)


@pytest.fixture
def admin_session(live_server: Any, world: None) -> Session:
    make_user("catalog-admin", "north", "catalog-admin")
    session = Session(live_server.url)
    session.sign_in("catalog-admin")
    return session


def test_a_utf8_import_over_http_imports(admin_session: Session) -> None:
    """The control: the same session, token and server do import a well-formed body."""
    status, page = admin_session.post_form(
        reverse("catalog-import"),
        urlencode({"server": "mcp://x.invalid", "tool_list": TOOL_LIST}).encode(),
        "application/x-www-form-urlencoded; charset=UTF-8",
    )
    assert status == 302, page[:300]  # to the import's result page
    assert CapabilityVersion.objects.filter(capability_id__contains="remote_lookup").exists()


@pytest.mark.parametrize("debug", [False, True], ids=["debug-off", "debug-on"])
@pytest.mark.parametrize(("content_type", "body"), IMPORT_BODIES)
def test_an_undecodable_import_body_is_the_400_page_and_imports_nothing(
    admin_session: Session, settings: Any, debug: bool, content_type: str, body: bytes
) -> None:
    settings.DEBUG = debug
    before = snapshot()
    status, page = admin_session.post_form(reverse("catalog-import"), body, content_type)
    assert status == 400, page[:300]
    assert BAD_REQUEST_PAGE in page
    assert changed(before, snapshot()) == []


def _url(pattern: str) -> str:
    """A path for ``pattern`` with a well-formed placeholder for every parameter."""
    values = {"int": "1", "uuid": str(uuid.UUID(int=1, version=4))}

    def fill(match: re.Match[str]) -> str:
        return values.get(match.group(1) or "str", "x")

    return "/" + re.sub(r"<(?:(\w+):)?\w+>", fill, pattern)


def test_every_form_route_refuses_an_undecodable_body_over_http(live_server: Any) -> None:
    """Every route that takes POST, parsed or not by a middleware before its view: a form
    body that is not UTF-8 is the 400 page (a CSRF-exempt endpoint reads its own body and
    refuses it in its own way), never a server error."""
    make_user("lead", "north", "operator", "approver", "catalog-admin")
    session = Session(live_server.url)
    session.sign_in("lead")
    content_type, body = CHARSET_BODIES[0]
    answers = {}
    for route in enumerate_routes():
        if route.pattern.startswith(("static/", "api/v1/")) or "<path:" in route.pattern:
            continue
        answers[route.pattern] = session.post_form(_url(route.pattern), body, content_type)
    assert len(answers) > 40
    errors = {p: s for p, (s, _) in answers.items() if s >= 500}
    assert errors == {}
    refused = {p for p, (s, page) in answers.items() if s == 400 and BAD_REQUEST_PAGE in page}
    # The signed callback is CSRF-exempt and authenticates before it reads anything;
    # /healthz and /metrics (read-only, CSRF-exempt) read no body: their own 405.
    assert set(answers) - refused == {"api/callbacks/", "healthz", "metrics"}
    for machine in ("healthz", "metrics"):
        status, page = answers[machine]
        assert status == 405 and "<html" not in page.lower(), (machine, status, page[:200])


def test_the_json_api_refuses_a_form_body_in_its_own_shape(live_server: Any) -> None:
    """The API is CSRF-exempt (bearer tokens); a body not declared JSON is a 415 in the
    API's error shape (tests/security/test_api_content_type.py), never parsed as a form."""
    from api.tokens import token_create

    user = make_user("operator", "north", "operator")
    token = token_create(user=user, name="forms")[1]
    session = Session(live_server.url)
    for content_type, body in CHARSET_BODIES:
        status, page = session.send(
            "POST",
            "/api/v1/runs",
            body,
            {"Content-Type": content_type, "Authorization": f"Bearer {token}"},
        )
        assert status == 415, page[:300]
        assert json.loads(page)["code"] == "unsupported_media_type"
