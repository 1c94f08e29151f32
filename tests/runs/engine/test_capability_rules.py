"""Enforcement rules (runs/engine/inputs.py ``capability_rules``): what a rule takes from
its contract is made once per contract content, what it takes from the catalog is read at
every decision."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from capabilities import registry
from catalog.models import CapabilityVersion
from runs.engine import inputs
from tests.helpers import make_run

pytestmark = pytest.mark.django_db(transaction=True)


def test_a_rule_follows_the_catalog_at_every_read_and_its_contract_by_content(
    world: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    run = make_run()
    first = inputs.capability_rules(run)
    rule = first["reserve_part"]
    assert rule.requires_approval and rule.effect_gate_open and rule.lifecycle == "ADMITTED"
    assert inputs.capability_rules(run) == first

    # The catalog is read again: a version retired since shows at the next decision.
    version = run.components["reserve_part"].split("#")[0]
    CapabilityVersion.objects.filter(capability_id="reserve_part", version=version).update(
        lifecycle="RETIRED"
    )
    assert inputs.capability_rules(run)["reserve_part"].lifecycle == "RETIRED"

    # Another contract under the same id and version (new content, so a new digest) is
    # not answered from what was made for the first one.
    contract = registry.contract_for("reserve_part", version)
    assert contract is not None
    changed = dataclasses.replace(contract, requires_approval=False)
    assert changed.digest != contract.digest
    real = registry.contract_for
    monkeypatch.setattr(
        registry,
        "contract_for",
        lambda cid, v: changed if cid == "reserve_part" else real(cid, v),
    )
    now = inputs.capability_rules(run)["reserve_part"]
    assert not now.requires_approval
    assert now.current.endswith("#catalog-disagrees")
