"""Safe defaults: DEBUG is opt-in, the project's own error pages, static files and the
favicon served by whitenoise, undecodable form bodies refused with a 400, and the
embedded callback key refused off loopback.

One test starts the embedded console the way ``make run`` does on a fresh clone (a new
SQLite database, no collectstatic, no DJANGO_DEBUG) and probes it over real HTTP.
"""

from __future__ import annotations

import http.client
import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from django.core.checks import run_checks
from django.core.management import call_command
from django.core.management.base import CommandError
from django.urls import reverse

from runs.management.commands.serve_embedded import listen_host
from runs.models import Run

ROOT = Path(__file__).resolve().parents[2]
TECHNICAL_404 = ("Using the URLconf", "Django tried these URL patterns", "runs-detail")


def settings_value(name: str, **env: str) -> str:
    """``name`` as the embedded settings compute it in a fresh process with ``env``."""
    clean = {k: v for k, v in os.environ.items() if not k.startswith("DJANGO_")}
    code = f"import fieldops.settings as s; print(s.{name})"
    return subprocess.run(
        [sys.executable, "-c", code],
        cwd=ROOT,
        env={**clean, **env},
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()


def test_debug_is_off_unless_opted_in():
    assert settings_value("DEBUG") == "False"
    assert settings_value("DEBUG", DJANGO_DEBUG="false") == "False"
    assert settings_value("DEBUG", DJANGO_DEBUG="true") == "True"


def test_an_unknown_url_is_the_projects_404_and_lists_no_url_patterns(sworld):
    for client in (sworld.client("outsider"), sworld.client("anonymous")):
        response = client.get("/no/such/page/")
        body = response.content.decode()
        assert response.status_code == 404 and "404 · Not found" in body
        assert not any(marker in body for marker in TECHNICAL_404)


def test_a_path_out_of_the_static_directory_is_a_404_not_a_500(sworld):
    client = sworld.client("anonymous")
    for path in ("/static/../manage.py", "/static/%2e%2e/manage.py", "/static/..%2fmanage.py"):
        response = client.get(path)
        assert response.status_code == 404, path
        assert b"DJANGO_SETTINGS_MODULE" not in response.content


CHARSET_BODIES = [
    ("application/x-www-form-urlencoded; charset=utf-16", b"reason=x"),
    ("application/x-www-form-urlencoded; charset=utf-32", b"reason=xxxx"),
    ("application/x-www-form-urlencoded; charset=rot13", b"reason=x"),
    ("application/x-www-form-urlencoded; charset=latin-1", b"reason=caf\xe9"),
    ("multipart/form-data; boundary=b; charset=utf-16", b"--b--\r\n"),
    (
        "multipart/form-data; boundary=b; charset=rot13",
        b'--b\r\nContent-Disposition: form-data; name="reason"\r\n\r\nx\r\n--b--\r\n',
    ),
    ("multipart/form-data", b"no boundary at all"),
]


@pytest.mark.parametrize("debug", [False, True], ids=["debug-off", "debug-on"])
@pytest.mark.parametrize(("content_type", "body"), CHARSET_BODIES)
def test_an_undecodable_form_body_is_a_400_and_changes_nothing(
    sworld, settings, debug, content_type, body
):
    settings.DEBUG = debug  # under DEBUG the error page used to parse the body again: a 500
    run = sworld.run("waiting")
    client = sworld.client("operator", enforce_csrf_checks=True, raise_request_exception=False)
    response = client.generic(
        "POST", reverse("runs-cancel", args=[run.pk]), body, content_type=content_type
    )
    assert response.status_code == 400
    assert "400 · Bad request" in response.content.decode()
    assert Run.objects.get(pk=run.pk).state == run.state


def test_a_utf8_form_still_passes_the_body_check(sworld):
    run = sworld.run("waiting")
    client = sworld.client("operator")
    response = client.generic(
        "POST",
        reverse("runs-cancel", args=[run.pk]),
        b"reason=caf%C3%A9",
        content_type="application/x-www-form-urlencoded; charset=UTF-8",
    )
    assert response.status_code == 302
    assert Run.objects.get(pk=run.pk).state == "CANCELLED"


def test_the_csrf_refusal_is_the_projects_page(sworld):
    client = sworld.client("operator", enforce_csrf_checks=True)
    response = client.post(reverse("runs-cancel", args=[sworld.run("waiting").pk]), {"reason": "x"})
    assert response.status_code == 403
    assert "403 · The form has expired" in response.content.decode()


def test_the_csrf_refusal_links_back_to_the_page_the_form_was_on_of_this_site_only(sworld):
    run = sworld.run("waiting")
    client = sworld.client("operator", enforce_csrf_checks=True)
    page = f"/runs/{run.pk}/?tab=timeline"

    def refused(referer: str) -> str:
        response = client.post(
            reverse("runs-cancel", args=[run.pk]), {"reason": "x"}, HTTP_REFERER=referer
        )
        assert response.status_code == 403
        return response.content.decode()

    body = refused(f"http://testserver{page}")
    assert '<a href="/runs/' in body and "Reload the page you came from</a>" in body
    assert f'href="{page.replace("&", "&amp;")}"' in body
    for elsewhere in ("https://evil.example/runs/", "http://testserver.evil.example/", ""):
        assert "Reload the page you came from</a>" not in refused(elsewhere)
    assert Run.objects.get(pk=run.pk).state == run.state


# -- the embedded callback key off loopback -----------------------------------------------
@pytest.mark.parametrize(
    ("addrport", "host"),
    [
        ("8000", "127.0.0.1"),
        ("127.0.0.1:8000", "127.0.0.1"),
        ("0.0.0.0:8000", "0.0.0.0"),  # noqa: S104 (a bind address under test, not bound)
        ("[::1]:8000", "::1"),
        ("0:8000", "0"),
        ("fieldops.example.com:80", "fieldops.example.com"),
    ],
)
def test_listen_host_reads_runservers_address(addrport, host):
    assert listen_host(addrport) == host


@pytest.mark.parametrize("addrport", ["0.0.0.0:8000", "0:8000", "192.0.2.7:8000", "example.com:80"])
def test_serve_embedded_refuses_to_listen_off_loopback_with_the_embedded_key(addrport, settings):
    assert settings.FIELDOPS_CALLBACK_KEY == settings.EMBEDDED_CALLBACK_KEY
    with pytest.raises(CommandError, match="refusing to listen"):
        call_command("serve_embedded", addrport)


def test_the_settings_check_refuses_the_embedded_key_for_a_public_host(settings):
    def errors() -> list[str]:
        return [m.id for m in run_checks(tags=["security"]) if m.id == "fieldops.E001"]

    assert errors() == []  # loopback names only: the embedded default is fine
    settings.ALLOWED_HOSTS = ["127.0.0.1", "fieldops.example.com"]
    assert errors() == ["fieldops.E001"]
    settings.FIELDOPS_CALLBACK_KEY = "a-real-secret-from-the-environment"
    assert errors() == []


# -- the embedded console over real HTTP, as `make run` starts it -------------------------
def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture(scope="module")
def embedded(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, int]]:
    """``manage.py migrate`` then ``serve_embedded`` on a fresh SQLite file, DEBUG unset."""
    var = tmp_path_factory.mktemp("embedded")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("DJANGO_", "FIELDOPS_"))}
    env.update(DATABASE_URL=f"sqlite:///{var / 'db.sqlite3'}", FIELDOPS_VAR_DIR=str(var))
    manage = [sys.executable, str(ROOT / "manage.py")]
    subprocess.run([*manage, "migrate", "--noinput", "-v0"], env=env, cwd=ROOT, check=True)
    port = free_port()
    server = subprocess.Popen(
        [*manage, "serve_embedded", f"127.0.0.1:{port}"],
        env=env,
        cwd=ROOT,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                if time.monotonic() > deadline or server.poll() is not None:
                    raise
                time.sleep(0.2)
        yield "127.0.0.1", port
    finally:
        server.terminate()
        server.wait(timeout=10)


def fetch(server: tuple[str, int], path: str) -> tuple[int, dict[str, str], bytes]:
    """GET ``path`` exactly as written (like curl --path-as-is: no dot-segment removal)."""
    connection = http.client.HTTPConnection(*server, timeout=10)
    try:
        connection.request("GET", path)
        response = connection.getresponse()
        return response.status, {k.lower(): v for k, v in response.getheaders()}, response.read()
    finally:
        connection.close()


def test_the_embedded_console_serves_static_files_without_collectstatic(embedded: Any):
    status, headers, body = fetch(embedded, "/login/")
    assert status == 200 and b'href="/static/fieldops.css"' in body
    for path, kind in (
        ("/static/fieldops.css", "text/css"),
        ("/static/fieldops.js", "text/javascript"),
        ("/static/django_htmx/htmx-2.min.js", "text/javascript"),
        ("/static/favicon.svg", "image/svg+xml"),
        ("/favicon.ico", "image/"),
    ):
        status, headers, body = fetch(embedded, path)
        assert status == 200 and headers["content-type"].startswith(kind), path
        assert "content-security-policy" in headers, path


def test_the_embedded_console_has_debug_off(embedded: Any):
    status, _, body = fetch(embedded, "/no/such/page/")
    assert status == 404 and "404 · Not found".encode() in body
    assert not any(marker.encode() in body for marker in TECHNICAL_404)
    for path in ("/static/../manage.py", "/static/../../etc/passwd", "/static/%2e%2e/manage.py"):
        status, _, body = fetch(embedded, path)
        assert status == 404, path
        assert b"DJANGO_SETTINGS_MODULE" not in body and b"root:" not in body
