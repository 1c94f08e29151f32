"""The evidence store: payloads referenced from events by id, with a content hash.

Events carry identifiers and decisions; observations, raw policy output, proposals and
assessments live here. Secrets never enter: ``store`` refuses content that carries a
configured secret value (see ``fieldops.secrets``).
"""

from __future__ import annotations

import hashlib
import json
import uuid
from collections.abc import Iterable, Mapping
from typing import Any

from fieldops import secrets
from fieldops.sql import Loader, Statement, json_param, param
from kernel import clock
from kernel.canonical import canonical_json, digest
from runs import readcache, rows
from runs.domain.states import EventType
from runs.models import Event, Evidence

MAX_EVIDENCE_BYTES = 512 * 1024

_INSERT = Statement(
    "INSERT INTO runs_evidence "
    "(id, run_id, kind, content, content_hash, redaction_class, size, created_at) "
    "VALUES (%s, %s, %s, %s, %s, %s, %s, %s)"
)
_CONTENT, _CREATED_AT = (Evidence._meta.get_field(name) for name in ("content", "created_at"))
# The stored row as a model instance, made from the values just written.
_ROW = Loader(
    Evidence,
    ["id", "run", "kind", "content", "content_hash", "redaction_class", "size", "created_at"],
)


def store(
    *,
    run_id: str,
    kind: str,
    content: Mapping[str, Any],
    redaction_class: str = "internal",
    canonical: str | None = None,
) -> str:
    """Store ``content`` as evidence of ``run_id`` and return its id.

    ``canonical``: ``canonical_json(content)``, when the caller has made it already (the
    context, whose hash the decision records); only for content that holds nothing but
    what JSON decoding gives (dicts with str keys, lists, str, int, float, bool, None),
    whose canonical text is then also that of the stored copy."""
    data = json.loads(json.dumps(dict(content), default=str))
    # One canonical text serves the size limit, the secret scan and the content hash.
    text = canonical if canonical is not None else canonical_json(data)
    if len(text) > MAX_EVIDENCE_BYTES:
        data = {"truncated": True, "digest": digest(data), "bytes": len(text)}
        text = canonical_json(data)
    secrets.assert_clean(text, where=f"{kind} evidence")
    evidence_id = f"ev-{uuid.uuid4().hex[:20]}"
    content_hash = hashlib.sha256(text.encode("utf-8")).hexdigest()
    created_at = clock.now()
    # Evidence is insert-only: one prepared INSERT instead of the ORM's save machinery.
    _INSERT.write(
        [
            evidence_id,
            rows.run_pk(run_id),
            kind,
            json_param(_CONTENT, data, text),
            content_hash,
            redaction_class,
            len(text),
            param(_CREATED_AT, created_at),
        ]
    )
    row = _ROW.make(
        [evidence_id, run_id, kind, data, content_hash, redaction_class, len(text), created_at]
    )
    readcache.remember_evidence(row)
    return evidence_id


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
