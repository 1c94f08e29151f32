"""An HTMX request that needs a sign-in navigates the whole page to the login page
(``HX-Redirect``) and comes back to the page the browser showed; it never receives the
login page to swap into a region, and never any data."""

from __future__ import annotations

from typing import Any

import pytest
from django.test import Client
from django.urls import reverse

pytestmark = pytest.mark.django_db

QUEUE_PAGE = "http://testserver/approvals/?kind=approval&world=live#queue"


def htmx_headers(current_url: str | None = QUEUE_PAGE) -> dict[str, str]:
    headers = {"HX-Request": "true", "HX-Target": "queue"}
    if current_url is not None:
        headers["HX-Current-URL"] = current_url
    return headers


def test_an_anonymous_poll_is_sent_to_the_login_page_and_back_to_the_page_it_was_on() -> None:
    response = Client().get(reverse("approvals-queue"), headers=htmx_headers())
    assert response.status_code == 200
    assert response["HX-Redirect"] == "/login/?next=/approvals/%3Fkind%3Dapproval%26world%3Dlive"
    assert not response.has_header("Location")
    assert response.content == b""


def test_an_anonymous_htmx_post_gets_the_same_answer_and_changes_nothing(operator: Any) -> None:
    from tests.helpers import make_run

    run = make_run(principal="user:operator", requested_by=operator, namespace="live")
    state = run.state
    page = f"http://testserver/runs/{run.pk}/"
    response = Client().post(
        reverse("runs-cancel", args=[run.pk]), {"reason": "x"}, headers=htmx_headers(page)
    )
    assert response.status_code == 200
    assert response["HX-Redirect"] == f"/login/?next=/runs/{run.pk}/"
    assert response.content == b""
    run.refresh_from_db()
    assert run.state == state


@pytest.mark.parametrize(
    "current_url",
    [
        None,
        "",
        "https://evil.example/approvals/",
        "http://evil.example/approvals/",
        "https://testserver/approvals/",  # another scheme is another origin
        "http://testserver//evil.example/approvals/",
        "http://testserver/\\evil.example/",
        "javascript:alert(1)",
    ],
)
def test_the_way_back_is_never_another_origin(current_url: str | None) -> None:
    response = Client().get(reverse("approvals-queue"), headers=htmx_headers(current_url))
    assert response.status_code == 200
    assert response["HX-Redirect"] == "/login/"
    assert response.content == b""


def test_a_request_without_htmx_keeps_the_normal_redirect() -> None:
    response = Client().get(reverse("approvals-queue"), {"kind": "approval"})
    assert response.status_code == 302
    assert response["Location"] == "/login/?next=/approvals/%3Fkind%3Dapproval"
    assert not response.has_header("HX-Redirect")


def test_a_form_posted_after_the_session_ended_returns_to_the_form_page(operator: Any) -> None:
    """A stale page's form post (logged out in another tab): signing in must lead back to
    the page the form was on, never to the POST-only action address (a 405 after the
    sign-in, the typed decision lost with no word of what happened)."""
    from tests.helpers import make_run

    run = make_run(principal="user:operator", requested_by=operator, namespace="live")
    state = run.state
    response = Client().post(
        reverse("runs-cancel", args=[run.pk]),
        {"reason": "x"},
        headers={"Referer": f"http://testserver/runs/{run.pk}/?kind=all"},
    )
    assert response.status_code == 302
    assert response["Location"] == f"/login/?next=/runs/{run.pk}/%3Fkind%3Dall"
    run.refresh_from_db()
    assert run.state == state


@pytest.mark.parametrize(
    "referer", [None, "https://evil.example/runs/", "http://testserver//evil.example/"]
)
def test_a_form_post_without_a_same_origin_referer_signs_in_to_the_start_page(
    referer: str | None,
) -> None:
    headers = {"Referer": referer} if referer is not None else {}
    response = Client().post(reverse("runs-start"), {"scenario": "reservation"}, headers=headers)
    assert response.status_code == 302
    assert response["Location"] == "/login/"


def test_a_signed_in_poll_is_answered_as_before(approver: Any) -> None:
    client = Client()
    client.force_login(approver)
    response = client.get(reverse("approvals-queue"), headers=htmx_headers())
    assert response.status_code == 200
    assert not response.has_header("HX-Redirect")
    assert b'id="queue"' in response.content
