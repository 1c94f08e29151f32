"""Provider-facing tool names: what a visible capability is called in a provider request,
and how a call by that name maps back to exactly that capability.

Capability ids come from the catalog, and a tool imported from an MCP server keeps its MCP
name as its id: 1-128 characters of ``[A-Za-z0-9_.-]`` (``catalog.domain.discovery.NAME``).
Providers accept less. OpenAI (Chat Completions, Responses) and Bedrock Converse take
``^[a-zA-Z0-9_-]{1,64}$``; Anthropic ``^[a-zA-Z0-9_-]{1,128}$`` (64 in earlier API
versions); Gemini's function declarations must start with a letter or an underscore, at
most 64 characters. A request naming one tool outside its provider's rule is answered 400,
so every live decision of the run would fail. ``PORTABLE`` is what all of them accept.

An id in ``PORTABLE`` is sent as it is (every built-in capability and control). Any other
gets a name in it: the id with every other character made ``_``, cut, and followed by
``_`` and the first hex digits of the id's SHA-256, so one id always gets the same name
and two ids (``files.read`` and ``files_read``) never share one; more digits are taken in
the rare case the shorter name is already another visible capability's. The name is
recorded on the capability's entry of the context projection (``tool_name``) only when it
differs from the id: a projection whose ids are all portable (every run recorded before
names were given) is byte for byte what it was, and so is its hash; and replay reads the
recorded names, never names made again from today's rule.

Reading a call maps a recorded ``tool_name`` back to its capability id before anything else
reads the proposal; any other name is read as the adapter reads it (an unknown name is
still ``unknown_capability`` at validation). It is applied the same way over every
adapter, so no adapter's own reading (nor its version) changes.
"""

from __future__ import annotations

import dataclasses
import hashlib
import re
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from runs.domain.proposals import ActionIntent, ObserveIntent, Proposal
from runs.policies.parsing import Reading

PORTABLE = re.compile(r"^[A-Za-z_][A-Za-z0-9_-]{0,63}$")
MAX_CHARS = 64
# Hex digits of the id's SHA-256 a renamed capability ends with: the shortest first, a
# longer one only when the shorter name is taken.
HASH_DIGITS = (8, 16, 32)
_NOT_PORTABLE = re.compile(r"[^A-Za-z0-9_-]")
FIELD = "tool_name"


def provider_names(ids: Sequence[str]) -> dict[str, str]:
    """Return capability id -> provider-facing name for the ids among ``ids`` that cannot
    be sent as they are (the portable ones keep their id and are not in the result).

    Deterministic and collision-free over ``ids``: no two ids get one name, and no renamed
    id gets a name another id of ``ids`` has. Raise ValueError if ``ids`` repeats an id.
    """
    if len(set(ids)) != len(ids):
        raise ValueError("capability ids repeat")
    taken = {i for i in ids if PORTABLE.match(i)}
    renamed: dict[str, str] = {}
    for capability_id in sorted(i for i in ids if not PORTABLE.match(i)):
        name = _renamed(capability_id, taken)
        taken.add(name)
        renamed[capability_id] = name
    return renamed


def _renamed(capability_id: str, taken: set[str]) -> str:
    stem = _NOT_PORTABLE.sub("_", capability_id)
    if not (stem[:1].isascii() and (stem[:1].isalpha() or stem[:1] == "_")):
        stem = "_" + stem
    hashed = hashlib.sha256(capability_id.encode("utf-8")).hexdigest()
    for digits in HASH_DIGITS:
        name = f"{stem[: MAX_CHARS - digits - 1]}_{hashed[:digits]}"
        if name not in taken:
            return name
    # Two ids whose SHA-256 agree on 128 bits: not a case to name, a case to stop at.
    raise ValueError(f"no collision-free name for {capability_id!r}")


def named(capabilities: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """``capabilities`` (model projections, each with its id as ``name``) with ``tool_name``
    set on those whose id a provider would refuse; the others exactly as they were."""
    renamed = provider_names([str(c["name"]) for c in capabilities])
    return [
        {**c, FIELD: renamed[c["name"]]} if c["name"] in renamed else dict(c) for c in capabilities
    ]


def tool_name(capability: Mapping[str, Any]) -> str:
    """The name a request offers ``capability`` under (its recorded one, else its id)."""
    return str(capability.get(FIELD) or capability["name"])


def aliases(projection: Mapping[str, Any] | None) -> dict[str, str]:
    """Provider-facing name -> capability id, for the capabilities ``projection`` renamed."""
    shown = (projection or {}).get("capabilities") or []
    return {
        str(c[FIELD]): str(c["name"])
        for c in shown
        if isinstance(c, Mapping) and c.get(FIELD) and c.get(FIELD) != c.get("name")
    }


def read(
    adapter_read: Callable[[Any, Mapping[str, str]], Reading],
    raw: Any,
    kinds: Mapping[str, str],
    projection: Mapping[str, Any] | None,
) -> Reading:
    """``adapter_read(raw, kinds)`` with each name ``projection`` offered a capability under
    read as that capability: its kind while the adapter reads, its id on the proposal."""
    renamed = aliases(projection)
    if not renamed:
        return adapter_read(raw, kinds)
    reading = adapter_read(
        raw, {**kinds, **{n: kinds[i] for n, i in renamed.items() if i in kinds}}
    )
    return Reading(mapped_back(reading.proposal, renamed), reading.commentary)


def mapped_back(proposal: Proposal, renamed: Mapping[str, str]) -> Proposal:
    """``proposal`` naming the capability id where it names a provider-facing name."""
    if isinstance(proposal, (ObserveIntent, ActionIntent)) and proposal.capability in renamed:
        return dataclasses.replace(proposal, capability=renamed[proposal.capability])
    return proposal
