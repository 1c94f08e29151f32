"""The model boundary as the runner crosses it at DECIDING: call the policy, keep what it
said as evidence, then read it. Nothing a model (or a failing policy) sends can stop a run.

The order is the point (SPEC §2, issue 14 item 8):

1. ``call_policy``: the policy's answer, or a provider failure if the policy itself raised.
2. ``raw_evidence``: the raw output in a bounded, always-serialisable form (depth, values
   and string length bounded by an iterative copy; ``json.dumps`` itself raises
   ``RecursionError`` on deep input), with configured secrets redacted, so it can be stored
   *before* it is parsed.
3. ``read_output``: the adapter's reading (limits first, then the parse), a call to a
   provider-facing name the context projection recorded read as its capability
   (``tool_names``); any exception is ``adapter_error``, a typed rejection the run
   records, never a run stuck in DECIDING.
   An output holding a NUL or an unpaired surrogate is ``unstorable_output`` whatever the
   adapter read: no proposal, payload or evidence of PostgreSQL's can hold one (the raw
   evidence keeps it visible as ``\\u0000``).
   Each rejection reason's ``provider_stop`` and ``tool`` (copied from the output) are
   cut to ``REASON_FIELD_CHARS``, whatever the adapter version: a stop word or tool name
   of hundreds of kilobytes (inside the output limits) would otherwise push the proposal
   evidence past its size limit, and it would keep a digest instead of the typed reasons.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import fields, replace
from typing import Any

from fieldops import secrets, telemetry
from kernel.canonical import storable_text, unstorable
from runs.domain.proposals import InvalidProposal, Proposal
from runs.policies import limits, parsing, provider_errors, tool_names
from runs.policies.base import Policy, PolicyOutput
from runs.policies.parsing import Reading, Reject

# How much of a provider's stop word or a tool name a rejection reason keeps (the detail is
# already bounded by ``parsing.MAX_DETAIL``).
REASON_FIELD_CHARS = 100

COMMENTARY_NOTE = "model commentary: kept as evidence, never read as authority or as an answer"


@telemetry.traced_model_call
def call_policy(policy: Policy, projection: Mapping[str, Any]) -> PolicyOutput:
    """``policy.decide(projection)``; an exception is an ``unclassified`` provider failure."""
    try:
        return policy.decide(projection)
    except Exception as exc:
        name = type(exc).__name__
        return PolicyOutput(
            provider=str(getattr(policy, "name", "policy")),
            model=str(getattr(policy, "name", "policy")),
            raw={
                "error": {"class": provider_errors.UNCLASSIFIED, "message": f"policy raised {name}"}
            },
            error=provider_errors.UNCLASSIFIED,
        )


def raw_evidence(
    output: PolicyOutput, *, adapter_version: str, policy_version: str, input_context_hash: str
) -> dict[str, Any]:
    """The raw-output evidence of one decision, bounded and serialisable whatever ``raw`` is."""
    redact = secrets.redactor()
    raw, cut = limits.bounded(output.raw, text=lambda text: storable_text(redact(text)))
    usage, _ = limits.bounded(dict(output.usage), max_depth=2, max_nodes=64, text=storable_text)
    content: dict[str, Any] = {
        "provider": storable_text(str(output.provider)[:100]),
        "model": _kept_text(str(output.model))[:200],
        "raw": raw,
        "error": str(output.error)[:100],
        "usage": usage,
        "adapter_version": adapter_version,
        "policy_version": policy_version,
        "input_context_hash": input_context_hash,
    }
    if cut:
        seen = limits.measure(output.raw)
        content["raw_bounded"] = {
            "note": "the raw output exceeded the stored bounds; deeper or further parts "
            f"are replaced by {limits.MARKER!r} markers",
            "depth_at_least": seen.depth,
            "values_at_least": seen.nodes,
        }
    return content


def _kept_text(text: str) -> str:
    """A string of the raw output as evidence keeps it: secrets redacted, storable."""
    return storable_text(secrets.redact(text))


def read_output(
    vocabulary: Any,
    output: PolicyOutput,
    kinds: Mapping[str, str],
    projection: Mapping[str, Any] | None = None,
) -> Reading:
    """The one proposal (and commentary) of ``output``, a call by a name ``projection``
    offered a capability under read as that capability (``tool_names.read``); never raises."""
    if output.error:
        return Reading(parsing.provider_error(output.error, "the provider call failed"))
    try:
        reading = tool_names.read(vocabulary.read, output.raw, kinds, projection)
    except Exception as exc:
        return Reading(parsing.invalid(Reject.ADAPTER_ERROR, type(exc).__name__))
    if not isinstance(reading, Reading):
        return Reading(parsing.invalid(Reject.ADAPTER_ERROR, "the adapter returned no reading"))
    if _over_limits(reading):
        return reading
    # After the adapter's limits (they bound what this walks), before anything is kept: the
    # raw output, and what the adapter decoded from it (arguments arrive as JSON text, so a
    # "\\u0000" escape in them is a NUL only once read).
    read = [getattr(reading.proposal, f.name) for f in fields(reading.proposal)]
    if problem := unstorable(output.raw) or unstorable([read, reading.commentary]):
        return Reading(parsing.invalid(Reject.UNSTORABLE, problem))
    return Reading(bounded_reasons(reading.proposal), reading.commentary)


def bounded_reasons(proposal: Proposal) -> Proposal:
    """``proposal`` with each reason's ``provider_stop`` and ``tool`` cut to
    ``REASON_FIELD_CHARS`` (the same proposal when none is longer). Decision replay bounds
    the proposals it reads again the same way, so they compare with the recorded ones."""
    if not isinstance(proposal, InvalidProposal):
        return proposal
    n = REASON_FIELD_CHARS
    if all(len(r.provider_stop) <= n and len(r.tool) <= n for r in proposal.reasons):
        return proposal
    reasons = tuple(
        replace(r, provider_stop=r.provider_stop[:n], tool=r.tool[:n]) for r in proposal.reasons
    )
    return replace(proposal, reasons=reasons)


def _over_limits(reading: Reading) -> bool:
    proposal = reading.proposal
    return isinstance(proposal, InvalidProposal) and proposal.reason_code == Reject.LIMIT_EXCEEDED


def commentary_evidence(reading: Reading, output: PolicyOutput, raw_id: str) -> dict[str, Any]:
    """The commentary evidence of a decision: the model's text that is not the proposal."""
    return {
        "note": COMMENTARY_NOTE,
        "text": secrets.redact(reading.commentary),
        "provider": str(output.provider)[:100],
        "raw_output": raw_id,
        "proposal_kind": reading.proposal.kind,
    }
