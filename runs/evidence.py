"""The evidence store: payloads referenced from events by id, with a content hash.

Events carry identifiers and decisions; observations, raw policy output, proposals and
assessments live here. Secrets never enter: ``store`` refuses content that carries a
configured secret value (see ``fieldops.secrets``).
"""

from __future__ import annotations

import hashlib
import uuid
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from fieldops import secrets
from fieldops.sql import Loader, Statement, json_param, param
from kernel import clock
from kernel.canonical import canonical_json, digest
from kernel.fastjson import json_copy
from runs import readcache, rows
from runs.domain.states import EventType
from runs.models import Event, Evidence

MAX_EVIDENCE_BYTES = 512 * 1024

_INSERT = Statement(
    "INSERT INTO runs_evidence "
    "(id, run_id, kind, content, content_hash, redaction_class, size, created_at) "
    "VALUES (%s, %s, %s, %s, %s, %s, %s, %s)"
)
_COUNT_SQL = "SELECT COUNT(*) FROM runs_evidence WHERE run_id = %s AND kind = %s"
_COUNT = Statement(_COUNT_SQL)
# The insert, only while the run has exactly N rows of the kind (``store_if_count``).
_INSERT_IF_COUNT = Statement(
    "INSERT INTO runs_evidence "
    "(id, run_id, kind, content, content_hash, redaction_class, size, created_at) "
    f"SELECT %s, %s, %s, %s, %s, %s, %s, %s WHERE ({_COUNT_SQL}) = %s"
)
_CONTENT, _CREATED_AT = (Evidence._meta.get_field(name) for name in ("content", "created_at"))
# The stored row as a model instance, made from the values just written.
_ROW = Loader(
    Evidence,
    ["id", "run", "kind", "content", "content_hash", "redaction_class", "size", "created_at"],
)


@dataclass(frozen=True, slots=True)
class Made:
    """Evidence made and checked (size, secrets, hash) but not written yet: it is written by
    the append of the event that references it, in the same statement
    (``authority.append(evidence=...)``), so the evidence and its event share one round
    trip and one commit. Evidence that must be on record before something happens (a
    model call's context, its raw output before it is parsed) is ``store``d instead."""

    row: Evidence
    text: str  # the content's canonical JSON: what the row's jsonb is written from

    @property
    def id(self) -> str:
        return str(self.row.id)


def make(
    *,
    run_id: str,
    kind: str,
    content: Mapping[str, Any],
    redaction_class: str = "internal",
    canonical: str | None = None,
) -> Made:
    """Evidence of ``run_id`` ready to be written (see ``Made``); nothing is written.

    ``canonical``: ``canonical_json(content)``, when the caller has made it already (the
    context, whose hash the decision records); only for content that holds nothing but
    what JSON decoding gives (dicts with str keys, lists, str, int, float, bool, None),
    whose canonical text is then also that of the stored copy."""
    data = json_copy(dict(content))
    # One canonical text serves the size limit, the secret scan and the content hash.
    text = canonical if canonical is not None else canonical_json(data)
    if len(text) > MAX_EVIDENCE_BYTES:
        data = {"truncated": True, "digest": digest(data), "bytes": len(text)}
        text = canonical_json(data)
    secrets.assert_clean(text, where=f"{kind} evidence")
    evidence_id = f"ev-{uuid.uuid4().hex[:20]}"
    content_hash = hashlib.sha256(text.encode("utf-8")).hexdigest()
    row = _ROW.make(
        [evidence_id, run_id, kind, data, content_hash, redaction_class, len(text), clock.now()]
    )
    return Made(row, text)


def store(
    *,
    run_id: str,
    kind: str,
    content: Mapping[str, Any],
    redaction_class: str = "internal",
    canonical: str | None = None,
) -> str:
    """Store ``content`` as evidence of ``run_id`` now and return its id (``canonical``:
    see ``make``)."""
    made = make(
        run_id=run_id,
        kind=kind,
        content=content,
        redaction_class=redaction_class,
        canonical=canonical,
    )
    # Evidence is insert-only: one prepared INSERT instead of the ORM's save machinery.
    _INSERT.write(_values(made))
    written([made])
    return made.id


