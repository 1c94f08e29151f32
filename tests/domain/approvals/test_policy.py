"""Who may decide and how many must agree (pure): approval policies, quorum and the order
of the refusal rules."""

from __future__ import annotations

from dataclasses import replace

import pytest
from hypothesis import given
from hypothesis import strategies as st

from approvals.domain import (
    DEFAULT_ELIGIBILITY,
    MAX_CHANGE_VALUE_CHARS,
    MAX_REASON_CHARS,
    DecisionAttempt,
    Eligibility,
    PolicyRule,
    decision_refusal,
    eligibility_for,
    quorum_met,
)

H = "a" * 64


def _for(rules, **kw):
    args = {
        "capability": "reserve_part",
        "effect_class": "consequential",
        "world": "live",
        "quantity": 1,
        "part_id": "A17",
    }
    args.update(kw)
    return eligibility_for(rules, **args)


def test_without_a_policy_the_approver_role_decides_with_one_approval():
    assert _for([]) == DEFAULT_ELIGIBILITY
    assert _for([PolicyRule("other", "check_inventory", quorum=3)]) == DEFAULT_ELIGIBILITY


def test_the_most_specific_policy_wins():
    rules = [
        PolicyRule("any", "reserve_part", quorum=2),
        PolicyRule("lab", "reserve_part", world="faultlab", quorum=3),
        PolicyRule("lab-read", "reserve_part", world="faultlab", effect_class="read", quorum=4),
    ]
    assert _for(rules).policy == "any" and _for(rules).quorum == 2
    assert _for(rules, world="faultlab").policy == "lab"
    assert _for(rules, world="faultlab", effect_class="read").quorum == 4


def test_a_conditional_quorum_applies_above_a_quantity_or_to_a_high_value_part():
    rule = PolicyRule(
        "big",
        "reserve_part",
        group="leads",
        quorum=2,
        quorum_min_quantity=2,
        quorum_part_ids=("B52",),
    )
    assert _for([rule], quantity=1).quorum == 1
    assert _for([rule], quantity=2).quorum == 2
    assert _for([rule], part_id="B52").quorum == 2
    # The eligibility narrowing applies whatever the quorum.
    assert _for([rule], quantity=1).group == "leads"


def test_eligibility_admits_by_group_and_named_users():
    assert DEFAULT_ELIGIBILITY.admits(username="x", groups=frozenset({"approver"}))
    group = Eligibility(group="leads")
    assert not group.admits(username="x", groups=frozenset({"approver"}))
    assert group.admits(username="x", groups=frozenset({"approver", "leads"}))
    named = Eligibility(usernames=("ana",))
    assert named.admits(username="ana", groups=frozenset())
    assert not named.admits(username="bo", groups=frozenset())
    assert "2 distinct approvals" in Eligibility(quorum=2, policy="p").describe()


BASE = DecisionAttempt(
    seen_hash=H,
    checkpoint_hash=H,
    checkpoint_status="PENDING",
    expired=False,
    run_waiting_here=True,
    run_cancelled=False,
    approver_ref="user:ana",
    requester_ref="user:op",
    approver_has_role=True,
    reason="ok",
)


@pytest.mark.parametrize(
    ("change", "code"),
    [
        ({}, None),
        ({"approver_has_role": False}, "not_an_approver"),
        ({"approver_ref": "user:op"}, "self_approval"),
        ({"eligible": False}, "not_eligible"),
        ({"reason": "r" * (MAX_REASON_CHARS + 1)}, "input_too_large"),
        ({"requested_change": {"slot_id": "s" * (MAX_CHANGE_VALUE_CHARS + 1)}}, "input_too_large"),
        ({"checkpoint_status": "CANCELLED"}, "run_cancelled"),
        ({"checkpoint_status": "EXPIRED"}, "checkpoint_expired"),
        ({"expired": True}, "checkpoint_expired"),
        ({"checkpoint_status": "APPROVED"}, "already_decided"),
        ({"checkpoint_status": "USED", "quorum": 2}, "quorum_complete"),
        ({"checkpoint_status": "DECLINED"}, "already_decided"),
        ({"run_waiting_here": False, "run_cancelled": True}, "run_cancelled"),
        ({"run_waiting_here": False}, "run_not_waiting"),
        ({"approved_by": ("user:ana",), "quorum": 2}, "already_approved"),
        (
            {"seen_hash": "b" * 64, "other_proposal_hashes": frozenset({"b" * 64})},
            "proposal_changed",
        ),
        ({"seen_hash": "b" * 64}, "hash_mismatch"),
        ({"reason": " "}, "reason_required"),
        ({"approve": False, "requested_change": {"colour": "red"}}, "invalid_requested_change"),
        (
            {"approve": False, "requested_change": {"location_id": "LOC-N2"}},
            "location_out_of_scope",
        ),
        (
            {
                "approve": False,
                "requested_change": {"location_id": "LOC-N2"},
                "allowed_locations": ("LOC-N1", "LOC-N2"),
            },
            None,
        ),
    ],
)
def test_each_refusal_names_its_cause(change, code):
    assert decision_refusal(replace(BASE, **change)) == code


@given(
    expired=st.booleans(),
    status=st.sampled_from(["PENDING", "APPROVED", "DECLINED", "EXPIRED", "CANCELLED", "USED"]),
)
def test_an_expired_checkpoint_is_never_reported_as_decided(expired, status):
    code = decision_refusal(replace(BASE, expired=expired, checkpoint_status=status))
    if status == "EXPIRED" or (status == "PENDING" and expired):
        assert code == "checkpoint_expired"


@given(quorum=st.integers(min_value=1, max_value=9), approvals=st.integers(0, 12))
def test_the_quorum_is_met_by_n_approvals(quorum, approvals):
    assert quorum_met(quorum=quorum, approvals=approvals) is (approvals >= quorum)


def test_an_input_too_large_says_its_bound_and_the_size_it_had() -> None:
    from approvals.domain import MAX_HASH_CHARS, answer_too_large_message, too_large_message

    assert "at most 1000 characters and this one has 1001" in too_large_message(reason="r" * 1001)
    hashed = too_large_message(seen_hash="h" * (MAX_HASH_CHARS + 1))
    assert f"at most {MAX_HASH_CHARS} characters and this one has {MAX_HASH_CHARS + 1}" in hashed
    many = too_large_message(change={f"f{i}": "x" for i in range(5)})
    assert "at most 4 fields and this one names 5" in many
    sent = "k" * 500
    unknown = too_large_message(change={sent: "v" * 65})
    assert "and one sent has 65" in unknown and sent not in unknown
    assert "this one has 1001; nothing was recorded" in answer_too_large_message("a" * 1001)


@pytest.mark.parametrize(
    ("approve", "change", "refused"),
    [
        (True, {"quantity": "2"}, True),
        (True, {"quantity": 2}, True),
        (True, {"location_id": "  ", "quantity": ""}, False),  # an untouched change form
        (True, {"quantity": None}, False),
        (True, None, False),
        (False, {"quantity": "2"}, False),  # a decline is where a change belongs
    ],
)
def test_an_approval_with_a_change_filled_in_is_told_apart(approve, change, refused):
    from approvals.domain import approval_with_change

    assert approval_with_change(approve=approve, change=change) is refused
