"""Provider-facing tool names (runs/policies/tool_names.py): every visible capability is
offered under a name each provider accepts, and a call by that name is read as exactly that
capability, in every vocabulary."""

from __future__ import annotations

import re

import pytest

from capabilities.contracts import model_projection
from capabilities.registry import ALL_CONTRACTS
from runs.domain.proposals import ActionIntent, ObserveIntent
from runs.policies import parsing, tool_names, vocabularies

# The providers' documented rules for a tool (function) name.
PROVIDER_RULES = {
    "openai": re.compile(r"^[a-zA-Z0-9_-]{1,64}$"),
    "anthropic": re.compile(r"^[a-zA-Z0-9_-]{1,64}$"),  # 128 in later API versions
    "gemini": re.compile(r"^[a-zA-Z_][a-zA-Z0-9_.:-]{0,63}$"),
    "bedrock-converse": re.compile(r"^[a-zA-Z0-9_-]{1,64}$"),
}
IMPORTED = "files.read_text"
LONG = "inventory." + "x" * 90  # 100 characters: an MCP name may have up to 128
KINDS = {cid: c.kind.value for cid, c in ALL_CONTRACTS.items()}


def accepted_everywhere(name: str) -> bool:
    return all(rule.match(name) for rule in PROVIDER_RULES.values())


def test_an_id_every_provider_accepts_is_sent_as_it_is():
    ids = ["read_equipment", "ask_user", "check-inventory", "_private"]
    assert tool_names.provider_names(ids) == {}


@pytest.mark.parametrize(
    "capability_id", [IMPORTED, LONG, "3d.render", "-leading-dash", "a" * 65, "x." * 64]
)
def test_an_id_a_provider_would_refuse_gets_a_name_every_provider_accepts(capability_id):
    name = tool_names.provider_names([capability_id])[capability_id]
    assert accepted_everywhere(name)
    # The same id gets the same name, whatever else is visible beside it.
    assert tool_names.provider_names([capability_id, "read_equipment"])[capability_id] == name


def test_ids_that_sanitise_alike_get_different_names():
    names = tool_names.provider_names(["files.read", "files:read", "files read"])
    assert len(set(names.values())) == 3
    # And none of them is a portable id that is visible beside them.
    both = tool_names.provider_names(["files.read", "files_read"])
    assert both["files.read"] != "files_read"


def test_a_name_already_taken_by_a_visible_id_takes_a_longer_hash():
    first = tool_names.provider_names([IMPORTED])[IMPORTED]
    # A visible capability whose id is exactly the name the imported tool would get.
    renamed = tool_names.provider_names([IMPORTED, first])[IMPORTED]
    assert renamed != first
    assert accepted_everywhere(renamed)
    assert renamed.endswith(first.rsplit("_", 1)[1] + renamed[-8:])


def test_repeated_ids_are_refused():
    with pytest.raises(ValueError):
        tool_names.provider_names([IMPORTED, IMPORTED])


def test_the_built_in_projections_are_unchanged_so_recorded_hashes_stay():
    shown = [model_projection(c) for c in ALL_CONTRACTS.values()]
    assert tool_names.named(shown) == shown
    assert all(tool_names.FIELD not in c for c in tool_names.named(shown))


def projection_with(*ids: str) -> dict:
    shown = [model_projection(ALL_CONTRACTS["read_equipment"])]
    shown += [{"name": i, "description": "", "input_schema": {"type": "object"}} for i in ids]
    return {"capabilities": tool_names.named(shown)}


@pytest.mark.parametrize("vocabulary", sorted(vocabularies.VOCABULARIES))
def test_a_call_to_the_offered_name_is_read_as_exactly_that_capability(vocabulary):
    vocab = vocabularies.get(vocabulary)
    projection = projection_with(IMPORTED, LONG)
    offered = {c["name"]: tool_names.tool_name(c) for c in projection["capabilities"]}
    kinds = {**KINDS, IMPORTED: "observe", LONG: "action"}
    for capability_id, kind in ((IMPORTED, ObserveIntent), (LONG, ActionIntent)):
        raw = vocab.call(offered[capability_id], {"path": "a.txt"}, "call_1")
        proposal = tool_names.read(vocab.read, raw, kinds, projection).proposal
        assert isinstance(proposal, kind)
        assert (proposal.capability, dict(proposal.args)) == (capability_id, {"path": "a.txt"})
    # A portable id is offered, and read, as itself.
    raw = vocab.call("read_equipment", {"equipment_id": "EQ-17"}, "call_2")
    proposal = tool_names.read(vocab.read, raw, kinds, projection).proposal
    assert isinstance(proposal, ObserveIntent) and proposal.capability == "read_equipment"


@pytest.mark.parametrize("vocabulary", sorted(vocabularies.VOCABULARIES))
def test_a_call_to_a_name_never_offered_stays_an_unknown_tool(vocabulary):
    vocab = vocabularies.get(vocabulary)
    projection = projection_with(IMPORTED)
    kinds = {**KINDS, IMPORTED: "observe"}
    # The sanitised id without its hash suffix was never offered.
    raw = vocab.call("files_read_text", {}, "call_1")
    proposal = tool_names.read(vocab.read, raw, kinds, projection).proposal
    assert isinstance(proposal, ActionIntent) and proposal.capability == "files_read_text"
    assert parsing.classify(proposal, kinds) == parsing.UNKNOWN_TOOL


def test_without_recorded_names_the_reading_is_the_adapters_own():
    vocab = vocabularies.get("openai")
    raw = vocab.call("files_read_text_0123abcd", {}, "call_1")
    for projection in (None, {"capabilities": []}, projection_with()):
        reading = tool_names.read(vocab.read, raw, KINDS, projection)
        assert reading == vocab.read(raw, KINDS)
