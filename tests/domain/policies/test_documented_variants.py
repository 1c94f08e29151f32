"""Every response variant the providers' own type definitions document, read by each adapter.

``tests/fixtures/provider_variants/<vocabulary>.json`` holds one small recorded-shaped output
per documented variant (stop / finish reasons, statuses, content block and output item
types, prompt block reasons, error types, missing or null usage, unknown extra fields, empty
content), each with its provenance (the SDK, its version and the type it was built from) and
what the vocabulary's current adapter makes of it: a proposal only from a real tool call; a
refusal, a truncation, a safety block or an unknown shape is the adapter's typed failure,
never an answer; an error body is its provider error class. No installed version, current or
earlier, may fail on any of them (``adapter_error`` is the guard catching an exception).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from capabilities.registry import ALL_CONTRACTS
from runs.domain.proposals import FinalCandidate, InvalidProposal, Proposal
from runs.policies import vocabularies
from runs.policies.parsing import Reject

VARIANTS = Path(__file__).resolve().parents[2] / "fixtures" / "provider_variants"
KINDS = {cid: c.kind.value for cid, c in ALL_CONTRACTS.items()}
SDKS = (
    "anthropic 2.17.0",
    "openai 3.63.0",
    "google-genai 3.6.1",
    "mypy-boto3-bedrock-runtime 1.43.62",
)


def _rows(vocabulary: str) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = json.loads((VARIANTS / f"{vocabulary}.json").read_text())
    return rows


CASES = [
    pytest.param(vocabulary, row, id=f"{vocabulary}-{row['name']}")
    for vocabulary in sorted(vocabularies.VOCABULARIES)
    for row in _rows(vocabulary)
]


def outcome(proposal: Proposal) -> str:
    if isinstance(proposal, InvalidProposal):
        return proposal.reason_code
    return type(proposal).__name__


def test_every_vocabulary_has_its_documented_variants():
    assert sorted(p.stem for p in VARIANTS.glob("*.json")) == sorted(vocabularies.VOCABULARIES)
    for vocabulary in vocabularies.VOCABULARIES:
        names = [row["name"] for row in _rows(vocabulary)]
        assert len(names) == len(set(names)) >= 20, vocabulary


@pytest.mark.parametrize(("vocabulary", "row"), CASES)
def test_the_current_adapter_reads_each_documented_variant_explicitly(vocabulary, row):
    assert row["provenance"].startswith("constructed from ")
    assert any(sdk in row["provenance"] for sdk in SDKS), row["provenance"]
    proposal = vocabularies.get(vocabulary).parse(row["output"], KINDS)
    assert outcome(proposal) == row["expect"]
    assert outcome(proposal) != Reject.ADAPTER_ERROR


@pytest.mark.parametrize(("vocabulary", "row"), CASES)
def test_no_installed_version_fails_on_a_documented_variant(vocabulary, row):
    for version, vocab in vocabularies.ADAPTERS.items():
        if vocab.name != vocabulary:
            continue
        proposal = vocab.parse(row["output"], KINDS)
        assert outcome(proposal) != Reject.ADAPTER_ERROR, version


def test_an_answer_comes_only_from_a_stop_the_provider_documents_as_an_answers_end():
    # Truncations, refusals, safety blocks and unknown shapes are never answers: every
    # variant read as a FinalCandidate is one of the few a provider states as finished.
    answers = {
        (vocabulary, row["name"])
        for vocabulary in vocabularies.VOCABULARIES
        for row in _rows(vocabulary)
        if row["expect"] == FinalCandidate.__name__
    }
    for vocabulary, name in answers:
        assert not any(
            word in name
            for word in ("max_tokens", "length", "refusal", "filter", "incomplete", "SAFETY")
        ), (vocabulary, name)
