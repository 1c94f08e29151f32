"""Hostile input the other security modules do not send, each found over real HTTP against
the production settings behind gunicorn on PostgreSQL (a fresh pair of eyes, 2026-12-07).

Each test sends what an attacker (or an unlucky user) sent and checks the answer says what
happened, and that nothing was stored when the input was refused.
"""

from __future__ import annotations

import json
import re
from io import StringIO

import pytest
from django.contrib.auth import get_user_model
from django.core.files.uploadedfile import SimpleUploadedFile
from django.core.management import call_command
from django.core.management.base import CommandError
from django.urls import reverse

from access.roles import roles_of, tenant_of
from catalog.models import CapabilityVersion, ToolListImport
from tests.catalog.conftest import client_for, tool, tool_list


# -- the catalog's tool-list import ----------------------------------------------------------
def _import(user, **fields):
    return client_for(user).post(reverse("catalog-import"), {"server": "mcp://x", **fields})


def test_a_tool_list_naming_a_key_twice_is_refused_and_nothing_is_stored(catalog_admin):
    # Python's parser took the last of two names ("b", then refused for its missing
    # inputSchema); another reader of the same text takes the first. Every other JSON from
    # outside (the API's bodies, callbacks, model arguments) refuses a repeated key.
    before = (CapabilityVersion.objects.count(), ToolListImport.objects.count())
    text = (
        '{"tools": [{"name": "lookup_a", "name": "lookup_b", "inputSchema": {"type": "object"}}]}'
    )
    response = _import(catalog_admin, tool_list=text)
    assert response.status_code == 400
    page = response.content.decode()
    assert "the key &#x27;name&#x27; appears twice in one object" in page
    annotations = (
        '{"tools": [{"name": "lookup_c", "inputSchema": {"type": "object"}, '
        '"annotations": {"readOnlyHint": false, "readOnlyHint": true}}]}'
    )
    response = _import(catalog_admin, tool_list=annotations)
    assert response.status_code == 400
    assert "the key &#x27;readOnlyHint&#x27; appears twice" in response.content.decode()
    assert (CapabilityVersion.objects.count(), ToolListImport.objects.count()) == before


def test_a_tool_list_with_a_number_over_the_digit_limit_is_refused_in_words(catalog_admin):
    # The refusal quoted Python's own advice: "use sys.set_int_max_str_digits() to increase
    # the limit", which a catalog admin cannot follow.
    before = CapabilityVersion.objects.count()
    text = '{"tools": [{"name": "a", "inputSchema": {"type": "object", "x": %s}}]}' % ("1" * 5000)
    response = _import(catalog_admin, tool_list=text)
    assert response.status_code == 400
    page = response.content.decode()
    assert "not valid JSON: a number has more than 4300 digits" in page
    assert "set_int_max_str_digits" not in page
    nan = '{"tools": [{"name": "a", "inputSchema": {"type": "object", "maximum": NaN}}]}'
    assert "NaN is not allowed" in _import(catalog_admin, tool_list=nan).content.decode()
    assert CapabilityVersion.objects.count() == before


def test_an_uploaded_tool_list_saved_with_a_byte_order_mark_is_imported(catalog_admin):
    # Editors on Windows save UTF-8 with a byte order mark; the upload was refused with
    # "Unexpected UTF-8 BOM (decode using utf-8-sig)".
    data = b"\xef\xbb\xbf" + tool_list(tool("lookup_bom")).encode()
    upload = SimpleUploadedFile("tools.json", data, "application/json")
    response = _import(catalog_admin, file=upload)
    assert response.status_code == 302, response.content.decode()[:2000]
    created = CapabilityVersion.objects.get(capability_id="lookup_bom")
    assert created.discovery["source"] == "file tools.json"


def test_a_tool_list_parsed_twice_reads_the_same(catalog_admin):
    # The fix reads lists the way it did before for every well-formed list.
    text = json.dumps({"tools": [tool("lookup_same")]})
    assert _import(catalog_admin, tool_list=text).status_code == 302
    assert CapabilityVersion.objects.filter(capability_id="lookup_same").count() == 1


# -- manage.py set_user: names that pass for another person's ---------------------------------
def _set_user(monkeypatch, *argv):
    monkeypatch.setenv("FIELDOPS_USER_PASSWORD", "a-long-enough-operator-password")
    out = StringIO()
    call_command("set_user", *argv, stdout=out)
    return out.getvalue()


@pytest.mark.parametrize(
    ("name", "message"),
    [
        # Fullwidth letters: sign-in reads the name NFKC-normalised, so this account could
        # never sign in (its name reads as "lead"), yet the audit trail showed it as
        # user:lead in fullwidth letters.
        ("\uff4c\uff45\uff41\uff44", "signs in as 'lead' (sign-in normalises the name)"),
        # A Cyrillic "\u0435" in a Latin name: it and user:lead look the same.
        ("l\u0435ad", "mixes letters of the scripts CYRILLIC, LATIN"),
        ("Lead", "differs from the existing user 'lead' only in case"),
    ],
)
@pytest.mark.django_db
def test_set_user_refuses_a_new_name_that_passes_for_another_and_writes_nothing(
    monkeypatch, name, message
):
    _set_user(monkeypatch, "lead", "--tenant", "north", "--role", "operator")
    with pytest.raises(CommandError, match=re.escape(message)):
        _set_user(monkeypatch, name, "--tenant", "south", "--role", "approver")
    users = get_user_model().objects.all()
    assert [(u.username, tenant_of(u), roles_of(u)) for u in users] == [
        ("lead", "north", {"operator"})
    ]


@pytest.mark.django_db
def test_set_user_still_creates_names_in_one_script_and_updates_existing_ones(monkeypatch):
    assert "created jürgen" in _set_user(
        monkeypatch, "jürgen", "--tenant", "north", "--role", "operator"
    )
    assert "created дана" in _set_user(
        monkeypatch, "дана", "--tenant", "north", "--role", "operator"
    )
    # An account made before the rule (here: straight in the database) stays manageable.
    get_user_model().objects.create_user("Jürgen", password="x-long-enough-password-1")
    out = _set_user(monkeypatch, "Jürgen", "--tenant", "south", "--role", "approver")
    assert "updated Jürgen: tenant south, roles approver" in out