def store_if_count(
    *,
    run_id: str,
    kind: str,
    content: Mapping[str, Any],
    count: int | None,
    canonical: str | None = None,
) -> str | None:
    """``store``, and with a ``count`` only while ``run_id`` has exactly ``count`` rows of
    ``kind``, which the insert's own statement checks: the new row's id, or None (nothing
    written) when it has not."""
    if count is None:
        return store(run_id=run_id, kind=kind, content=content, canonical=canonical)
    made = make(run_id=run_id, kind=kind, content=content, canonical=canonical)
    values = _values(made)
    if not _INSERT_IF_COUNT.write([*values, values[1], kind, count]):
        return None
    written([made])
    return made.id


def count(run_id: str, kind: str) -> int:
    """How many rows of ``kind`` ``run_id`` has."""
    found = _COUNT.one([rows.run_pk(run_id), kind])
    return int(found[0]) if found else 0


def _values(made: Made) -> list[Any]:
    row = made.row
    return [
        row.id,
        rows.run_pk(row.run_id),
        row.kind,
        json_param(_CONTENT, row.content, made.text),
        row.content_hash,
        row.redaction_class,
        row.size,
        param(_CREATED_AT, row.created_at),
    ]


def write(made: Sequence[Made]) -> None:
    """Write evidence ``make`` made, where no event statement carries it (the embedded
    SQLite database, in the append's transaction): each row at most once, however often
    it is offered. The caller says ``written`` once the transaction is sure to keep them."""
    Evidence.objects.bulk_create([m.row for m in made], ignore_conflicts=True)


def written(made: Sequence[Made]) -> None:
    """The rows are written: reads within this advance find them without a query."""
    for m in made:
        m.row._state.adding = False
        readcache.remember_evidence(m.row)


# What the authority's statement writes ahead of the event when an append carries evidence
# (a data-modifying CTE; runs/authority.py): the rows as one binary array per column,
# each row at most once (an append retried after a lost race offers the same rows again).
INSERT_CTE = (
    "ev AS (INSERT INTO runs_evidence "
    "(id, run_id, kind, content, content_hash, redaction_class, size, created_at) "
    "SELECT v.id, %s::uuid, v.kind, v.content::jsonb, v.content_hash, v.redaction_class, "
    "v.size, v.created_at FROM unnest(%b::text[], %b::text[], %b::text[], %b::text[], "
    "%b::text[], %b::integer[], %b::timestamptz[]) "
    "AS v(id, kind, content, content_hash, redaction_class, size, created_at) "
    "ON CONFLICT (id) DO NOTHING)"
)


def cte_params(run_id: Any, made: Sequence[Made]) -> list[Any]:
    """``INSERT_CTE``'s parameters for ``made`` (all evidence of ``run_id``)."""
    built = [m.row for m in made]
    return [
        run_id,
        [r.id for r in built],
        [r.kind for r in built],
        [m.text for m in made],
        [r.content_hash for r in built],
        [r.redaction_class for r in built],
        [r.size for r in built],
        [r.created_at for r in built],
    ]


def get(evidence_id: str) -> Evidence | None:
    return readcache.evidence_rows([evidence_id]).get(evidence_id)


def contents(ids: Iterable[str]) -> dict[str, Mapping[str, Any]]:
    return {i: e.content for i, e in readcache.evidence_rows(ids).items()}


def admitted_observation_ids(run_id: str, *, revision: int | None = None) -> list[str]:
    """Ids of every observation admitted by an observation.recorded event, in order (at
    ``revision``: the events up to it, cached within an advance; see runs/readcache.py)."""
    if revision is not None:
        return readcache.admitted_observation_ids(readcache.recorded_events(run_id, revision))
    rows = (
        Event.objects.filter(run_id=run_id, type=EventType.OBSERVATION_RECORDED.value)
        .order_by("sequence")
        .values_list("refs", flat=True)
    )
    return [r["observation"] for r in rows if r.get("observation")]


def admitted_observations(
    run_id: str, *, revision: int | None = None
) -> dict[str, Mapping[str, Any]]:
    """Admitted observations of the run (ref -> observation), in admission order."""
    ids = admitted_observation_ids(run_id, revision=revision)
    found = readcache.evidence_rows(ids)
    return {
        i: found[i].content
        for i in ids
        if i in found
        and found[i].kind in ("observation", "request", "answer", "callback", "assessment")
    }
