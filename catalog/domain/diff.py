"""Version diff: compare two capability contracts, classify each change, and say what the
change requires before the new version may serve runs.

The classification follows the change table of "Evolve and retire capability versions":

| change | selection replay | adapter tests | state handling | approval | release |
|---|---|---|---|---|---|
| description clarification | yes | smoke | none | unchanged if intent same | bounded* |
| optional read field | yes | full | reader compatibility | no | yes if context shifts |
| error-code split | recovery cases | full | map waiting runs | no | yes |
| added effect field | full | full | migrate/quarantine | new | yes |
| changed idempotency intent | incident replay | full | quarantine unknowns | new | yes |
| changed authority owner | full review | full | case-specific | new | yes |

(* bounded if selection shifts)

A change the table does not name is never given a lighter requirement: it is
``unclassified`` and needs the full review. JSON compatibility is irrelevant: a field
that keeps its shape can still change consequence.

Pure module: standard library only.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from capabilities.contracts import EffectClass, effect_at_most


class ChangeClass(StrEnum):
    DESCRIPTION_ONLY = "description_only"
    OPTIONAL_READ_FIELD = "optional_read_field"
    ERROR_CODE_SPLIT = "error_code_split"
    ADDED_EFFECT_FIELD = "added_effect_field"
    CHANGED_IDEMPOTENCY = "changed_idempotency_intent"
    CHANGED_AUTHORITY = "changed_authority"
    UNCLASSIFIED = "unclassified"


LABELS: Mapping[ChangeClass, str] = {
    ChangeClass.DESCRIPTION_ONLY: "description clarification",
    ChangeClass.OPTIONAL_READ_FIELD: "optional read field",
    ChangeClass.ERROR_CODE_SPLIT: "error-code split",
    ChangeClass.ADDED_EFFECT_FIELD: "added effect field",
    ChangeClass.CHANGED_IDEMPOTENCY: "changed idempotency intent",
    ChangeClass.CHANGED_AUTHORITY: "changed authority",
    ChangeClass.UNCLASSIFIED: "not in the change table (full review)",
}


@dataclass(frozen=True)
class Requirement:
    selection_replay: str
    adapter_tests: str
    state_handling: str
    approval: str
    release: str
    quarantine_waiting_runs: bool

    @property
    def new_approval(self) -> bool:
        return self.approval == "new"


# The seed's change table, as data (ordered from the lightest row to the heaviest).
CHANGE_TABLE: Mapping[ChangeClass, Requirement] = {
    ChangeClass.DESCRIPTION_ONLY: Requirement(
        "yes", "smoke", "none", "unchanged if intent same", "bounded if selection shifts", False
    ),
    ChangeClass.OPTIONAL_READ_FIELD: Requirement(
        "yes", "full", "reader compatibility", "no", "yes if context shifts", False
    ),
    ChangeClass.ERROR_CODE_SPLIT: Requirement(
        "recovery cases", "full", "map waiting runs", "no", "yes", False
    ),
    ChangeClass.ADDED_EFFECT_FIELD: Requirement(
        "full", "full", "migrate/quarantine", "new", "yes", True
    ),
    ChangeClass.CHANGED_IDEMPOTENCY: Requirement(
        "incident replay", "full", "quarantine unknowns", "new", "yes", True
    ),
    ChangeClass.CHANGED_AUTHORITY: Requirement(
        "full review", "full", "case-specific", "new", "yes", True
    ),
    ChangeClass.UNCLASSIFIED: Requirement(
        "full review", "full", "case-specific", "new", "yes", True
    ),
}

DIMENSIONS = ("selection_replay", "adapter_tests", "state_handling", "approval", "release")


@dataclass(frozen=True)
class Change:
    path: str
    op: str  # added | removed | changed
    before: Any
    after: Any
    change_class: ChangeClass
    why: str

    @property
    def requirement(self) -> Requirement:
        return CHANGE_TABLE[self.change_class]


@dataclass(frozen=True)
class Diff:
    left_ref: str
    right_ref: str
    same_capability: bool
    identical: bool
    changes: tuple[Change, ...]

    @property
    def classes(self) -> tuple[ChangeClass, ...]:
        """Distinct change classes in table order."""
        present = {c.change_class for c in self.changes}
        return tuple(cls for cls in CHANGE_TABLE if cls in present)

    def requires(self) -> dict[str, list[str]]:
        """Per dimension, every distinct requirement the changes impose (table order)."""
        out: dict[str, list[str]] = {d: [] for d in DIMENSIONS}
        for cls in self.classes:
            row = CHANGE_TABLE[cls]
            for d in DIMENSIONS:
                value = getattr(row, d)
                if value not in out[d]:
                    out[d].append(value)
        return out

    @property
    def needs_new_approval(self) -> bool:
        return any(CHANGE_TABLE[c].new_approval for c in self.classes)

    @property
    def quarantine_waiting_runs(self) -> bool:
        return any(CHANGE_TABLE[c].quarantine_waiting_runs for c in self.classes)

    @property
    def needs_selection_replay(self) -> bool:
        return bool(self.changes)

    def summary(self) -> list[str]:
        """Plain sentences an admin reads before deciding."""
        if not self.same_capability:
            return [
                f"{self.left_ref} and {self.right_ref} are different capabilities: the "
                "right one is a new contract with its own admission, never an upgrade."
            ]
        if self.identical:
            return ["The two versions are identical: nothing to replay or migrate."]
        lines = [f"{len(self.changes)} change(s): " + ", ".join(LABELS[c] for c in self.classes)]
        req = self.requires()
        for title, dim in (
            ("Selection replay", "selection_replay"),
            ("Adapter tests", "adapter_tests"),
            ("State handling", "state_handling"),
        ):
            lines.append(f"{title}: {_heaviest(req[dim])}.")
        lines.append(
            "Approval: "
            + (
                "new approvals required; old approvals do not transfer"
                if self.needs_new_approval
                else "existing approvals are unaffected"
            )
            + "."
        )
        lines.append(f"Release: {_heaviest(req['release'])}.")
        if self.quarantine_waiting_runs:
            lines.append(
                "Quarantine waiting runs: paused runs and unknown effects stay on the old "
                "version's path; they are not migrated."
            )
        return lines


def _heaviest(values: list[str]) -> str:
    """The last (heaviest) requirement in table order, with the lighter ones after it."""
    if not values:
        return "none"
    lighter = [v for v in values[:-1] if v != values[-1]]
    return values[-1] + (f" (also: {', '.join(lighter)})" if lighter else "")


# -- structural diff -------------------------------------------------------------------
# Lists of records are matched by identity, not position, so an insertion is one change.
_LIST_KEYS = {"errors": "code", "timeout_stages": "stage", "preconditions": "id"}


def _keyed(value: Any, key: str) -> dict[str, Any] | None:
    if not isinstance(value, list) or not all(
        isinstance(v, Mapping) and isinstance(v.get(key), str) for v in value
    ):
        return None
    out = {str(v[key]): v for v in value}
    return out if len(out) == len(value) else None


def structural_changes(left: Any, right: Any, path: str = "") -> list[tuple[str, str, Any, Any]]:
    """Return (path, op, before, after) for every difference, grouping whole subtrees."""
    if isinstance(left, Mapping) and isinstance(right, Mapping):
        out: list[tuple[str, str, Any, Any]] = []
        for key in sorted(set(left) | set(right), key=str):
            sub = f"{path}.{key}" if path else str(key)
            if key not in right:
                out.append((sub, "removed", left[key], None))
            elif key not in left:
                out.append((sub, "added", None, right[key]))
            else:
                list_key = _LIST_KEYS.get(str(key)) if not path else None
                lk = _keyed(left[key], list_key) if list_key else None
                rk = _keyed(right[key], list_key) if list_key else None
                if lk is not None and rk is not None:
                    out.extend(structural_changes(lk, rk, sub))
                else:
                    out.extend(structural_changes(left[key], right[key], sub))
        return out
    if left != right:
        return [(path, "changed", left, right)]
    return []


# -- classification --------------------------------------------------------------------
_DESCRIPTION = {"intent", "use_when", "avoid_when", "non_intents"}
_AUTHORITY = {"effect_class", "requires_approval", "scope", "provenance", "owner", "open_world"}
_IDEMPOTENCY = {"idempotency", "compensation"}
_BOUNDS = {"maxItems", "minItems", "maximum", "minimum", "maxLength", "minLength"}
_UNCLASSIFIED_WHY = {
    "family": "family decides exposure in every phase",
    "kind": "the proposal kind changes how validation treats the call",
    "freshness": "freshness decides whether evidence may still be used",
    "preconditions": "preconditions are rechecked at dispatch",
    "audit": "audit evidence changes what an incident can reconstruct",
    "redaction": "redaction decides what may enter context and traces",
    "double": "the double and its fault fixtures are the test evidence",
    "deprecation": "the deprecation policy decides how runs drain",
    "non_claims": "explicit non-claims must never change silently",
    "id": "a different id is a different capability",
}


def is_effect(contract: Mapping[str, Any]) -> bool:
    """True for capabilities whose effect goes beyond a local transformation."""
    try:
        effect = EffectClass(contract.get("effect_class", EffectClass.CONSEQUENTIAL.value))
    except ValueError:
        return True
    return bool(contract.get("requires_approval")) or not effect_at_most(
        effect, EffectClass.LOCAL_TRANSFORMATION
    )


def _lookup(contract: Mapping[str, Any], dotted: str) -> Any:
    node: Any = contract
    for part in dotted.split("."):
        if not isinstance(node, Mapping) or part not in node:
            return None
        node = node[part]
    return node


def _schema_change(
    path: str, op: str, left: Mapping[str, Any], right: Mapping[str, Any]
) -> tuple[bool, str]:
    """Return (compatible, why) for a change inside a read capability's schema."""
    parts = path.split(".")
    last = parts[-1]
    if op == "added" and len(parts) >= 3 and parts[-2] == "properties":
        owner = ".".join(parts[:-2])
        required = _lookup(right, owner + ".required") if owner else None
        if isinstance(required, list) and last in required:
            return False, f"new required field {last!r}: old readers and callers break"
        return True, f"new optional field {last!r}"
    if op == "changed" and last in _BOUNDS:
        return True, f"bound {last} {_lookup(left, path)!r} -> {_lookup(right, path)!r}"
    if op == "changed" and last == "required":
        return False, "the required fields changed"
    if op == "removed":
        return False, f"{last!r} removed: readers relying on it break"
    return False, f"{last!r} changed shape"


