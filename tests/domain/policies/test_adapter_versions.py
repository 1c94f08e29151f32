"""Adapter versions: a change of mapping is a new version, new runs pin the newest, and
every earlier version still installed reads exactly as it did for the runs recorded under
it.

``golden/<version>.json`` holds what each earlier version made of every provider output
fixture (proposal and commentary), written by that version's code before the next version
existed; the earlier version must still read every fixture exactly so.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from capabilities.registry import ALL_CONTRACTS
from runs import policies
from runs.domain.proposals import (
    ActionIntent,
    FinalCandidate,
    InvalidProposal,
    ObserveIntent,
    to_dict,
)
from runs.policies import (
    anthropic_adapter,
    bedrock_adapter,
    gemini_adapter,
    openai_adapter,
    openai_responses_adapter,
    parsing,
    vocabularies,
)
from runs.policies.parsing import Reject

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "provider_outputs"
GOLDEN = Path(__file__).resolve().parent / "golden"
KINDS = {cid: c.kind.value for cid, c in ALL_CONTRACTS.items()}

EARLIER = {
    "openai": openai_adapter.VERSION_2_1,
    "openai-responses": openai_responses_adapter.VERSION_1_1,
    "anthropic": anthropic_adapter.VERSION_2_1,
}
CURRENT = {
    "openai": "openai-tool-calls-adapter@2.7.0",
    "openai-responses": "openai-responses-adapter@1.5.0",
    "anthropic": "anthropic-tool-use-adapter@2.5.0",
    "gemini": "gemini-function-calling-adapter@1.3.0",
    "bedrock-converse": "bedrock-converse-adapter@1.1.0",
}
# Every earlier version still installed, oldest first (EARLIER: the first of each, the one
# the duplicate-key and content-filter fixes were made after).
EARLIER_ALL = {
    "openai": (
        openai_adapter.VERSION_2_1,
        openai_adapter.VERSION_2_2,
        openai_adapter.VERSION_2_3,
        openai_adapter.VERSION_2_4,
        openai_adapter.VERSION_2_5,
        openai_adapter.VERSION_2_6,
    ),
    "openai-responses": (
        openai_responses_adapter.VERSION_1_1,
        openai_responses_adapter.VERSION_1_2,
        openai_responses_adapter.VERSION_1_3,
        openai_responses_adapter.VERSION_1_4,
    ),
    "anthropic": (
        anthropic_adapter.VERSION_2_1,
        anthropic_adapter.VERSION_2_2,
        anthropic_adapter.VERSION_2_3,
        anthropic_adapter.VERSION_2_4,
    ),
    "gemini": (gemini_adapter.VERSION_1_0, gemini_adapter.VERSION_1_1, gemini_adapter.VERSION_1_2),
    "bedrock-converse": (bedrock_adapter.VERSION_1_0,),
}
# The Chat Completions versions before 2.5.0 (Azure's filtered choice and prompt error...).
BEFORE_2_5 = EARLIER_ALL["openai"][:-2]
# The Chat Completions versions before 2.4.0 (Groq's executed_tools, Ollama's done_reason).
BEFORE_2_4 = (openai_adapter.VERSION_2_1, openai_adapter.VERSION_2_2, openai_adapter.VERSION_2_3)
# The outputs the earlier versions read as answers and the current ones refuse.
FIXED = {
    ("openai", "final_json_duplicate_keys"): Reject.MALFORMED_FINAL,
    ("openai", "azure_content_filter_blocked"): Reject.REFUSAL,
    ("openai-responses", "final_json_duplicate_keys"): Reject.MALFORMED_FINAL,
    ("openai-responses", "unknown_status"): Reject.UNKNOWN_SHAPE,
    ("openai-responses", "azure_content_filters_blocked"): Reject.REFUSAL,
    ("anthropic", "final_json_duplicate_keys"): Reject.MALFORMED_FINAL,
    ("anthropic", "unknown_stop_reason"): Reject.UNKNOWN_SHAPE,
    ("openai", "unknown_finish_reason"): Reject.UNKNOWN_SHAPE,
    ("openai", "recorded_groq_compound_executed_tools"): Reject.PROVIDER_EXECUTED_TOOL,
    ("openai", "ollama_native_done_length"): Reject.TRUNCATED,
    ("openai", "ollama_native_not_done"): Reject.TRUNCATED,
    ("openai", "recorded_openrouter_web_search_annotations"): Reject.PROVIDER_EXECUTED_TOOL,
    ("openai", "azure_on_your_data_citations"): Reject.PROVIDER_EXECUTED_TOOL,
    ("openai", "recorded_openai_search_preview_no_annotations"): Reject.PROVIDER_EXECUTED_TOOL,
    ("openai-responses", "url_citation_without_search_item"): Reject.PROVIDER_EXECUTED_TOOL,
}


def load(vocabulary: str, name: str) -> Any:
    return json.loads((FIXTURES / vocabulary / f"{name}.json").read_text())


def golden(version: str) -> dict[str, Any]:
    return json.loads((GOLDEN / f"{version}.json").read_text())


def reading(version: str, raw: Any) -> dict[str, Any]:
    r = vocabularies.for_version(version).read(raw, KINDS)
    return {"proposal": to_dict(r.proposal), "commentary": r.commentary}


# -- registry ------------------------------------------------------------------------------
def test_new_runs_pin_the_new_versions_and_the_earlier_ones_stay_installed():
    for name, version in CURRENT.items():
        assert vocabularies.get(name).adapter_version == version
        assert policies.vocabulary_for(version) is vocabularies.get(name)
        for version in EARLIER_ALL[name]:
            earlier = policies.vocabulary_for(version)
            assert earlier.name == name and earlier.adapter_version == version
            assert earlier.read is not vocabularies.get(name).read
    every_earlier = {v for versions in EARLIER_ALL.values() for v in versions}
    assert set(vocabularies.ADAPTERS) == {*CURRENT.values(), *every_earlier}
    with pytest.raises(ValueError, match="no adapter"):
        policies.vocabulary_for("openai-tool-calls-adapter@2.0.0")


# -- the earlier versions, unchanged ---------------------------------------------------------
@pytest.mark.parametrize(
    ("vocabulary", "version"), [(v, e) for v, versions in EARLIER_ALL.items() for e in versions]
)
def test_an_earlier_version_reads_every_fixture_exactly_as_it_did(vocabulary, version):
    recorded = golden(version)
    assert (recorded["adapter_version"], recorded["vocabulary"]) == (version, vocabulary)
    on_disk = sorted(p.stem for p in (FIXTURES / vocabulary).glob("*.json"))
    assert sorted(recorded["readings"]) == on_disk
    for name in on_disk:
        assert reading(version, load(vocabulary, name)) == recorded["readings"][name], name


@pytest.mark.parametrize(("vocabulary", "name"), sorted(FIXED))
def test_the_earlier_version_admitted_what_the_new_one_refuses(vocabulary, name):
    raw = load(vocabulary, name)
    old = vocabularies.for_version(EARLIER[vocabulary]).parse(raw, KINDS)
    new = vocabularies.get(vocabulary).parse(raw, KINDS)
    assert isinstance(old, FinalCandidate)
    assert isinstance(new, InvalidProposal)
    assert new.reason_code == FIXED[(vocabulary, name)]


# -- (a) duplicate keys in a final answer ------------------------------------------------------
ARTIFACT = '{"kind": "reservation_confirmation", "effect_id": "EF-1"}'


@pytest.mark.parametrize(
    "text",
    [
        # A malformed answer, then a well-formed one the decoder would keep.
        '{"final": 1, "final": {"artifact": ' + ARTIFACT + ', "claimed_evidence_refs": []}}',
        '{"final": {"artifact": {"effect_id": "EF-1", "effect_id": "EF-2"},'
        ' "claimed_evidence_refs": ["ev-1"]}}',
        '{"final": {"artifact": ' + ARTIFACT + ', "claimed_evidence_refs": ["ev-1"],'
        ' "claimed_evidence_refs": ["ev-2"]}}',
        '{"final": {"artifact": {"nested": {"a": 1, "a": 2}}, "claimed_evidence_refs": []}}',
    ],
)
@pytest.mark.parametrize("vocabulary", sorted(CURRENT))
def test_a_final_answer_with_duplicate_keys_anywhere_is_malformed(vocabulary, text):
    raw = vocabularies.get(vocabulary).text(text)
    proposal = vocabularies.get(vocabulary).parse(raw, KINDS)
    assert isinstance(proposal, InvalidProposal)
    assert proposal.reason_code == Reject.MALFORMED_FINAL
    assert "duplicate keys" in proposal.detail
    if vocabulary in EARLIER:  # Gemini and Converse were strict from their first version
        earlier = vocabularies.for_version(EARLIER[vocabulary])
        assert isinstance(earlier.parse(raw, KINDS), FinalCandidate)


def test_duplicate_keys_in_text_that_is_not_a_final_answer_stay_plain_text():
    text = '{"note": 1, "note": 2}'
    assert parsing.final_proposal(text, strict=True) == FinalCandidate({"text": text})
    assert parsing.final_proposal(
        '{"final": {"artifact": {}, "claimed_evidence_refs": []}}', strict=True
    ) == FinalCandidate({}, ())


# -- (b) an unknown Responses status ---------------------------------------------------------
@pytest.mark.parametrize("status", ["requires_action", "COMPLETED", "done", "", 1, True, {}])
def test_a_responses_status_the_api_does_not_document_is_never_an_answer(status):
    raw = {**openai_responses_adapter.render_text("Done."), "status": status}
    proposal = openai_responses_adapter.parse(raw, KINDS)
    assert isinstance(proposal, InvalidProposal)
    assert proposal.reason_code == Reject.UNKNOWN_SHAPE
    assert "unknown response status" in proposal.detail


@pytest.mark.parametrize(
    ("status", "expected"),
    [
        ("completed", ""),
        (None, ""),  # not stated (compatible APIs): read as before
        ("incomplete", Reject.TRUNCATED),
        ("queued", Reject.TRUNCATED),
        ("in_progress", Reject.TRUNCATED),
        ("cancelled", Reject.TRUNCATED),
        ("failed", "provider_error:unclassified"),
    ],
)
def test_the_documented_responses_statuses_keep_their_meaning(status, expected):
    raw = {**openai_responses_adapter.render_text("Done."), "status": status}
    for version in (CURRENT["openai-responses"], EARLIER["openai-responses"]):
        proposal = vocabularies.for_version(version).parse(raw, KINDS)
        assert parsing.classify(proposal, KINDS) == expected, version


# -- (c) Azure content filters that blocked --------------------------------------------------
def test_a_blocked_azure_responses_filter_is_a_content_filter_refusal():
    proposal = openai_responses_adapter.parse(
        load("openai-responses", "azure_content_filters_blocked"), KINDS
    )
    assert isinstance(proposal, InvalidProposal)
    r = proposal.reasons[0]
    assert (r.code, r.category) == (Reject.REFUSAL, "content_filter")
    assert r.explanation == "completion: violence"
    # blocked without a named category still blocks.
    raw = load("openai-responses", "recorded_azure_content_filters_final_answer")
    raw["content_filters"][0]["blocked"] = True
    proposal = openai_responses_adapter.parse(raw, KINDS)
    assert isinstance(proposal, InvalidProposal)
    assert proposal.reasons[0].explanation == "prompt: blocked"


def test_a_filtered_azure_chat_category_is_a_content_filter_refusal():
    raw = load("openai", "azure_content_filter_blocked")
    r = openai_adapter.parse(raw, KINDS).reasons[0]  # type: ignore[attr-defined]
    assert (r.code, r.category) == (Reject.REFUSAL, "content_filter")
    assert r.explanation == "completion: protected_material_text"
    # The prompt's filter results count too; detected alone (annotate only) does not.
    choice = raw["choices"][0]
    choice["content_filter_results"]["protected_material_text"]["filtered"] = False
    assert isinstance(openai_adapter.parse(raw, KINDS), FinalCandidate)
    raw["prompt_filter_results"][0]["content_filter_results"]["jailbreak"] = {
        "filtered": True,
        "detected": True,
    }
    proposal = openai_adapter.parse(raw, KINDS)
    assert isinstance(proposal, InvalidProposal)
    assert proposal.reasons[0].explanation == "prompt: jailbreak"


def test_unblocked_azure_filters_beside_an_answer_do_not_refuse():
    raw = load("openai-responses", "recorded_azure_content_filters_final_answer")
    assert openai_responses_adapter.parse(raw, KINDS) == FinalCandidate({"text": "Paris"})


# -- (d) an unknown Anthropic stop_reason (2.3.0) --------------------------------------------
@pytest.mark.parametrize(
    "stop", ["token_budget_exhausted", "END_TURN", "", 1, True, {"type": "end_turn"}]
)
def test_an_anthropic_stop_reason_the_api_does_not_document_is_never_an_answer(stop):
    """``pause_turn``, ``refusal`` and ``model_context_window_exceeded`` were each added to
    the Messages API after clients existed; a client that read an unknown stop as the end of
    a turn took the truncated or refused text as a final answer. From 2.3.0 a stop reason the
    adapter does not know is ``unknown_shape``; 2.2.0 kept its reading for replay."""
    raw = {**anthropic_adapter.render_text("The part is reserved."), "stop_reason": stop}
    proposal = anthropic_adapter.parse(raw, KINDS)
    assert isinstance(proposal, InvalidProposal)
    assert proposal.reason_code == Reject.UNKNOWN_SHAPE
    assert "unknown stop_reason" in proposal.detail
    call = {**anthropic_adapter.render_call("read_equipment", {"equipment_id": "EQ-1"}, "c1")}
    proposal = anthropic_adapter.parse({**call, "stop_reason": stop}, KINDS)
    assert parsing.classify(proposal, KINDS) == Reject.UNKNOWN_SHAPE
    for version in EARLIER_ALL["anthropic"][:2]:  # the versions before 2.3.0
        assert isinstance(vocabularies.for_version(version).parse(raw, KINDS), FinalCandidate)


@pytest.mark.parametrize(
    ("stop", "expected"),
    [
        ("end_turn", ""),
        ("stop_sequence", ""),
        ("max_tokens", Reject.TRUNCATED),
        ("pause_turn", Reject.TRUNCATED),
        ("model_context_window_exceeded", Reject.TRUNCATED),
        ("refusal", Reject.REFUSAL),
        ("tool_use", Reject.TRUNCATED),  # tool use stop without a call
    ],
)
def test_the_documented_anthropic_stop_reasons_keep_their_meaning(stop, expected):
    raw = {**anthropic_adapter.render_text("Done."), "stop_reason": stop}
    for version in (CURRENT["anthropic"], *EARLIER_ALL["anthropic"]):
        proposal = vocabularies.for_version(version).parse(raw, KINDS)
        assert parsing.classify(proposal, KINDS) == expected, version


# -- (e) an unknown Chat Completions finish_reason (2.3.0) -----------------------------------
@pytest.mark.parametrize("finish", ["abort", "EOS", "STOP", "max_tokens", 0, False, ["stop"]])
def test_a_chat_finish_reason_the_api_does_not_document_is_never_an_answer(finish):
    """A compatible server's finish reason that says the generation was aborted or cut is
    not the end of an answer: from 2.3.0 ``unknown_shape`` (named), with or without a call;
    2.2.0 read the text as a final answer and is kept so for replay."""
    raw = openai_adapter.render_text("Part P-100 is in stock and I have")
    raw["choices"][0]["finish_reason"] = finish
    proposal = openai_adapter.parse(raw, KINDS)
    assert isinstance(proposal, InvalidProposal)
    assert proposal.reason_code == Reject.UNKNOWN_SHAPE
    assert "unknown finish_reason" in proposal.detail
    call = openai_adapter.render_call("read_equipment", {"equipment_id": "EQ-1"}, "c1")
    call["choices"][0]["finish_reason"] = finish
    assert parsing.classify(openai_adapter.parse(call, KINDS), KINDS) == Reject.UNKNOWN_SHAPE
    since = vocabularies.for_version(openai_adapter.VERSION_2_3).parse(raw, KINDS)
    assert parsing.classify(since, KINDS) == Reject.UNKNOWN_SHAPE
    for version in (openai_adapter.VERSION_2_1, openai_adapter.VERSION_2_2):
        assert isinstance(vocabularies.for_version(version).parse(raw, KINDS), FinalCandidate)


@pytest.mark.parametrize(
    ("finish", "expected"),
    [
        ("stop", ""),
        ("end_turn", ""),
        ("", ""),  # none stated (Snowflake): read as before
        ("length", Reject.TRUNCATED),
        ("content_filter", Reject.REFUSAL),
        ("tool_calls", Reject.TRUNCATED),  # stopped for tool use without a call
        ("function_call", Reject.TRUNCATED),
        ("error", "provider_error:unclassified"),
    ],
)
def test_the_documented_chat_finish_reasons_keep_their_meaning(finish, expected):
    raw = openai_adapter.render_text("Done.")
    raw["choices"][0]["finish_reason"] = finish
    for version in (CURRENT["openai"], *EARLIER_ALL["openai"]):
        proposal = vocabularies.for_version(version).parse(raw, KINDS)
        assert parsing.classify(proposal, KINDS) == expected, version


# -- (f) tools a Chat Completions provider ran itself (2.4.0) ----------------------------------
def test_a_chat_answer_after_tools_the_provider_ran_is_never_an_answer():
    """Groq's compound systems run web search and code execution server-side and answer in
    Chat Completions, naming what ran in ``message.executed_tools``: the answer rests on
    tools no validation saw, as a Responses ``web_search_call`` does. From 2.4.0
    ``provider_executed_tool``; 2.3.0 and earlier read the text as the final answer."""
    raw = load("openai", "recorded_groq_compound_executed_tools")
    proposal = openai_adapter.parse(raw, KINDS)
    assert isinstance(proposal, InvalidProposal)
    r = proposal.reasons[0]
    assert (r.code, r.detail, r.provider_stop) == (
        Reject.PROVIDER_EXECUTED_TOOL,
        "executed_tools: search",
        "stop",
    )
    for version in BEFORE_2_4:
        assert isinstance(vocabularies.for_version(version).parse(raw, KINDS), FinalCandidate)


@pytest.mark.parametrize(
    "executed",
    [
        [{"index": 0, "type": "python", "arguments": "{}", "output": "4"}],
        [{"type": "search"}, {"type": "visit"}],
        [{}],
        ["search"],
        {"type": "search"},
        "search",
    ],
)
def test_any_reported_server_side_tool_refuses_the_turn(executed):
    for raw in (
        openai_adapter.render_text("The part is in stock."),
        openai_adapter.render_call("read_equipment", {"equipment_id": "EQ-1"}, "c1"),
    ):
        raw["choices"][0]["message"]["executed_tools"] = executed
        proposal = openai_adapter.parse(raw, KINDS)
        assert parsing.classify(proposal, KINDS) == Reject.PROVIDER_EXECUTED_TOOL, raw


@pytest.mark.parametrize("executed", [None, [], ""])
def test_no_server_side_tool_reported_reads_as_before(executed):
    raw = openai_adapter.render_text("The part is in stock.")
    raw["choices"][0]["message"]["executed_tools"] = executed
    assert openai_adapter.parse(raw, KINDS) == FinalCandidate({"text": "The part is in stock."})


# -- (g) an Ollama /api/chat body (2.4.0) -------------------------------------------------------
def _ollama(content: str, done: Any = True, **fields: Any) -> dict[str, Any]:
    return {
        "model": "llama3.2",
        "created_at": "2025-07-07T20:43:37.688511Z",
        "message": {"role": "assistant", "content": content, **fields},
        "done": done,
    }


def test_an_ollama_preamble_before_one_call_is_commentary_from_2_4_0():
    """Ollama's own compatible endpoint says ``tool_calls`` for ``done_reason: stop`` with
    calls (ollama openai/openai.go): 2.4.0 reads it so; 2.3.0 and earlier saw no finish
    reason and refused the preamble as ``mixed_output``."""
    raw = load("openai", "ollama_native_preamble_tool_call")
    reading = openai_adapter.read(raw, KINDS)
    assert reading.proposal == ObserveIntent("read_equipment", {"equipment_id": "EQ-17"})
    assert reading.commentary == "I'll read the equipment record first."
    for version in BEFORE_2_4:
        old = vocabularies.for_version(version).parse(raw, KINDS)
        assert parsing.classify(old, KINDS) == Reject.MIXED_OUTPUT


@pytest.mark.parametrize(
    ("done", "done_reason", "expected"),
    [
        (True, "stop", ""),
        (True, None, ""),  # none stated: read as before
        (True, "", ""),
        (True, "length", Reject.TRUNCATED),
        (False, None, Reject.TRUNCATED),  # a streamed chunk, not a finished response
        (False, "stop", Reject.TRUNCATED),
        (True, "load", Reject.UNKNOWN_SHAPE),
        (True, "unload", Reject.UNKNOWN_SHAPE),
        (True, "abort", Reject.UNKNOWN_SHAPE),
        (True, 1, Reject.UNKNOWN_SHAPE),
        ("true", "stop", Reject.UNKNOWN_SHAPE),
        (None, "stop", Reject.UNKNOWN_SHAPE),
    ],
)
def test_an_ollama_done_reason_is_its_finish_reason(done, done_reason, expected):
    raw = _ollama("The part is in stock.", done)
    if done_reason is not None:
        raw["done_reason"] = done_reason
    assert parsing.classify(openai_adapter.parse(raw, KINDS), KINDS) == expected


def test_a_chat_completion_choice_keeps_its_own_finish_reason():
    """Only a body in Ollama's shape (no ``choices``, no ``finish_reason``) is read by
    ``done_reason``; a choice that states its finish reason is read by that."""
    raw = openai_adapter.render_text("The part is in stock.")
    raw["done"] = False
    raw["choices"][0]["done_reason"] = "length"
    assert isinstance(openai_adapter.parse(raw, KINDS), FinalCandidate)
    choice = {**raw["choices"][0], "done": False}
    assert isinstance(openai_adapter.parse(choice, KINDS), FinalCandidate)


@pytest.mark.parametrize(
    "change",
    [
        {"executed_tools": [{"type": "x" * 100_000, "output": "y" * 500_000}]},
        {"executed_tools": [{"type": f"tool-{i}" * 5} for i in range(10_000)]},
        {"executed_tools": [[[[{"type": "search"}]]]]},
        {"done_reason": "z" * 1_000},
        {"done_reason": {"stop": True}, "done": True},
        {"done": [True]},
        {"message": ["not", "a", "message"]},
        {"message": None, "done_reason": "stop"},
    ],
)
def test_hostile_variants_of_the_new_shapes_are_typed_and_bounded(change):
    """Huge, nested or mistyped values where 2.4.0 reads ``executed_tools``, ``done`` and
    ``done_reason``: one typed rejection with a bounded detail, never an exception."""
    ollama = _ollama("The part is in stock.")
    groq = load("openai", "recorded_groq_compound_executed_tools")
    for raw in (ollama, groq):
        body = json.loads(json.dumps(raw))
        if "executed_tools" in change:
            message = body["message"] if "message" in body else body["choices"][0]["message"]
            message.update(change)
        elif "choices" in body:
            continue  # done / done_reason / message: Ollama's fields
        else:
            body.update(change)
        reading = openai_adapter._read(body, KINDS)  # unguarded: an exception would show
        proposal = reading.proposal
        assert isinstance(proposal, InvalidProposal), (change, proposal)
        assert proposal.reason_code != Reject.ADAPTER_ERROR
        assert all(len(r.detail) <= parsing.MAX_DETAIL for r in proposal.reasons)
        assert len(json.dumps(to_dict(proposal))) < 5_000, change


# -- (h) a shell OpenAI ran in its own container (Responses 1.3.0) ---------------------------
def test_a_hosted_shell_is_a_provider_executed_tool():
    """With the hosted shell tool OpenAI runs the commands in a container it manages
    (``environment`` ``container_auto`` / ``container_reference``) and puts each
    ``shell_call_output`` in the response: the answer rests on commands no validation saw.
    From 1.3.0 ``provider_executed_tool``; 1.2.0 and earlier named the output item
    ``unknown_shape`` and the call ``malformed_tool_call``."""
    raw = load("openai-responses", "recorded_hosted_shell_call_output")
    proposal = openai_responses_adapter.parse(raw, KINDS)
    assert isinstance(proposal, InvalidProposal)
    r = proposal.reasons[0]
    assert (r.code, r.detail) == (
        Reject.PROVIDER_EXECUTED_TOOL,
        "shell_call (hosted: container_reference), shell_call_output",
    )
    for version in EARLIER_ALL["openai-responses"][:-2]:  # the versions before 1.3.0
        old = vocabularies.for_version(version).parse(raw, KINDS)
        assert parsing.classify(old, KINDS) == Reject.UNKNOWN_SHAPE, version


def _shell_call(environment: Any = None) -> dict[str, Any]:
    call: dict[str, Any] = {
        "id": "sh_1",
        "type": "shell_call",
        "status": "completed",
        "call_id": "call_1",
        "action": {"commands": ["ls"], "max_output_length": None, "timeout_ms": None},
    }
    if environment is not None:
        call["environment"] = environment
    return {"id": "resp_1", "object": "response", "status": "completed", "output": [call]}


@pytest.mark.parametrize(
    "environment",
    [{"type": "container_auto"}, {"type": "container_reference", "container_id": "c"}],
)
def test_a_shell_call_in_a_provider_container_is_provider_executed(environment):
    proposal = openai_responses_adapter.parse(_shell_call(environment), KINDS)
    assert parsing.classify(proposal, KINDS) == Reject.PROVIDER_EXECUTED_TOOL


@pytest.mark.parametrize(
    "environment", [None, {"type": "local"}, {"type": 1}, "container_auto", {"kind": "x"}]
)
def test_a_shell_call_the_client_would_run_stays_a_malformed_tool_call(environment):
    """The local shell (no environment, or ``local``) asks the client to run commands: not
    a function call FieldOps offered, as before."""
    for version in (CURRENT["openai-responses"], *EARLIER_ALL["openai-responses"]):
        proposal = vocabularies.for_version(version).parse(_shell_call(environment), KINDS)
        assert parsing.classify(proposal, KINDS) == Reject.MALFORMED_TOOL_CALL, version


# -- (i) Together's eos and Azure's refusals and error codes (Chat Completions 2.5.0) ----------
def test_together_eos_is_the_end_of_an_answer_from_2_5_0():
    """Together's API types ``eos`` (the model's end-of-sequence token) beside ``stop``
    (together-py ``chat_completion.py``): a recorded Together answer is an answer from
    2.5.0. 2.3.0 / 2.4.0 named it ``unknown_shape``; 2.1.0 / 2.2.0 read it as an answer."""
    raw = load("openai", "recorded_together_eos_final")
    proposal = openai_adapter.parse(raw, KINDS)
    assert isinstance(proposal, FinalCandidate)
    assert proposal.artifact["text"].startswith("Why don't we ever hear secrets")
    for version in (openai_adapter.VERSION_2_3, openai_adapter.VERSION_2_4):
        old = vocabularies.for_version(version).parse(raw, KINDS)
        assert parsing.classify(old, KINDS) == Reject.UNKNOWN_SHAPE, version
    # eos is an answer's end, never a tool-use stop: a preamble beside a call stays mixed.
    call = openai_adapter.render_message(
        "Reading it now.", [("read_equipment", {"equipment_id": "EQ-1"}, "c1")]
    )
    call["choices"][0]["finish_reason"] = "eos"
    assert parsing.classify(openai_adapter.parse(call, KINDS), KINDS) == Reject.MIXED_OUTPUT


def test_an_azure_choice_filtered_without_a_message_is_a_refusal():
    """Azure drops the message of a completion its filter blocked: the choice keeps only
    ``finish_reason: content_filter`` and ``content_filter_results``. From 2.5.0
    ``model_refusal`` naming the filtered categories; 2.4.0 and earlier named it
    ``unknown_shape`` (not an assistant message)."""
    raw = load("openai", "recorded_azure_content_filter_without_message")
    proposal = openai_adapter.parse(raw, KINDS)
    assert isinstance(proposal, InvalidProposal)
    r = proposal.reasons[0]
    assert (r.code, r.category, r.explanation, r.provider_stop) == (
        Reject.REFUSAL,
        "content_filter",
        "completion: hate",
        "content_filter",
    )
    for version in BEFORE_2_5:
        old = vocabularies.for_version(version).parse(raw, KINDS)
        assert parsing.classify(old, KINDS) == Reject.UNKNOWN_SHAPE, version
    # Without filter results, the finish reason alone still says the filter acted.
    del raw["choices"][0]["content_filter_results"]
    bare = openai_adapter.parse(raw, KINDS)
    assert parsing.classify(bare, KINDS) == Reject.REFUSAL
    assert bare.reasons[0].category == "content_filter"
    # A choice without a message that no filter stopped is still not an output.
    raw["choices"][0]["finish_reason"] = "stop"
    assert parsing.classify(openai_adapter.parse(raw, KINDS), KINDS) == Reject.UNKNOWN_SHAPE


def test_an_azure_prompt_filter_error_is_a_content_filter_refusal():
    """Azure refuses a prompt its filter blocks with an error body (``code:
    content_filter``, the categories in ``innererror.content_filter_result``): a refusal by
    the provider's filter, as a blocked ``prompt_filter_results`` is (2.2.0). From 2.5.0
    ``model_refusal``; 2.4.0 and earlier ``provider_error:unclassified``."""
    raw = load("openai", "recorded_azure_prompt_content_filter_error")
    proposal = openai_adapter.parse(raw, KINDS)
    assert isinstance(proposal, InvalidProposal)
    r = proposal.reasons[0]
    assert (r.code, r.category, r.explanation) == (
        Reject.REFUSAL,
        "content_filter",
        "prompt: hate, prompt: self-harm, prompt: violence",
    )
    for version in BEFORE_2_5:
        old = vocabularies.for_version(version).parse(raw, KINDS)
        assert parsing.classify(old, KINDS) == "provider_error:unclassified", version
    # No categories named: still the filter's refusal.
    del raw["error"]["innererror"]
    bare = openai_adapter.parse(raw, KINDS)
    assert (bare.reason_code, bare.reasons[0].category) == (Reject.REFUSAL, "content_filter")


@pytest.mark.parametrize(
    ("code", "expected"),
    [
        ("404", "provider_error:client_error"),
        ("429", "provider_error:rate_limited"),
        ("401", "provider_error:auth_rejected"),
        ("500", "provider_error:server_error"),
        ("408", "provider_error:timeout"),
        ("200", "provider_error:unclassified"),
        ("4040", "provider_error:unclassified"),
        ("\uff14\uff10\uff14", "provider_error:unclassified"),  # full-width digits: no status
        (" 404", "provider_error:unclassified"),
        ("DeploymentNotFound", "provider_error:unclassified"),
        ("rate_limit_exceeded", "provider_error:rate_limited"),  # a named code still wins
    ],
)
def test_an_azure_string_status_code_is_read_as_the_http_status(code, expected):
    """Azure's error bodies name the HTTP status as a string ``code`` (``"404"``,
    ``"429"``): from 2.5.0 classified as that status, as OpenRouter's integer code is;
    2.4.0 and earlier left a digit string unclassified."""
    raw = {"error": {"code": code, "message": "Resource not found"}}
    assert openai_adapter.parse(raw, KINDS).reason_code == expected
    if code.isascii() and code.isdigit():
        old = vocabularies.for_version(openai_adapter.VERSION_2_4).parse(raw, KINDS)
        assert old.reason_code == "provider_error:unclassified"


@pytest.mark.parametrize(
    "error",
    [
        {"code": "content_filter", "innererror": {"content_filter_result": "x" * 100_000}},
        {"code": "content_filter", "innererror": [1, 2]},
        {
            "code": "content_filter",
            "innererror": {
                "content_filter_result": {f"c{i}" * 40: {"filtered": True} for i in range(5_000)}
            },
        },
        {"code": "9" * 5_000},
        {"code": "content_filter", "message": {"not": "text"}},
    ],
)
def test_hostile_variants_of_the_azure_error_shapes_are_typed_and_bounded(error):
    reading = openai_adapter._read({"error": error}, KINDS)  # unguarded
    proposal = reading.proposal
    assert isinstance(proposal, InvalidProposal)
    assert proposal.reason_code != Reject.ADAPTER_ERROR
    assert all(len(r.detail) <= parsing.MAX_DETAIL for r in proposal.reasons)
    assert len(json.dumps(to_dict(proposal))) < 5_000


def test_ollama_thinking_is_commentary_from_2_5_0():
    """Ollama's ``message.thinking`` is declared reasoning, like ``reasoning_content``: from
    2.5.0 commentary evidence beside the call; 2.4.0 left it in the raw output only."""
    raw = load("openai", "recorded_ollama_native_thinking_tool_call")
    reading = openai_adapter.read(raw, KINDS)
    assert reading.proposal == ActionIntent("add_two_numbers", {"a": 2, "b": 3})
    assert reading.commentary.startswith("Thinking Process:")
    old = vocabularies.for_version(openai_adapter.VERSION_2_4).read(raw, KINDS)
    assert (old.proposal, old.commentary) == (reading.proposal, "")


# -- (g) a web search or grounding the provider ran itself -------------------------------------
def test_an_answer_resting_on_the_providers_own_web_search_is_not_a_final_from_2_6_0():
    """OpenRouter's web search (recorded): the answer carries ``url_citation`` annotations
    and ``usage.server_tool_use_details`` counts the search. From 2.6.0
    ``provider_executed_tool`` naming both, the answer kept as commentary; 2.5.0 and every
    earlier version read the answer as a final candidate."""
    raw = load("openai", "recorded_openrouter_web_search_annotations")
    reading = openai_adapter.read(raw, KINDS)
    proposal = reading.proposal
    assert isinstance(proposal, InvalidProposal)
    r = proposal.reasons[0]
    assert (r.code, r.provider_stop) == (Reject.PROVIDER_EXECUTED_TOOL, "stop")
    assert "url_citation" in r.detail and "server_tool_use_details" in r.detail
    assert reading.commentary == "https://github.com/pydantic/pydantic-ai"
    for version in EARLIER_ALL["openai"][:-1]:  # before 2.6.0
        old = vocabularies.for_version(version).parse(raw, KINDS)
        assert old == FinalCandidate({"text": "https://github.com/pydantic/pydantic-ai"}), version


@pytest.mark.parametrize(
    ("change", "searched"),
    [
        # Each sign alone is enough...
        (lambda raw: raw.pop("usage"), True),
        (lambda raw: raw["choices"][0]["message"].pop("annotations"), True),
        # ... Perplexity's search results beside the choices too...
        (
            lambda raw: (
                raw["choices"][0]["message"].pop("annotations"),
                raw.pop("usage"),
                raw.update(citations=["https://docs.example/manual"]),
            ),
            True,
        ),
        # ... and without any, the answer is an answer again.
        (
            lambda raw: (raw["choices"][0]["message"].pop("annotations"), raw.pop("usage")),
            False,
        ),
        # Empty annotations (every gpt-4o answer carries "annotations": []), counts of zero,
        # empty search results, and annotations of another type are no sign of a search.
        (
            lambda raw: (
                raw["choices"][0]["message"].update(annotations=[{"type": "file_citation"}]),
                raw["usage"].update(
                    server_tool_use_details={"web_search_requests": 0, "tool_calls_executed": 0}
                ),
                raw.update(search_results=[], citations=None),
            ),
            False,
        ),
    ],
)
def test_each_sign_of_a_provider_web_search_is_read_alone(change, searched):
    raw = load("openai", "recorded_openrouter_web_search_annotations")
    change(raw)
    proposal = openai_adapter.parse(raw, KINDS)
    expected = Reject.PROVIDER_EXECUTED_TOOL if searched else ""
    assert parsing.classify(proposal, KINDS) == expected


def test_a_gemini_answer_grounded_by_google_is_not_a_final_from_1_1_0():
    """Grounding with Google Search and URL context (recorded): Google searched or fetched
    the pages itself and the candidate says so (``groundingMetadata``,
    ``urlContextMetadata``). From 1.1.0 ``provider_executed_tool``; 1.0.0 read the text as a
    final candidate."""
    for name, named in (
        ("recorded_google_search_grounding", "groundingMetadata.webSearchQueries"),
        ("recorded_url_context_grounding", "urlContextMetadata.urlMetadata"),
    ):
        raw = load("gemini", name)
        text = raw["candidates"][0]["content"]["parts"][0]["text"]
        reading = gemini_adapter.read(raw, KINDS)
        r = reading.proposal.reasons[0]
        assert (r.code, r.provider_stop) == (Reject.PROVIDER_EXECUTED_TOOL, "STOP"), name
        assert named in r.detail, name
        assert reading.commentary == text.strip()
        old = vocabularies.for_version(gemini_adapter.VERSION_1_0).parse(raw, KINDS)
        assert old == FinalCandidate({"text": text}), name


@pytest.mark.parametrize("metadata", [{}, {"groundingChunks": [], "webSearchQueries": []}])
def test_an_empty_grounding_metadata_names_no_search(metadata):
    raw = gemini_adapter.render_text("Done.")
    raw["candidates"][0]["groundingMetadata"] = metadata
    raw["candidates"][0]["urlContextMetadata"] = {"urlMetadata": []}
    assert gemini_adapter.parse(raw, KINDS) == FinalCandidate({"text": "Done."})


@pytest.mark.parametrize(
    ("model", "search"),
    [
        ("gpt-4o-search-preview", True),
        ("gpt-4o-mini-search-preview-2025-03-11", True),
        ("gpt-5-search-api", True),
        ("gpt-5-search-api-2025-10-14", True),
        ("openai/gpt-4o-search-preview", True),  # behind a gateway
        ("gpt-4o", False),
        ("gpt-4o-2024-08-06", False),
        ("text-search-ada-doc-001", False),  # an embedding model's name, not a search model
        ("my-search-preview", False),
        ("", False),
    ],
)
def test_an_openai_search_model_is_known_by_its_name(model, search):
    raw = openai_adapter.render_text("Done: part A17 is reserved in slot S-N1-01.")
    raw["model"] = model
    proposal = openai_adapter.parse(raw, KINDS)
    assert parsing.classify(proposal, KINDS) == (Reject.PROVIDER_EXECUTED_TOOL if search else "")


@pytest.mark.parametrize(
    ("annotation", "searched"),
    [
        ({"type": "url_citation", "url": "https://maker.example", "title": "x"}, True),
        ({"type": "file_citation", "file_id": "file-1", "index": 0}, False),
        ({"type": "file_path", "file_id": "file-1", "index": 0}, False),
        ("url_citation", False),  # not an annotation object: nothing said
    ],
)
def test_a_responses_answer_citing_web_pages_rests_on_a_search_from_1_4_0(annotation, searched):
    """A Responses-compatible API that searched before it answered without a search item
    (Parallel, OpenRouter's web plugin): the ``url_citation`` annotations say so. From 1.4.0
    ``provider_executed_tool``; 1.3.0 and earlier read the text as the answer."""
    raw = openai_responses_adapter.render_text("Done: part A17 is reserved in slot S-N1-01.")
    raw["output"][0]["content"][0]["annotations"] = [annotation]
    proposal = openai_responses_adapter.parse(raw, KINDS)
    assert parsing.classify(proposal, KINDS) == (Reject.PROVIDER_EXECUTED_TOOL if searched else "")
    for version in EARLIER_ALL["openai-responses"][:-1]:  # before 1.4.0
        assert isinstance(vocabularies.for_version(version).parse(raw, KINDS), FinalCandidate)


# -- (k) Anthropic error types the shared table did not know (2.4.0) --------------------------
@pytest.mark.parametrize(
    "error_type",
    [
        "billing_error",  # HTTP 402: credit balance, payment
        "conflict_error",  # HTTP 409
        "memory_precondition_failed_error",
        "memory_path_conflict_error",
    ],
)
def test_an_anthropic_client_error_type_is_a_client_error_from_2_4(error_type):
    """``anthropic/types/shared/error_type.py`` (anthropic 2.17.0) documents these 4xx error
    types; a live call is a client error by its status, and from 2.4.0 a replayed body of the
    same type is too. 2.3.0 and earlier read them ``unclassified``, kept for their runs."""
    raw = {"type": "error", "error": {"type": error_type, "message": "m"}, "request_id": "r"}
    new = vocabularies.get("anthropic").parse(raw, KINDS)
    assert isinstance(new, InvalidProposal)
    assert new.reason_code == "provider_error:client_error"
    for version in EARLIER_ALL["anthropic"][:-1]:  # before 2.4.0
        old = vocabularies.for_version(version).parse(raw, KINDS)
        assert isinstance(old, InvalidProposal)
        assert old.reason_code == "provider_error:unclassified", version


@pytest.mark.parametrize(
    ("error_type", "expected"),
    [
        ("invalid_request_error", "client_error"),
        ("authentication_error", "auth_rejected"),
        ("billing_error", "client_error"),
        ("permission_error", "auth_rejected"),
        ("not_found_error", "client_error"),
        ("request_too_large", "client_error"),
        ("rate_limit_error", "rate_limited"),
        ("timeout_error", "timeout"),
        ("api_error", "server_error"),
        ("overloaded_error", "overloaded"),
        ("a_future_error", "unclassified"),
    ],
)
def test_each_documented_anthropic_error_type_has_the_class_its_status_gives(error_type, expected):
    raw = {"type": "error", "error": {"type": error_type, "message": "m"}}
    proposal = vocabularies.get("anthropic").parse(raw, KINDS)
    assert isinstance(proposal, InvalidProposal)
    assert proposal.reason_code == f"provider_error:{expected}"


# -- (l) Anthropic text citing web search results without a search block (2.4.0) -------------
def test_an_anthropic_answer_citing_web_search_results_is_provider_executed_from_2_4():
    """A ``text`` block whose ``citations`` hold a ``web_search_result_location`` rests on a
    web search the provider ran, even without its ``server_tool_use`` block (an
    Anthropic-compatible API that searched by itself): ``provider_executed_tool``, as the
    Responses adapter reads ``url_citation`` from 1.4.0. Citations of documents or search
    results the client gave are no sign. 2.3.0 read it as the answer."""
    cited = {
        "type": "text",
        "text": "Part A17 ships from LOC-N1.",
        "citations": [
            {
                "type": "web_search_result_location",
                "url": "https://example.com/a17",
                "title": "A17",
                "encrypted_index": "Eo8BCioIAhgBIiQ",
                "cited_text": "A17 ships from LOC-N1",
            }
        ],
    }
    raw = {**anthropic_adapter.render_text("x"), "content": [cited]}
    new = vocabularies.get("anthropic").parse(raw, KINDS)
    assert isinstance(new, InvalidProposal)
    assert new.reason_code == Reject.PROVIDER_EXECUTED_TOOL
    assert "web_search_result_location" in new.detail
    for version in EARLIER_ALL["anthropic"][:-1]:  # before 2.4.0
        assert isinstance(vocabularies.for_version(version).parse(raw, KINDS), FinalCandidate)
    document = {
        **cited,
        "citations": [
            {
                "type": "char_location",
                "cited_text": "A17",
                "document_index": 0,
                "document_title": "manual",
                "start_char_index": 0,
                "end_char_index": 3,
            }
        ],
    }
    raw = {**raw, "content": [document]}
    assert isinstance(vocabularies.get("anthropic").parse(raw, KINDS), FinalCandidate)


# -- (m) a Responses output item that is not finished (1.5.0) ----------------------------------
@pytest.mark.parametrize("item_status", ["in_progress", "incomplete"])
@pytest.mark.parametrize("kind", ["message", "function_call"])
def test_a_responses_item_not_finished_is_truncated_from_1_5(kind, item_status):
    """``ResponseOutputMessage.status`` / ``ResponseFunctionToolCall.status`` (openai 3.63.0)
    say whether the item itself is finished. One ``in_progress`` or ``incomplete`` is cut
    (a stream snapshot, a compatible API that states no response status), even when the
    response says ``completed`` or says nothing: from 1.5.0 ``truncated_output``; 1.4.0 read
    the text as the answer, the call as a proposal."""
    if kind == "message":
        raw = openai_responses_adapter.render_text("Done: part A17 is reserved.")
    else:
        raw = openai_responses_adapter.render_call("read_equipment", {"equipment_id": "EQ-17"}, "1")
    raw["output"] = [{**item, "status": item_status} for item in raw["output"]]
    for stated in ("completed", None):
        body = (
            {**raw, "status": stated} if stated else {k: v for k, v in raw.items() if k != "status"}
        )
        new = vocabularies.get("openai-responses").parse(body, KINDS)
        assert isinstance(new, InvalidProposal)
        assert new.reason_code == Reject.TRUNCATED
        assert item_status in new.detail
        old = vocabularies.for_version(openai_responses_adapter.VERSION_1_4).parse(body, KINDS)
        assert not isinstance(old, InvalidProposal)
    done = {**raw, "output": [{**item, "status": "completed"} for item in raw["output"]]}
    assert not isinstance(vocabularies.get("openai-responses").parse(done, KINDS), InvalidProposal)


@pytest.mark.parametrize(
    ("reason", "expected"),
    [
        ("max_output_tokens", Reject.TRUNCATED),
        ("max_messages", Reject.TRUNCATED),
        ("steered", Reject.TRUNCATED),
        ("content_filter", Reject.REFUSAL),
    ],
)
def test_incomplete_details_beside_another_status_is_read_as_incomplete_from_1_5(reason, expected):
    """``Response.incomplete_details.reason`` (openai 3.63.0: ``max_output_tokens``,
    ``max_messages``, ``content_filter``, ``steered``) says the output was cut; beside
    ``status: completed`` (or none) it is read as ``incomplete`` from 1.5.0, never an
    answer. 1.4.0 read the text as the answer."""
    raw = openai_responses_adapter.render_text("Done: part A17 is reserved.")
    raw["incomplete_details"] = {"reason": reason}
    for body in (raw, {k: v for k, v in raw.items() if k != "status"}):
        new = vocabularies.get("openai-responses").parse(body, KINDS)
        assert isinstance(new, InvalidProposal)
        assert new.reason_code == expected
        old = vocabularies.for_version(openai_responses_adapter.VERSION_1_4).parse(body, KINDS)
        assert isinstance(old, FinalCandidate)
    raw["incomplete_details"] = None
    assert isinstance(vocabularies.get("openai-responses").parse(raw, KINDS), FinalCandidate)


# -- (n) a Converse guardrail trace that says the guardrail acted (1.1.0) ----------------------
def _assessment(policy: str, entries: str, entry: dict[str, Any]) -> dict[str, Any]:
    return {policy: {entries: [entry]}}


# One assessment per policy of ``GuardrailAssessmentTypeDef`` (mypy-boto3-bedrock-runtime
# 1.43.62), each with its own ``action`` literal.
GUARDRAIL_ACTS = {
    "topic": _assessment(
        "topicPolicy", "topics", {"name": "Purchases", "type": "DENY", "action": "BLOCKED"}
    ),
    "content": _assessment(
        "contentPolicy",
        "filters",
        {"type": "VIOLENCE", "confidence": "HIGH", "action": "BLOCKED", "detected": True},
    ),
    "custom word": _assessment(
        "wordPolicy", "customWords", {"match": "A17", "action": "BLOCKED", "detected": True}
    ),
    "managed word": _assessment(
        "wordPolicy", "managedWordLists", {"match": "x", "type": "PROFANITY", "action": "BLOCKED"}
    ),
    "pii anonymized": _assessment(
        "sensitiveInformationPolicy",
        "piiEntities",
        {"match": "jane@example.com", "type": "EMAIL", "action": "ANONYMIZED"},
    ),
    "regex": _assessment(
        "sensitiveInformationPolicy", "regexes", {"name": "serial", "action": "BLOCKED"}
    ),
    "grounding": _assessment(
        "contextualGroundingPolicy",
        "filters",
        {"type": "GROUNDING", "threshold": 0.8, "score": 0.2, "action": "BLOCKED"},
    ),
}


def _with_trace(raw: dict[str, Any], guardrail: Any) -> dict[str, Any]:
    return {**raw, "trace": {"guardrail": guardrail}}


@pytest.mark.parametrize("where", ["outputAssessments", "inputAssessment"])
@pytest.mark.parametrize("act", sorted(GUARDRAIL_ACTS))
@pytest.mark.parametrize("stop", ["end_turn", "tool_use", None])
def test_a_converse_guardrail_trace_that_acted_is_a_refusal_from_1_1(where, act, stop):
    """``trace.guardrail`` (``GuardrailTraceAssessmentTypeDef``: ``inputAssessment`` by
    guardrail, ``outputAssessments`` by guardrail, each policy entry with its ``action``)
    saying a guardrail blocked or masked is the guardrail's refusal whatever the
    ``stopReason`` says: ``model_refusal`` (category ``guardrail_intervened``, as the stop
    reason of that name). 1.0.0 read the text as the answer, the call as a proposal."""
    assessment = GUARDRAIL_ACTS[act]
    assessments = {"gr-1": [assessment]} if where == "outputAssessments" else {"gr-1": assessment}
    guardrail = {"actionReason": "Guardrail blocked.", where: assessments}
    for base in (
        bedrock_adapter.render_text("Done: part A17 is reserved."),
        bedrock_adapter.render_call("read_equipment", {"equipment_id": "EQ-17"}, "c1"),
    ):
        raw = _with_trace(base, guardrail)
        if stop is None:
            del raw["stopReason"]
        else:
            raw["stopReason"] = stop
        new = vocabularies.get("bedrock-converse").parse(raw, KINDS)
        assert isinstance(new, InvalidProposal), (act, base)
        r = new.reasons[0]
        assert (r.code, r.category, r.explanation) == (
            Reject.REFUSAL,
            "guardrail_intervened",
            "Guardrail blocked.",
        )
        assert r.provider_stop == (stop or "")
        assert "guardrail" in r.detail
        old = vocabularies.for_version(bedrock_adapter.VERSION_1_0).parse(raw, KINDS)
        if stop != "tool_use" and "toolUse" not in json.dumps(base):
            assert isinstance(old, FinalCandidate), act
        elif stop is not None and "toolUse" in json.dumps(base):
            assert isinstance(old, ObserveIntent), act


@pytest.mark.parametrize(
    "guardrail",
    [
        # The recorded trace of a guardrail that took no action (see the fixture).
        "recorded",
        {"actionReason": "No action."},
        # Detected but not acted on (a policy in detect mode): action NONE.
        {
            "outputAssessments": {
                "g": [
                    {
                        "contentPolicy": {
                            "filters": [{"type": "VIOLENCE", "action": "NONE", "detected": True}]
                        }
                    }
                ]
            }
        },
        {"inputAssessment": {"g": {"topicPolicy": {"topics": []}}}},
        {},
        None,
        "text",
        {"outputAssessments": ["not", "a", "map"], "inputAssessment": 3},
        {"outputAssessments": {"g": [{"contentPolicy": {"filters": "BLOCKED"}}]}},
        {"outputAssessments": {"g": [{"contentPolicy": [{"action": "BLOCKED"}]}]}},
    ],
)
def test_a_guardrail_trace_that_took_no_action_reads_as_before(guardrail):
    if guardrail == "recorded":
        raw = load("bedrock-converse", "recorded_guardrail_no_action")
    else:
        raw = _with_trace(bedrock_adapter.render_text("Done: part A17 is reserved."), guardrail)
    for version in (CURRENT["bedrock-converse"], bedrock_adapter.VERSION_1_0):
        assert isinstance(vocabularies.for_version(version).parse(raw, KINDS), FinalCandidate)


@pytest.mark.parametrize(
    "guardrail",
    [
        {"outputAssessments": {"g": [GUARDRAIL_ACTS["content"]] * 2_000}},
        {f"g{i}" * 30: GUARDRAIL_ACTS["topic"] for i in range(3_000)},
        {"outputAssessments": {"g": [{"topicPolicy": {"topics": [{"action": "x" * 50_000}]}}]}},
        {"outputAssessments": {"g": [{"topicPolicy": {"topics": [{"action": {"a": 1}}]}}]}},
        {"actionReason": {"not": "text"}, "inputAssessment": {"g": GUARDRAIL_ACTS["regex"]}},
    ],
)
def test_hostile_guardrail_traces_are_typed_and_bounded(guardrail):
    raw = _with_trace(bedrock_adapter.render_text("Done."), guardrail)
    if "inputAssessment" not in guardrail and "outputAssessments" not in guardrail:
        raw["trace"]["guardrail"] = {"inputAssessment": guardrail}
    proposal = bedrock_adapter._read(raw, KINDS).proposal  # unguarded
    assert isinstance(proposal, InvalidProposal)
    assert proposal.reason_code not in (Reject.ADAPTER_ERROR, Reject.UNKNOWN_SHAPE)
    assert all(len(r.detail) <= parsing.MAX_DETAIL for r in proposal.reasons)
    assert len(json.dumps(to_dict(proposal))) < 5_000


# -- (o) a Gemini functionCall part marked as a thought (1.2.0) ---------------------------------
def _gemini_parts(*parts: dict[str, Any]) -> dict[str, Any]:
    raw = gemini_adapter.render_text("x")
    raw["candidates"][0]["content"]["parts"] = list(parts)
    return raw


THOUGHT_CALL = {
    "functionCall": {"id": "t1", "name": "reserve_part", "args": {"part_id": "A17"}},
    "thought": True,
}
REAL_CALL = {"functionCall": {"id": "c1", "name": "read_equipment", "args": {"equipment_id": "1"}}}


@pytest.mark.parametrize(
    "parts",
    [
        (THOUGHT_CALL,),
        (THOUGHT_CALL, REAL_CALL),
        (REAL_CALL, THOUGHT_CALL),
        ({"text": "Let me think.", "thought": True}, THOUGHT_CALL),
        ({"text": "Reading it now."}, THOUGHT_CALL),
        ({**THOUGHT_CALL, "thoughtSignature": "c2ln"},),
    ],
)
def test_a_function_call_marked_as_a_thought_is_never_a_proposal_from_1_2(parts):
    """``Part.thought`` (google-genai 3.6.1): "whether the part represents the model's thought
    process or reasoning". A ``functionCall`` in a thought part is the model thinking about a
    call, not making it; the types say nothing more, so from 1.2.0 it is ``unknown_shape``,
    named, and no call beside it is proposed either. 1.1.0 proposed the call."""
    raw = _gemini_parts(*parts)
    new = vocabularies.get("gemini").parse(raw, KINDS)
    assert isinstance(new, InvalidProposal)
    assert new.reason_code == Reject.UNKNOWN_SHAPE
    assert "functionCall marked as a thought" in new.detail
    old = vocabularies.for_version(gemini_adapter.VERSION_1_1).parse(raw, KINDS)
    assert not isinstance(old, InvalidProposal) or old.reason_code != Reject.UNKNOWN_SHAPE


@pytest.mark.parametrize("thought", [False, None])
def test_a_function_call_not_marked_as_a_thought_is_a_call(thought):
    raw = _gemini_parts({**REAL_CALL, "thought": thought})
    assert vocabularies.get("gemini").parse(raw, KINDS) == ObserveIntent(
        "read_equipment", {"equipment_id": "1"}
    )


# -- (p) the finish reasons google-genai added (1.2.0) ------------------------------------------
NEWER_FINISHES = {
    # "Request has at least one thought signature missing": the request was wrong.
    "MISSING_THOUGHT_SIGNATURE": "provider_error:client_error",
    # "Finishes due to malformed response": the adapter's malformed-call class.
    "MALFORMED_RESPONSE": Reject.MALFORMED_TOOL_CALL,
    # "Request was filtered by an escalation rule": a filter's refusal.
    "ESCALATION": Reject.REFUSAL,
    # "the user account is limited or disabled due to Prohibited Use Policy violations".
    "PUP_LIMITED_DISABLED": "provider_error:auth_rejected",
    # "reached the per-request token limit, but generation is not yet complete".
    "CONTINUATION": Reject.TRUNCATED,
}


@pytest.mark.parametrize(("finish", "expected"), sorted(NEWER_FINISHES.items()))
def test_each_newer_gemini_finish_reason_is_its_typed_failure_from_1_2(finish, expected):
    """google-genai 3.6.1 ``FinishReason`` documents five values 1.1.0 did not know (it read
    them ``unknown_shape``): from 1.2.0 each is the typed failure its documentation calls
    for, with text or with a call, the finish reason kept as the provider's stop."""
    for raw in (
        gemini_adapter.render_text("Part A17 is"),
        gemini_adapter.render_call("read_equipment", {"equipment_id": "EQ-17"}, "c1"),
    ):
        raw["candidates"][0]["finishReason"] = finish
        new = vocabularies.get("gemini").parse(raw, KINDS)
        assert isinstance(new, InvalidProposal)
        assert new.reason_code == expected
        assert new.reasons[0].provider_stop == finish
        assert finish in new.detail
        for version in EARLIER_ALL["gemini"][:-1]:  # before 1.2.0
            old = vocabularies.for_version(version).parse(raw, KINDS)
            assert parsing.classify(old, KINDS) == Reject.UNKNOWN_SHAPE, version
        raw["candidates"][0]["finishMessage"] = "m" * 5_000
        new = vocabularies.get("gemini").parse(raw, KINDS)
        assert isinstance(new, InvalidProposal)
        assert new.reason_code == expected
        assert all(len(r.detail) <= parsing.MAX_DETAIL for r in new.reasons)


def test_every_documented_gemini_finish_reason_is_known_and_others_stay_unknown():
    variants = json.loads((FIXTURES.parent / "provider_variants" / "gemini.json").read_text())
    documented = {
        r["name"].removeprefix("finish_").removesuffix("_with_call")
        for r in variants
        if r["name"].startswith("finish_") and "FUTURE" not in r["name"]
    }
    assert set(NEWER_FINISHES) <= documented <= gemini_adapter.FINISH_REASONS
    for finish in ("FUTURE_REASON", "continuation", "STOP ", ""):
        raw = gemini_adapter.render_text("Done.")
        raw["candidates"][0]["finishReason"] = finish
        assert parsing.classify(gemini_adapter.parse(raw, KINDS), KINDS) == Reject.UNKNOWN_SHAPE


# -- (q) an output the provider has not finished (Messages 2.5.0, Chat 2.7.0, Gemini 1.3.0) ----
# Each: the stop field stated as unfinished, the fixture, the version before the fix and what
# it made of it. A stop field that is absent (not null) is what compatible gateways send for a
# finished output (recorded: OpenRouter -> Nebius without finish_reason): read as before,
# except Gemini's, whose absence the API documents as "the model has not stopped".
UNFINISHED = {
    # anthropic 2.17.0 Message.stop_reason: "In streaming mode, it is null in the
    # message_start event and non-null otherwise" (the stream's message so far).
    "anthropic": (
        anthropic_adapter.VERSION_2_4,
        {
            "stream_snapshot_null_stop_text": FinalCandidate,
            "stream_snapshot_null_stop_tool_use": ObserveIntent,
        },
    ),
    # openai 3.63.0: ChatCompletion's Choice.finish_reason is never null; a chunk's is null
    # until the chunk that ends the choice.
    "openai": (openai_adapter.VERSION_2_6, {"finish_reason_null_text": FinalCandidate}),
    # google-genai Candidate.finish_reason: "If empty, the model has not stopped generating
    # the tokens" (a streamGenerateContent chunk before the last).
    "gemini": (
        gemini_adapter.VERSION_1_2,
        {
            "stream_chunk_text_without_finish": FinalCandidate,
            "recorded_vertex_call_without_args": ActionIntent,  # read_theme: not ours
        },
    ),
}
UNFINISHED_CASES = [
    (vocabulary, name) for vocabulary, (_, names) in UNFINISHED.items() for name in names
]


@pytest.mark.parametrize(("vocabulary", "name"), UNFINISHED_CASES)
def test_an_unfinished_output_is_truncated_and_the_version_before_reads_it_as_before(
    vocabulary, name
):
    raw = load(vocabulary, name)
    new = vocabularies.get(vocabulary).parse(raw, KINDS)
    assert isinstance(new, InvalidProposal)
    assert [r.code for r in new.reasons] == [Reject.TRUNCATED]
    assert "not finished" in new.detail
    before, expected = UNFINISHED[vocabulary]
    assert isinstance(vocabularies.for_version(before).parse(raw, KINDS), expected[name])


@pytest.mark.parametrize("vocabulary", sorted(UNFINISHED))
def test_an_absent_stop_reads_as_before_but_a_null_one_is_unfinished(vocabulary):
    """The stop field stated null is unfinished in every changed vocabulary; absent, it is a
    finished answer for Anthropic and Chat Completions (compatible gateways leave it out) and
    unfinished for Gemini only, whose API documents an empty finish reason so."""
    vocab = vocabularies.get(vocabulary)
    raw = vocab.text("Done: part A17 is reserved.")
    holder, key = {
        "anthropic": (raw, "stop_reason"),
        "openai": (raw["choices"][0] if "choices" in raw else raw, "finish_reason"),
        "gemini": (raw["candidates"][0] if "candidates" in raw else raw, "finishReason"),
    }[vocabulary]
    holder[key] = None
    assert parsing.classify(vocab.parse(raw, KINDS), KINDS) == Reject.TRUNCATED
    before = vocabularies.for_version(UNFINISHED[vocabulary][0])
    assert isinstance(before.parse(raw, KINDS), FinalCandidate)
    del holder[key]
    absent = parsing.classify(vocab.parse(raw, KINDS), KINDS)
    assert absent == (Reject.TRUNCATED if vocabulary == "gemini" else "")
    assert isinstance(before.parse(raw, KINDS), FinalCandidate)
