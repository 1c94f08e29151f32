"""The approval rows every reservation run reads and writes: prepared statements, not the ORM.

A run opens one checkpoint, one approver decides it and the dispatch consumes it: about
twenty statements per run, each costing the ORM's query compilation (~300 us of client CPU)
through ``Model.objects``; as ``fieldops.sql`` statements a few tens of us. The rows are
the same model instances and values the ORM gives (``tests/approvals/test_rows.py``).
Cold paths (clarifications, expiry, refusals, bulk closes) keep the ORM.
"""

from __future__ import annotations

import datetime as dt
from typing import Any

from django.db import connection

from approvals.models import ApprovalPolicy, Checkpoint, Decision, WebhookEndpoint
from fieldops.sql import Loader, Statement, param, with_lists
from runs import rows as run_rows
from runs.models import Run

_CHECKPOINT = Loader(Checkpoint)
_RUN = Loader(Run)
_POLICY = Loader(ApprovalPolicy)
_ENDPOINT = Loader(WebhookEndpoint)
_CHANGE = Loader(Decision, ["requested_change"])
_APPROVERS = Loader(Decision, ["approvers", "decided_by_ref"])
_CLOSED_AT = Checkpoint._meta.get_field("closed_at")
_CONSUMED_AT = Decision._meta.get_field("consumed_at")

# Column lists are the models' own (Loader), never input.
_CHECKPOINT_BY_ID = Statement(
    f"SELECT {_CHECKPOINT.columns} FROM approvals_checkpoint WHERE id = %s"  # noqa: S608  # nosec B608
)


def _columns(loader: Loader, table: str) -> str:
    return ", ".join(f'{table}."{field.column}"' for field in loader.fields)  # type: ignore[union-attr]


_CHECKPOINT_WITH_RUN = Statement(
    f"SELECT {_columns(_CHECKPOINT, 'c')}, {_columns(_RUN, 'r')} "  # noqa: S608  # nosec B608
    "FROM approvals_checkpoint c INNER JOIN runs_run r ON r.id = c.run_id WHERE c.id = %s"
)
_PRIOR_CHANGE = Statement(
    "SELECT d.requested_change FROM approvals_checkpoint c "
    "LEFT OUTER JOIN approvals_decision d ON d.checkpoint_id = c.id "
    "WHERE c.kind = %s AND c.run_id = %s AND c.status = %s ORDER BY c.created_at DESC LIMIT 1"
)
_POLICIES = Statement(
    f"SELECT {_POLICY.columns} FROM approvals_approvalpolicy WHERE tenant = %s"  # noqa: S608  # nosec B608
)
_VOTERS = Statement(
    "SELECT by_ref FROM approvals_approvalvote WHERE checkpoint_id = %s ORDER BY created_at, id"
)
_OTHER_HASHES = Statement(
    "SELECT proposal_hash FROM approvals_checkpoint WHERE run_id = %s AND NOT (id = %s)"
)
_CLOSE = Statement("UPDATE approvals_checkpoint SET status = %s, closed_at = %s WHERE id = %s")
_SET_STATUS = Statement("UPDATE approvals_checkpoint SET status = %s WHERE id = %s")
_TO_CONSUME = Statement(
    "SELECT id, status FROM approvals_checkpoint "
    "WHERE run_id = %s AND kind = %s AND proposal_hash = %s ORDER BY created_at DESC LIMIT 1"
)
_TO_CONSUME_LOCKED = Statement(f"{_TO_CONSUME.sql} FOR UPDATE")
_CONSUME = Statement(
    "UPDATE approvals_decision SET consumed_at = %s, consumed_by_attempt = %s "
    "WHERE checkpoint_id = %s AND verdict = %s AND consumed_at IS NULL"
)
_APPROVERS_OF = Statement(
    f"SELECT {_APPROVERS.columns} FROM approvals_decision "  # noqa: S608  # nosec B608
    "WHERE checkpoint_id = %s AND verdict = %s ORDER BY created_at DESC LIMIT 1"
)
_ENDPOINTS = Statement(
    f"SELECT {_ENDPOINT.columns} FROM approvals_webhookendpoint "  # noqa: S608  # nosec B608
    "WHERE tenant = %s AND active"
)
# The approvers of a tenant who can be emailed: active, holding the role, with an address,
# not the requester (the checkpoint's eligible group and users narrow it further).
_RECIPIENTS = (
    "SELECT DISTINCT u.email FROM auth_user u "
    "INNER JOIN auth_user_groups ug ON u.id = ug.user_id "
    "INNER JOIN auth_group g ON ug.group_id = g.id "
    "INNER JOIN access_membership m ON u.id = m.user_id "
    "WHERE g.name = %s AND u.is_active AND m.tenant = %s AND NOT (u.email = '') "
    "AND NOT (u.username = %s)"
)
_IN_GROUP = (
    " AND EXISTS (SELECT 1 FROM auth_user_groups eg INNER JOIN auth_group e "
    "ON eg.group_id = e.id WHERE eg.user_id = u.id AND e.name = %s)"
)
_AMONG = " AND u.username IN ({names})"


def checkpoint(checkpoint_id: str) -> Checkpoint | None:
    row = _CHECKPOINT_BY_ID.one([checkpoint_id])
    return _CHECKPOINT.load(row) if row is not None else None


