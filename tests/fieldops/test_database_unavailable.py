"""The console when its database connection dies under a request: a 503 page that says
the database is unreachable, that an action may or may not have been recorded and how to
check, with Retry-After; never the generic 500. (The API answers its own JSON 503.)"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import psycopg
import pytest
from django.db import connection
from django.test import Client
from django.urls import reverse

from runs.models import Run
from tests.conftest import make_user
from tests.deploy.servers import shared_database_url
from tests.helpers import make_run

pytestmark = [pytest.mark.postgres, pytest.mark.django_db(transaction=True)]


@pytest.fixture
def operator_client(world: None) -> Iterator[Client]:
    """A signed-in operator whose requests do not re-raise (the browser's view)."""
    client = Client(raise_request_exception=False)
    client.force_login(make_user("operator", "north", "operator"))
    yield client
    # The test client keeps Django from closing a broken connection at the request's end
    # (a server does it then); close it here so the test database can be flushed.
    connection.close()


def _terminate_this_connection() -> None:
    """End this process's database connection from the server side (as a restart or a
    failover does): the next query of the request fails."""
    connection.ensure_connection()
    pid = connection.connection.info.backend_pid
    with psycopg.connect(shared_database_url(), autocommit=True) as other:
        other.execute("SELECT pg_terminate_backend(%s)", [pid])


def _assert_database_unavailable_page(response: Any, *, action: bool = True) -> str:
    assert response.status_code == 503
    assert response["Retry-After"] == "5"
    assert response["Content-Type"].startswith("text/html")
    body = response.content.decode()
    assert "The database is unreachable" in body
    if action:
        assert "may or may not have been recorded" in body
        assert "timeline" in body
    else:
        assert "this page could not be loaded" in body
        assert "may or may not" not in body and "If you sent an action" not in body
    return body


def test_a_page_whose_database_connection_died_is_a_503_page(operator_client: Client) -> None:
    _terminate_this_connection()
    response = operator_client.get(reverse("runs-list"))
    _assert_database_unavailable_page(response, action=False)


@pytest.mark.parametrize("htmx", [False, True], ids=["page", "htmx"])
def test_a_page_read_is_not_warned_about_an_action_it_did_not_send(
    operator_client: Client, htmx: bool
) -> None:
    # The 503 page said "If you sent an action ..., it may or may not have been recorded"
    # to a person who only followed a link (or whose filter's HTMX read failed): a read
    # records nothing. It now says the page could not be loaded; its alert card (the
    # heading and first two paragraphs fieldops.js shows after an HTMX request) too.
    headers = {"HTTP_HX_REQUEST": "true"} if htmx else {}
    _terminate_this_connection()
    body = _assert_database_unavailable_page(
        operator_client.get(reverse("runs-list"), **headers), action=False
    )
    alert = body.split('role="alert"', 1)[1]
    shown = " ".join(alert.split("<p>")[1:3])
    assert "could not be loaded" in shown and "again" in shown
    connection.close()
    _terminate_this_connection()
    head = operator_client.head(reverse("runs-list"))
    assert head.status_code == 503


def test_a_session_save_that_loses_the_connection_is_a_503_page(
    operator_client: Client,
) -> None:
    # The 503 page covered failures inside a view only: a bulk cancellation committed, then
    # the connection died while SessionMiddleware saved the result it keeps for the next
    # page (after the view), and the person got the bare 500 page, not told the
    # cancellation may have been recorded nor how to check. The backend is terminated on
    # the session's own write, as a failover at that moment would.
    run: Run = make_run(principal="user:operator", namespace="live")

    def lose_the_connection_on_the_session_save(execute, sql, params, many, context):  # type: ignore[no-untyped-def]
        if '"django_session"' in sql and sql.lstrip().upper().startswith(("UPDATE", "INSERT")):
            _terminate_this_connection()
        return execute(sql, params, many, context)

    page = "http://testserver" + reverse("runs-list")
    with connection.execute_wrapper(lose_the_connection_on_the_session_save):
        response = operator_client.post(
            reverse("runs-bulk-cancel"),
            {"run": [run.pk], "reason": "withdrawn"},
            HTTP_REFERER=page,
        )
    assert response.status_code == 503, response.content.decode()[-3000:]
    body = _assert_database_unavailable_page(response)
    assert f'href="{reverse("runs-list")}"' in body
    connection.close()
    run.refresh_from_db()
    assert run.state == "CANCELLED"  # the view's work was committed before the break


@pytest.mark.parametrize("htmx", [False, True], ids=["form", "htmx"])
def test_an_action_whose_database_connection_died_says_how_to_check_before_retrying(
    operator_client: Client, htmx: bool
) -> None:
    """A cancellation sent while the connection dies: the page says it may or may not have
    been recorded, points to the run's timeline and links back to the run page (the page
    the form was on). An HTMX request gets the same page, whose alert card (heading and
    first paragraphs) fieldops.js shows above the content."""
    run: Run = make_run(principal="user:operator", namespace="live")
    page = "http://testserver" + reverse("runs-detail", args=[run.pk])
    headers = {"HTTP_REFERER": page}
    if htmx:
        headers.update({"HTTP_HX_REQUEST": "true", "HTTP_HX_CURRENT_URL": page})
    _terminate_this_connection()
    response = operator_client.post(
        reverse("runs-cancel", args=[run.pk]), {"reason": "withdrawn"}, **headers
    )
    body = _assert_database_unavailable_page(response)
    assert f'href="{reverse("runs-detail", args=[run.pk])}"' in body
    alert = body.split('role="alert"', 1)[1]
    assert alert.index("<h1>") < alert.index("may or may not have been recorded")


def test_a_page_read_when_the_connection_died_offers_to_load_it_again(
    operator_client: Client,
) -> None:
    """A person who followed a link (Runs → Operations) and met the 503 page was offered
    only the page they came from, and "try again" with no way to but the browser's reload.
    A read (GET) now links the page it asked for, with its query; an action (POST) does not
    (reloading it may send it twice) and keeps the way back to the page it was sent from."""
    came_from = "http://testserver" + reverse("runs-list")
    asked = reverse("operations-list") + "?state=WAITING_HUMAN"
    _terminate_this_connection()
    body = _assert_database_unavailable_page(
        operator_client.get(asked, HTTP_REFERER=came_from), action=False
    )
    assert '<a href="/operations/?state=WAITING_HUMAN">Load this page again</a>' in body
    assert f'<a href="{reverse("runs-list")}">Open the page you were on</a>' in body


def test_an_unknown_address_when_the_connection_died_is_the_503_page(
    operator_client: Client,
) -> None:
    """Seen in the production drill with PostgreSQL stopped: a mistyped address (``/runs/``)
    answered the generic 500, not the 503 page. The 404 page reads the database (the
    signed-in person, for the navigation), so it raised outside any view, where only the
    500 handler saw the lost connection."""
    _terminate_this_connection()
    response = operator_client.get("/no-such-page/")
    _assert_database_unavailable_page(response, action=False)  # a read: "load it again"


def test_the_500_handler_meeting_a_lost_connection_under_the_api_answers_its_json_503(
    rf: Any,
) -> None:
    """Django calls ``handler500`` inside the ``except`` of an error no view handled; when
    that error is a lost database connection, the API's caller gets the JSON 503 of
    api/v1.py (read again before retrying), not a JSON 500."""
    from django.db import OperationalError

    from fieldops.middleware import server_error

    try:
        raise OperationalError("server closed the connection unexpectedly")
    except OperationalError:
        response = server_error(rf.get("/api/v1/runs"))
    assert response.status_code == 503
    assert response["Retry-After"] == "5"
    assert json.loads(response.content)["code"] == "database_unavailable"
