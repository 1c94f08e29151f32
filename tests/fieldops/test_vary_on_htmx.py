"""A page address that htmx also fetches for one region says its answers vary by the htmx
headers, so the browser's cache never gives a region's answer for the whole page (Back to
a filtered list showed the cached table alone)."""

from __future__ import annotations

from typing import Any

import pytest
from django.test import Client
from django.urls import reverse

pytestmark = pytest.mark.django_db


def _vary(response: Any) -> set[str]:
    return {v.strip().lower() for v in response.get("Vary", "").split(",") if v.strip()}


def test_the_page_and_its_region_answer_both_vary_by_the_htmx_headers(operator: Any) -> None:
    client = Client()
    client.force_login(operator)
    url = reverse("runs-list") + "?state=WAITING_HUMAN"
    page = client.get(url)
    region = client.get(url, headers={"HX-Request": "true", "HX-Target": "run-table"})
    assert b'role="search"' in page.content and b'role="search"' not in region.content
    for response in (page, region):
        assert {"hx-request", "hx-target"} <= _vary(response)
