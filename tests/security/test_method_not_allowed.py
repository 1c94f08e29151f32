"""A request with a method an address does not serve (a GET to a POST-only action) is a
405 that keeps its ``Allow`` header and says which methods the address accepts: the
console's own page, the same for an HTMX request (as 400/403/404 are), and under the JSON
API the API's own error shape (``fieldops.middleware.MethodNotAllowedMiddleware``)."""

from __future__ import annotations

import json

import pytest
from django.test import Client
from django.urls import reverse

from tests.security.world import World

PAGE = "405 · Method not allowed"


def console_routes(world: World) -> dict[str, tuple[str, str, str]]:
    """label -> (method, path, the Allow header the view sends)."""
    waiting = world.runs["waiting"]
    operation = world.operations["operation"]
    version = world.versions["reviewed_candidate"]
    return {
        "run cancel": ("get", reverse("runs-cancel", args=[waiting]), "POST"),
        "approval decision": (
            "get",
            reverse("approvals-decide", args=[world.checkpoints["approval"]]),
            "POST",
        ),
        "operations move": ("get", reverse("operations-move", args=[operation, "pause"]), "POST"),
        "catalog decision": ("get", reverse("catalog-decide", args=[version]), "POST"),
        # The view answers the method itself (no decorator): the same page.
        "catalog import": ("put", reverse("catalog-import"), "GET, HEAD, POST"),
        # A console page although it lives under /api/.
        "new API token": ("get", reverse("api-tokens-create"), "POST"),
    }


@pytest.mark.parametrize(
    "label",
    [
        "run cancel",
        "approval decision",
        "operations move",
        "catalog decision",
        "catalog import",
        "new API token",
    ],
)
def test_a_console_address_answers_a_wrong_method_with_the_405_page(
    sworld: World, label: str
) -> None:
    method, path, allow = console_routes(sworld)[label]
    response = getattr(sworld.client("operator"), method)(path)
    assert response.status_code == 405
    assert response["Allow"] == allow
    assert response["Content-Type"].startswith("text/html")
    body = response.content.decode()
    assert PAGE in body
    accepts = "GET, HEAD and POST" if allow == "GET, HEAD, POST" else "POST"
    assert f"This address accepts {accepts} only" in body
    assert f"not a {method.upper()}" in body
    assert 'href="/"' in body  # the way back


def test_an_anonymous_get_of_an_action_gets_the_same_page(sworld: World) -> None:
    response = sworld.client("anonymous").get(reverse("runs-cancel", args=[sworld.runs["waiting"]]))
    assert response.status_code == 405
    assert response["Allow"] == "POST"
    assert PAGE in response.content.decode()


def test_an_htmx_request_gets_the_page_as_400_403_and_404_are_answered(sworld: World) -> None:
    """The console has no error fragment: an HTMX request gets the error page with its
    status, as the 400/403/404 pages are served (htmx swaps no 4xx; fieldops.js gives
    focus back to the control)."""
    client = sworld.client("operator")
    htmx = {"HX-Request": "true", "HX-Current-URL": "http://testserver/"}
    waiting = sworld.runs["waiting"]
    refused = client.get(reverse("runs-cancel", args=[waiting]), headers=htmx)
    assert refused.status_code == 405
    assert refused["Allow"] == "POST"
    assert not refused.has_header("HX-Redirect")
    assert PAGE in refused.content.decode()
    assert "This address accepts POST only" in refused.content.decode()
    # The reference: a 404 for an HTMX request is the whole 404 page too.
    missing = client.get("/no/such/page/", headers=htmx)
    assert missing.status_code == 404 and "<html" in missing.content.decode()
    assert "<html" in refused.content.decode()


def test_the_json_api_answers_a_wrong_method_in_its_error_shape(sworld: World) -> None:
    client = sworld.client("operator")
    run_cancel = client.get(f"/api/v1/runs/{sworld.runs['waiting']}/cancel")
    assert run_cancel.status_code == 405
    assert run_cancel["Allow"] == "POST"
    assert run_cancel["Content-Type"] == "application/json"
    assert run_cancel.json() == {
        "code": "method_not_allowed",
        "message": "This address accepts POST only, not GET.",
    }
    schema = client.post(reverse("api-v1-schema"))
    assert schema.status_code == 405
    assert schema["Allow"] == "GET, HEAD"
    assert schema.json()["code"] == "method_not_allowed"
    # An API client has no CSRF token: it got the console's HTML CSRF page instead.
    tokenless = Client(enforce_csrf_checks=True).post(reverse("api-v1-schema"))
    assert tokenless.status_code == 405 and tokenless["Allow"] == "GET, HEAD"
    assert tokenless.json()["code"] == "method_not_allowed"


def test_the_callback_endpoint_answers_a_wrong_method_in_its_error_shape(sworld: World) -> None:
    """The signed callback's errors say ``error`` (docs/callbacks.md), not ``code``."""
    response = sworld.client("anonymous").get(reverse("api-callback"))
    assert response.status_code == 405
    assert response["Allow"] == "POST"
    assert json.loads(response.content) == {
        "error": "method_not_allowed",
        "message": "This address accepts POST only, not GET.",
    }