def checkpoint_with_run(checkpoint_id: str) -> Checkpoint:
    """``Checkpoint.objects.select_related("run").get(pk=checkpoint_id)``."""
    row = _CHECKPOINT_WITH_RUN.one([checkpoint_id])
    if row is None:
        raise Checkpoint.DoesNotExist(f"no checkpoint {checkpoint_id}")
    split = len(_CHECKPOINT.fields)
    found = _CHECKPOINT.load(row[:split])
    found.run = _RUN.load(row[split:])
    return found


def refresh(found: Checkpoint) -> None:
    """``found.refresh_from_db()`` for a checkpoint whose run is unchanged."""
    fresh = checkpoint(found.pk)
    if fresh is None:
        raise Checkpoint.DoesNotExist(f"no checkpoint {found.pk}")
    for attname in _CHECKPOINT.attnames:
        setattr(found, attname, getattr(fresh, attname))


def prior_requested_change(run: Run) -> dict[str, Any]:
    """The change the run's latest declined approval asked for ({} when none)."""
    found = _PRIOR_CHANGE.one(
        [Checkpoint.Kind.APPROVAL.value, run_rows.run_pk(run.pk), Checkpoint.Status.DECLINED.value]
    )
    if found is None or found[0] is None:
        return {}
    return dict(_CHANGE.load_values(found)[0])


def policies(tenant: str) -> list[ApprovalPolicy]:
    return [_POLICY.load(row) for row in _POLICIES.rows([tenant])]


def approvers_so_far(checkpoint_id: str) -> list[str]:
    return [row[0] for row in _VOTERS.rows([checkpoint_id])]


def other_proposal_hashes(run_id: Any, checkpoint_id: str) -> frozenset[str]:
    return frozenset(row[0] for row in _OTHER_HASHES.rows([run_rows.run_pk(run_id), checkpoint_id]))


def close(checkpoint_id: str, *, status: str, at: dt.datetime) -> None:
    _CLOSE.write([status, param(_CLOSED_AT, at), checkpoint_id])


_OPEN_OF_RUNS = (
    "SELECT run_id, id FROM approvals_checkpoint WHERE run_id IN ({runs}) AND status IN (%s, %s)"
)
_RUN_AND_ID = Loader(Checkpoint, ["run", "id"])
_CLOSE_MANY = "UPDATE approvals_checkpoint SET status = %s, closed_at = %s WHERE id IN ({ids})"


def open_of_runs(run_ids: list[Any]) -> list[tuple[Any, str]]:
    """(run id, checkpoint id) of the runs' open checkpoints: pending, or approved and not
    yet consumed (a consumed approval's checkpoint is USED)."""
    statement = with_lists(_OPEN_OF_RUNS, runs=len(run_ids))
    found = statement.rows(
        [
            *(run_rows.run_pk(pk) for pk in run_ids),
            Checkpoint.Status.PENDING.value,
            Checkpoint.Status.APPROVED.value,
        ]
    )
    return [tuple(_RUN_AND_ID.load_values(row)) for row in found]  # type: ignore[misc]


def close_many(checkpoint_ids: list[str], *, status: str, at: dt.datetime) -> None:
    statement = with_lists(_CLOSE_MANY, ids=len(checkpoint_ids))
    statement.write([status, param(_CLOSED_AT, at), *checkpoint_ids])


def set_status(checkpoint_id: str, status: str) -> None:
    _SET_STATUS.write([status, checkpoint_id])


def to_consume(run: Run, proposal_hash: str) -> tuple[str, str] | None:
    """(id, status) of the run's latest approval checkpoint of ``proposal_hash``, locked for
    this transaction on PostgreSQL (``select_for_update``; SQLite locks the database)."""
    statement = _TO_CONSUME_LOCKED if connection.vendor == "postgresql" else _TO_CONSUME
    found = statement.one([run_rows.run_pk(run.pk), Checkpoint.Kind.APPROVAL.value, proposal_hash])
    return (found[0], found[1]) if found is not None else None


def consume(checkpoint_id: str, *, attempt_id: str, at: dt.datetime) -> int:
    """Mark the checkpoint's unconsumed approval consumed; return how many rows moved."""
    return _CONSUME.write(
        [param(_CONSUMED_AT, at), attempt_id, checkpoint_id, Decision.Verdict.APPROVE.value]
    )


def approval_approvers(checkpoint_id: str) -> tuple[list[str], str] | None:
    """(approvers, decided_by_ref) of the checkpoint's latest approving decision."""
    found = _APPROVERS_OF.one([checkpoint_id, Decision.Verdict.APPROVE.value])
    if found is None:
        return None
    approvers, by = _APPROVERS.load_values(found)
    return list(approvers), by


def webhook_endpoints(tenant: str) -> list[WebhookEndpoint]:
    return [_ENDPOINT.load(row) for row in _ENDPOINTS.rows([tenant])]


def recipients(
    *, tenant: str, role: str, requester: str, group: str, usernames: list[str]
) -> list[str]:
    """The sorted email addresses of ``tenant``'s active ``role`` holders other than
    ``requester``, in ``group`` too when it is not empty, and among ``usernames`` when
    that is not empty."""
    sql = _RECIPIENTS + (_IN_GROUP if group else "") + (_AMONG if usernames else "")
    params = [role, tenant, requester, *([group] if group else []), *usernames]
    found = with_lists(sql, names=len(usernames)).rows(params)
    return sorted({row[0] for row in found})