def _classify(
    path: str, op: str, left: Mapping[str, Any], right: Mapping[str, Any], effect: bool
) -> tuple[ChangeClass, str]:
    top = path.split(".")[0]
    if top == "intent" and effect:
        return (
            ChangeClass.ADDED_EFFECT_FIELD,
            "the declared intent of an effect changed: approvals of the old intent do not transfer",
        )
    if top in _DESCRIPTION:
        return ChangeClass.DESCRIPTION_ONLY, "model-facing description or declared intent text"
    if top == "errors":
        field = path.split(".")[-1]
        if op == "changed" and field == "meaning":
            return ChangeClass.DESCRIPTION_ONLY, "error meaning reworded"
        code = path.split(".")[1] if "." in path else ""
        if op == "added":
            return ChangeClass.ERROR_CODE_SPLIT, f"new error code {code}: map waiting runs"
        if op == "removed":
            return ChangeClass.ERROR_CODE_SPLIT, f"error code {code} removed or merged"
        return ChangeClass.ERROR_CODE_SPLIT, f"{code}: {field} changed (retry/transition)"
    if top == "timeout_stages":
        if effect:
            return (
                ChangeClass.CHANGED_IDEMPOTENCY,
                "the ambiguity boundary of an effect moved: unknown outcomes change",
            )
        return ChangeClass.ERROR_CODE_SPLIT, "timeout semantics of a read changed"
    if top == "reconciliation":
        if path.startswith("reconciliation.read"):
            return ChangeClass.CHANGED_AUTHORITY, "the authoritative reconciliation read changed"
        return ChangeClass.CHANGED_IDEMPOTENCY, "reconciliation outcomes changed"
    if top in _IDEMPOTENCY:
        return ChangeClass.CHANGED_IDEMPOTENCY, f"{top} semantics changed"
    if top in _AUTHORITY:
        return ChangeClass.CHANGED_AUTHORITY, f"{top} decides consequence or authority"
    if top == "operational_effects":
        if op == "changed" and isinstance(left.get(top), list) and isinstance(right.get(top), list):
            added = sorted(set(right[top]) - set(left[top]))
            if added:
                return ChangeClass.ADDED_EFFECT_FIELD, f"operational effects added: {added}"
        return ChangeClass.UNCLASSIFIED, "operational effects changed"
    if top in ("input_schema", "output_schema"):
        if effect:
            return (
                ChangeClass.ADDED_EFFECT_FIELD,
                f"{top} of an effect changed: what is approved and sent changes",
            )
        compatible, why = _schema_change(path, op, left, right)
        if compatible:
            return ChangeClass.OPTIONAL_READ_FIELD, why
        return ChangeClass.UNCLASSIFIED, why
    return ChangeClass.UNCLASSIFIED, _UNCLASSIFIED_WHY.get(top, f"{top} is not in the table")


