"""Exposure funnel: registry -> eligible -> retrieved -> visible, with reasons."""

from __future__ import annotations

import pytest

from capabilities.contracts import EffectClass
from capabilities.exposure import (
    PHASE_POLICIES,
    Candidate,
    ExposurePolicy,
    Phase,
    expose,
    lexical_scores,
    phase_for,
    tokens,
)

CONTROLS = frozenset({"ask_user", "no_applicable_tool"})


def cand(cid: str, family: str = "manuals", effect: EffectClass = EffectClass.READ, **kw):
    kw.setdefault("lifecycle", "ADMITTED")
    kw.setdefault("purpose", f"{cid} purpose")
    return Candidate(id=cid, version=kw.pop("version", "1.0.0"), family=family, effect=effect, **kw)


def control(cid: str, **kw):
    return cand(cid, family="control", effect=EffectClass.NONE, **kw)


POLICY = ExposurePolicy(frozenset({"manuals", "inventory"}), EffectClass.READ)


def run(cands, policy=POLICY, k=None, query="", controls=CONTROLS):
    return expose(cands, policy, phase="test", query=query, k=k, trusted_controls=controls)


def test_phase_follows_admitted_evidence_only():
    assert phase_for([]) is Phase.DIAGNOSE
    assert phase_for(["read_equipment"]) is Phase.DIAGNOSE
    assert phase_for(["read_equipment", "search_manual"]) is Phase.SOURCE
    assert phase_for(["search_manual", "check_inventory", "propose_reservation"]) is Phase.COMMIT


def test_phase_policies_raise_the_effect_ceiling_only_when_a_proposal_exists():
    assert PHASE_POLICIES[Phase.DIAGNOSE].max_effect is EffectClass.READ
    assert PHASE_POLICIES[Phase.SOURCE].max_effect is EffectClass.LOCAL_TRANSFORMATION
    assert PHASE_POLICIES[Phase.COMMIT].max_effect is EffectClass.CONSEQUENTIAL
    assert not any(p.allow_open_world for p in PHASE_POLICIES.values())


def test_each_filter_excludes_with_its_reason():
    funnel = run(
        [
            cand("ok"),
            cand("wrong_family", family="reservation"),
            cand("too_strong", effect=EffectClass.CONSEQUENTIAL),
            cand("far", open_world=True),
            cand("new", lifecycle="DISCOVERED"),
            cand("gone", lifecycle="RETIRED"),
            cand("no", lifecycle="REJECTED"),
            cand("other_pin", pinned=False),
            cand("drifted", drift=True),
            cand("remote", contract=False),
        ]
    )
    assert funnel.eligible == ("ok",)
    assert funnel.visible == ("ok",)
    r = funnel.reasons
    assert "family 'reservation'" in r["wrong_family@1.0.0"]
    assert "above the test ceiling" in r["too_strong@1.0.0"]
    assert "open-world" in r["far@1.0.0"]
    assert r["new@1.0.0"].startswith("DISCOVERED")
    assert r["gone@1.0.0"].startswith("RETIRED")
    assert r["no@1.0.0"].startswith("REJECTED")
    assert r["other_pin@1.0.0"] == "not pinned by this run"
    assert "drift" in r["drifted@1.0.0"]
    assert "without a local reviewed contract" in r["remote@1.0.0"]
    assert len(funnel.existed) == 10


def test_deprecated_versions_stay_visible_to_runs_already_pinned():
    funnel = run([cand("old", lifecycle="DEPRECATED")])
    assert funnel.visible == ("old",)


def test_trusted_controls_are_visible_in_every_phase_and_never_consume_k():
    funnel = run(
        [control("ask_user"), control("no_applicable_tool"), cand("a"), cand("b")],
        policy=ExposurePolicy(frozenset(), EffectClass.NONE),
        k=0,
    )
    assert funnel.controls == ("ask_user", "no_applicable_tool")
    assert funnel.retrieved == ()
    assert funnel.visible == ("ask_user", "no_applicable_tool")


def test_k_counts_ordinary_capabilities_only():
    funnel = run([control("ask_user"), cand("a"), cand("b"), cand("c")], k=2)
    assert len(funnel.retrieved) == 2
    assert "ask_user" in funnel.visible and len(funnel.visible) == 3


def test_a_remote_tool_calling_itself_control_is_not_trusted():
    funnel = run(
        [control("helpful_control")],
        policy=ExposurePolicy(frozenset({"control"}), EffectClass.NONE),
    )
    assert funnel.visible == ()
    assert "not a trusted local control" in funnel.reasons["helpful_control@1.0.0"]


def test_a_discovered_definition_named_like_a_control_is_never_exposed():
    funnel = run([control("ask_user", contract=False)])
    assert funnel.visible == ()


def test_a_trusted_control_with_an_effect_is_a_configuration_error():
    with pytest.raises(ValueError, match="invalid trusted control"):
        run([cand("ask_user", family="control", effect=EffectClass.READ)])


def test_top_k_keeps_the_best_lexical_matches_and_says_why_others_were_dropped():
    funnel = run(
        [
            cand("check_inventory", family="inventory", purpose="availability of a part"),
            cand("search_manual", purpose="repair procedure passages"),
            cand("lookup", purpose="look things up"),
        ],
        k=1,
        query="availability of part A17",
    )
    assert funnel.retrieved == ("check_inventory",)
    assert "outside the top 1" in funnel.reasons["search_manual@1.0.0"]
    assert "outside the top 1" in funnel.reasons["lookup@1.0.0"]
    assert funnel.scores["check_inventory"] > funnel.scores["search_manual"]


def test_negative_k_is_refused():
    with pytest.raises(ValueError):
        run([cand("a")], k=-1)


def test_record_is_bounded_and_json_ready():
    funnel = run([cand(f"c{i}") for i in range(30)], k=3)
    record = funnel.as_record(max_existed=5)
    assert record["existed_count"] == 30
    assert len(record["existed"]) == 5
    assert len(record["excluded"]) == 5
    assert record["policy"]["max_effect"] == EffectClass.READ.value
    assert record["visible"] == list(funnel.visible)


def test_tokens_drop_stopwords_and_fold_plurals():
    assert tokens("Check the parts of the pumps") == ["check", "part", "pump"]
    assert tokens("search_manual glass") == ["search", "manual", "glass"]


def test_avoid_when_counts_against_a_candidate():
    plain = cand("x", purpose="stock of a part")
    avoiding = cand("y", purpose="stock of a part", avoid_when=("the question is availability",))
    scores = lexical_scores("availability stock", [plain, avoiding])
    assert scores["x"] > scores["y"]
