"""Every fault-lab fixture is an automated test: it must reach its disposition and checks."""

from __future__ import annotations

import pytest

from sim import faultlab


@pytest.mark.parametrize("fixture", faultlab.FIXTURES, ids=lambda f: f.name)
def test_fixture_reaches_its_disposition(world, fixture):
    result = faultlab.run_fixture(fixture)
    assert result.actual == result.expected, result.notes
    assert result.failed_checks == (), result.notes


def test_the_frozen_six_are_all_there():
    frozen = [f.name for f in faultlab.FIXTURES if f.group == "frozen six"]
    assert frozen == [
        "unavailable_tool_loop",
        "early_success",
        "invalid_arguments",
        "ignored_cancellation",
        "repeated_effect",
        "illegal_transition",
    ]


def test_fixtures_never_touch_the_live_world(world):
    from sim.world.models import LedgerEntry, ServiceRequest

    faultlab.run_fixture(faultlab.BY_NAME["reservation"])
    assert not LedgerEntry.objects.filter(namespace="live").exists()
    assert not ServiceRequest.objects.filter(namespace="live").exists()