def diff_contracts(left: Mapping[str, Any], right: Mapping[str, Any]) -> Diff:
    """Compare two contracts (``Contract.as_dict()`` form) and classify every change."""
    left_ref = f"{left.get('id')}@{left.get('version')}"
    right_ref = f"{right.get('id')}@{right.get('version')}"
    same = left.get("id") == right.get("id")
    effect = is_effect(left) or is_effect(right)
    changes = []
    for path, op, before, after in structural_changes(left, right):
        if path == "version":
            continue
        cls, why = _classify(path, op, left, right, effect)
        changes.append(Change(path, op, before, after, cls, why))
    return Diff(left_ref, right_ref, same, not changes, tuple(changes))


# -- discovered definitions (no local semantics) ---------------------------------------
def diff_definitions(left: Mapping[str, Any], right: Mapping[str, Any]) -> Diff:
    """Compare two discovered tool definitions.

    A discovered definition carries no reviewed semantics, so any change other than its
    description is unclassified: it pauses a mapping and needs a local review. Hints are
    untrusted: a changed hint never lightens a requirement.
    """
    changes = []
    for path, op, before, after in structural_changes(left, right):
        top = path.split(".")[0]
        if top in ("description", "title", "icons"):
            cls, why = ChangeClass.DESCRIPTION_ONLY, f"remote {top} changed"
        elif top == "annotations":
            cls, why = ChangeClass.UNCLASSIFIED, "untrusted hint changed: review the behaviour"
        elif top == "execution":
            cls, why = (
                ChangeClass.UNCLASSIFIED,
                "execution (task support) changed: calls may run differently",
            )
        elif top in ("inputSchema", "outputSchema", "name"):
            cls, why = ChangeClass.UNCLASSIFIED, "remote schema changed: any mapping pauses"
        elif top == "_meta":
            cls, why = (
                ChangeClass.UNCLASSIFIED,
                "the server's _meta (untrusted metadata) changed: review it",
            )
        else:
            cls, why = (
                ChangeClass.UNCLASSIFIED,
                f"{top} changed (a field the catalog does not know)",
            )
        changes.append(Change(path, op, before, after, cls, why))
    name_l, name_r = left.get("name"), right.get("name")
    return Diff(str(name_l), str(name_r), name_l == name_r, not changes, tuple(changes))


