"""docs/replay-and-adapters.md names every rejection class, provider error class, adapter
version and replay mode the code has (so the page cannot silently fall behind)."""

from __future__ import annotations

from pathlib import Path

from runs.policies import provider_errors, vocabularies
from runs.policies.parsing import UNKNOWN_TOOL, Reject
from sim.management.commands.replay import MODES

DOC = (Path(__file__).resolve().parents[3] / "docs" / "replay-and-adapters.md").read_text()


def test_the_page_names_everything_the_adapters_and_replay_modes_can_say():
    named = [r.value for r in Reject] + [UNKNOWN_TOOL, *provider_errors.CLASSES]
    named += list(vocabularies.ADAPTERS)  # every installed version, current and earlier
    named += [f"--mode {m}" for m in MODES if m != "audit"]
    missing = [n for n in named if f"`{n}" not in DOC and n not in DOC]
    assert missing == []
