"""A request body over Django's limits (``DATA_UPLOAD_MAX_MEMORY_SIZE``, the number of
form fields) is refused with an answer that says so, in the shape of the address.

Found over real HTTP against the production settings: a 3 MB body to the signed callback
was the console's HTML 400 page ("Forms are sent as UTF-8 by every browser") instead of the
callback's JSON ``too_large`` (which a 70 KB body gets), and an over-large or over-long
console form said only that the request "could not be read", blaming its encoding.
"""

from __future__ import annotations

import pytest
from django.conf import settings
from django.test import Client
from django.urls import reverse

from runs.models import CallbackReceipt, Run
from tests.conftest import make_user

pytestmark = pytest.mark.django_db


def test_a_callback_over_the_upload_limit_is_the_callbacks_own_413() -> None:
    body = b"a" * (settings.DATA_UPLOAD_MAX_MEMORY_SIZE + 1)
    response = Client().post(reverse("api-callback"), body, content_type="application/json")
    assert response.status_code == 413
    assert response["Content-Type"].startswith("application/json")
    assert response.json()["error"] == "too_large"
    assert CallbackReceipt.objects.count() == 0


def test_a_console_form_over_the_upload_limit_says_it_is_too_large() -> None:
    client = Client()
    client.force_login(make_user("op", "north", "operator"))
    pad = "x" * (settings.DATA_UPLOAD_MAX_MEMORY_SIZE + 1)
    response = client.post(
        reverse("runs-start"), {"scenario": "reservation", "equipment_id": "EQ-17", "pad": pad}
    )
    assert response.status_code == 400
    page = response.content.decode()
    assert "larger than" in page and str(settings.DATA_UPLOAD_MAX_MEMORY_SIZE) in page
    assert "UTF-8" not in page  # the encoding was not the problem
    assert Run.objects.count() == 0


def test_a_console_form_with_too_many_fields_says_so() -> None:
    client = Client()
    client.force_login(make_user("op", "north", "operator"))
    fields = {f"f{i}": "1" for i in range(settings.DATA_UPLOAD_MAX_NUMBER_FIELDS + 1)}
    response = client.post(reverse("runs-start"), {"scenario": "reservation", **fields})
    assert response.status_code == 400
    page = response.content.decode()
    assert "more than" in page and str(settings.DATA_UPLOAD_MAX_NUMBER_FIELDS) in page
    assert "UTF-8" not in page
    assert Run.objects.count() == 0