# -- side-by-side rendering ------------------------------------------------------------
@dataclass(frozen=True)
class Row:
    path: str
    left: str
    right: str
    status: str  # same | changed | added | removed


def _flatten(value: Any, path: str, out: dict[str, str]) -> None:
    keyed = _keyed(value, _LIST_KEYS[path]) if path in _LIST_KEYS else None
    if keyed is not None:
        value = keyed
    if isinstance(value, Mapping) and value:
        for key in sorted(value, key=str):
            _flatten(value[key], f"{path}.{key}" if path else str(key), out)
    elif isinstance(value, list) and value and all(isinstance(v, Mapping) for v in value):
        for i, item in enumerate(value):
            _flatten(item, f"{path}[{i}]", out)
    else:
        out[path] = _render(value)


def _render(value: Any) -> str:
    if isinstance(value, str):
        return value
    return json.dumps(value, sort_keys=True, ensure_ascii=False)


def side_by_side(left: Mapping[str, Any], right: Mapping[str, Any]) -> list[Row]:
    """Every leaf of both documents, aligned by path, with its status."""
    lf: dict[str, str] = {}
    rf: dict[str, str] = {}
    _flatten(left, "", lf)
    _flatten(right, "", rf)
    rows = []
    for path in sorted(set(lf) | set(rf)):
        if path not in rf:
            rows.append(Row(path, lf[path], "", "removed"))
        elif path not in lf:
            rows.append(Row(path, "", rf[path], "added"))
        else:
            status = "same" if lf[path] == rf[path] else "changed"
            rows.append(Row(path, lf[path], rf[path], status))
    return rows


def changed_rows(rows: Sequence[Row]) -> list[Row]:
    return [r for r in rows if r.status != "same"]
