"""The synthetic resource service: deterministic doubles of equipment records, manuals,
inventory and the authoritative reservation ledger, with a fault schedule.

The doubles model the *contract*, not a production service. They answer raw service
responses (dicts) or raise ``ServiceFault``; the capability adapters validate whatever
comes back as untrusted input.
"""

from __future__ import annotations

import datetime as dt
import secrets
from collections.abc import Iterable, Mapping
from typing import Any

from django.conf import settings
from django.db import OperationalError, transaction
from django.db.models import Q

from capabilities.ports import LedgerLookup, LedgerRecord, ServiceFault
from capabilities.reserve_part import LEDGER_RETENTION
from fieldops import db, points
from fieldops.db import lock_wait_failed
from fieldops.sql import Loader, Statement, param
from kernel import clock
from kernel.canonical import digest
from sim.world import fixtures
from sim.world.faults import WORLD_POINTS, Fault, fires, parse_plan
from sim.world.models import InventorySlot, LedgerEntry, ServiceRequest

STALE_READ_AGE = dt.timedelta(minutes=15)
STOCK_ATTEMPTS = 5

# The request log is written and counted at every call: prepared statements (fieldops/sql.py).
_CALLS_SQL = (
    "SELECT COUNT(*) FROM world_servicerequest "
    "WHERE namespace = %s AND run_id = %s AND capability = %s"
)
_CALLS = Statement(_CALLS_SQL)
_LOG_SQL = (
    "INSERT INTO world_servicerequest (namespace, run_id, capability, call_index, operation, "
    "idempotency_key, args_digest, fault, outcome, created_at) "
    "VALUES (%s, %s, %s, {index}, %s, %s, %s, %s, %s, %s)"
)
_LOG = Statement(_LOG_SQL.format(index="%s"))
# The same, numbering the call in the statement itself (see ``next_call_index``).
_LOG_NUMBERED = Statement(_LOG_SQL.format(index=f"({_CALLS_SQL}) + 1"))
# ``next_call_index`` for a call no fault of the plan is counting: its number is given when
# the call is logged.
NUMBERED_AT_LOG = 0
_CREATED_AT = ServiceRequest._meta.get_field("created_at")

# The reservation's commit, once per effect: the key's fence raised (an upsert that keeps
# the higher token and locks the row), the ledger entry of the key, the slot's stock
# compare-and-set, the new entry.
_RAISE_FENCE = Statement(
    "INSERT INTO world_ledgerfence (namespace, idempotency_key, token) VALUES (%s, %s, %s) "
    "ON CONFLICT (namespace, idempotency_key) DO UPDATE SET token = CASE "
    "WHEN excluded.token > world_ledgerfence.token THEN excluded.token "
    "ELSE world_ledgerfence.token END RETURNING token"
)
_ENTRY = Loader(LedgerEntry)
_ENTRY_INSERTED = [f for f in LedgerEntry._meta.concrete_fields if not f.primary_key]
_ENTRY_BY_KEY = Statement(
    f"SELECT {_ENTRY.columns} FROM world_ledgerentry "  # noqa: S608  # nosec B608
    "WHERE namespace = %s AND idempotency_key = %s"
)
_INSERT_ENTRY = Statement(
    f"INSERT INTO world_ledgerentry ({', '.join(f.column for f in _ENTRY_INSERTED)}) "  # noqa: S608  # nosec B608
    f"VALUES ({', '.join(['%s'] * len(_ENTRY_INSERTED))}) RETURNING id"
)
_SLOT = Loader(InventorySlot)
_SLOT_BY_ID = Statement(
    f"SELECT {_SLOT.columns} FROM world_inventoryslot "  # noqa: S608  # nosec B608
    "WHERE namespace = %s AND slot_id = %s"
)
_SLOTS_OF_PART = Statement(
    f"SELECT {_SLOT.columns} FROM world_inventoryslot "  # noqa: S608  # nosec B608
    "WHERE namespace = %s AND location_id = %s AND part_id = %s ORDER BY slot_id"
)
# What the verifier reads of one run's effects (``ledger_entries`` by namespace and run).
_ENTRIES_OF_RUN = Statement(
    f"SELECT {_ENTRY.columns} FROM world_ledgerentry "  # noqa: S608  # nosec B608
    "WHERE namespace = %s AND run_id = %s ORDER BY committed_at, id LIMIT %s"
)
_TAKE_STOCK = Statement(
    "UPDATE world_inventoryslot SET available = %s, revision = %s WHERE id = %s AND revision = %s"
)


class WorldService:
    """One run's view of the world: a namespace, the run's fault plan, its request log.
    Implements ``capabilities.ports.WorldPort``."""

    def __init__(
        self,
        *,
        namespace: str,
        run_id: str,
        fault_plan: Iterable[Fault | Mapping[str, Any]] = (),
    ):
        self.namespace = namespace
        self.run_id = run_id
        self.plan = parse_plan(f for f in fault_plan if not isinstance(f, Fault)) + tuple(
            f for f in fault_plan if isinstance(f, Fault)
        )

    # -- fault schedule and request log -------------------------------------------------
    def next_call_index(self, capability: str) -> int:
        """The number of the next call of ``capability`` in this run (1-based), which the
        fault plan's ``on_call`` counts. When no fault of the plan counts this capability's
        calls (the usual, empty plan), the number only goes into the request log, so it is
        given there, in the log's own statement (``NUMBERED_AT_LOG``): one statement a
        call instead of two."""
        if not self._counted(capability):
            return NUMBERED_AT_LOG
        found = _CALLS.one([self.namespace, self.run_id, capability])
        return (found[0] if found else 0) + 1

    def _counted(self, capability: str) -> bool:
        return any(
            f.point in WORLD_POINTS and f.capability in ("*", capability) and f.on_call != 0
            for f in self.plan
        )

    def fires(self, point: str, capability: str, call_index: int) -> bool:
        return fires(self.plan, point, capability, call_index)

    def log(
        self,
        *,
        capability: str,
        call_index: int,
        args: Mapping[str, Any],
        outcome: str,
        fault: str = "",
        key: str = "",
        operation: str = "invoke",
    ) -> None:
        now = param(_CREATED_AT, clock.now())
        logged = [operation, key, digest(dict(args)), fault, outcome, now]
        if call_index == NUMBERED_AT_LOG:
            where = [self.namespace, self.run_id, capability]
            _LOG_NUMBERED.write([*where, *where, *logged])
        else:
            _LOG.write([self.namespace, self.run_id, capability, call_index, *logged])

    def _common_faults(self, capability: str, call_index: int, args: Mapping[str, Any]) -> None:
        for point, code in (
            ("before_validation", "UNAVAILABLE"),
            ("unavailable", "UNAVAILABLE"),
            ("timeout", "TIMEOUT"),
        ):
            if self.fires(point, capability, call_index):
                self.log(
                    capability=capability,
                    call_index=call_index,
                    args=args,
                    outcome=code,
                    fault=point,
                )
                raise ServiceFault(code, "pre_dispatch", point)

    # -- reads --------------------------------------------------------------------------
    def read_equipment(self, *, call_index: int, equipment_id: str, tenant: str) -> dict[str, Any]:
        args = {"equipment_id": equipment_id, "tenant": tenant}
        self._common_faults("read_equipment", call_index, args)
        record = fixtures.EQUIPMENT.get(equipment_id)
        if record is None:
            self.log(
                capability="read_equipment", call_index=call_index, args=args, outcome="NOT_FOUND"
            )
            raise ServiceFault("NOT_FOUND", "definite", equipment_id)
        owner_tenant = record["tenant"]
        if self.fires("cross_tenant_result", "read_equipment", call_index):
            owner_tenant = "south" if tenant == "north" else "north"
        elif owner_tenant != tenant:
            self.log(
                capability="read_equipment", call_index=call_index, args=args, outcome="DENIED"
            )
            raise ServiceFault("DENIED", "definite", "equipment belongs to another tenant")
        self.log(
            capability="read_equipment",
            call_index=call_index,
            args=args,
            outcome="ok",
            fault="cross_tenant_result" if owner_tenant != tenant else "",
        )
        now = clock.now()
        body = {
            "equipment_id": equipment_id,
            "tenant": owner_tenant,
            "family": record["family"],
            "revision": record["revision"],
            "site": record["site"],
            "owner_contact": record["owner_contact"],
            "observed_at": clock.iso(now),
        }
        body["record_hash"] = digest(body)
        return body

    def search_manual(
        self,
        *,
        call_index: int,
        query: str,
        family: str,
        max_passages: int,
        tenant: str,
        scored: bool = False,
    ) -> dict[str, Any]:
        """Passages of ``family`` matching ``query``, best first. ``scored`` (the index
        behind search_manual@1.1.0) adds each passage's relevance: the share of the
        query's words the passage contains, in [0, 1]."""
        args = {"query": query, "family": family, "max_passages": max_passages}
        self._common_faults("search_manual", call_index, args)
        words = {w.strip(".,:;").lower() for w in query.split() if len(w) > 2}
        hits = []
        for manual_id, manual in fixtures.MANUALS.items():
            if manual["family"] != family:
                continue
            for passage_id, text in manual["passages"].items():
                score = sum(1 for w in words if w in text.lower())
                if score:
                    hits.append((score, manual_id, passage_id, manual, text))
        hits.sort(key=lambda h: (-h[0], h[2]))
        passages: list[dict[str, Any]] = [
            {
                "passage_id": pid,
                "manual_id": mid,
                "edition": m["edition"],
                "trust_state": m["trust_state"],
                "text": text,
                "source_hash": digest(text),
                **({"relevance": round(score / len(words), 3)} if scored else {}),
            }
            for score, mid, pid, m, text in hits[:max_passages]
        ]
        self.log(capability="search_manual", call_index=call_index, args=args, outcome="ok")
        return {"passages": passages, "retrieved_at": clock.iso(clock.now())}

    def check_inventory(
        self, *, call_index: int, part_id: str, location_id: str, tenant: str
    ) -> dict[str, Any]:
        args = {"part_id": part_id, "location_id": location_id, "tenant": tenant}
        self._common_faults("check_inventory", call_index, args)
        location = fixtures.LOCATIONS.get(location_id)
        if location is None:
            self.log(
                capability="check_inventory", call_index=call_index, args=args, outcome="NOT_FOUND"
            )
            raise ServiceFault("NOT_FOUND", "definite", location_id)
        slots = [
            _SLOT.load(row) for row in _SLOTS_OF_PART.rows([self.namespace, location_id, part_id])
        ]
        observed = clock.now()
        fault = ""
        if self.fires("revision_changed", "check_inventory", call_index):
            self.log(
                capability="check_inventory",
                call_index=call_index,
                args=args,
                outcome="CONFLICT",
                fault="revision_changed",
            )
            raise ServiceFault(
                "CONFLICT", "definite", "the inventory revision changed while reading"
            )
        if self.fires("stale_read", "check_inventory", call_index):
            observed -= STALE_READ_AGE
            fault = "stale_read"
        result_tenant = location["tenant"]
        if self.fires("cross_tenant_result", "check_inventory", call_index):
            result_tenant = "south" if tenant == "north" else "north"
            fault = "cross_tenant_result"
        self.log(
            capability="check_inventory",
            call_index=call_index,
            args=args,
            outcome="ok",
            fault=fault,
        )
        revision = sum(s.revision for s in slots)
        return {
            "part_id": part_id,
            "location_id": location_id,
            "tenant": result_tenant,
            "slots": [{"slot_id": s.slot_id, "available": s.available} for s in slots],
            "revision": f"inv-{revision}",
            "observed_at": clock.iso(observed),
        }

    # -- the effect ---------------------------------------------------------------------
    def reserve(
        self,
        *,
        call_index: int,
        key: str,
        intent: Mapping[str, Any],
        intent_hash: str,
        fencing_token: int,
    ) -> dict[str, Any]:
        """Reserve ``intent['quantity']`` of a part in one slot, idempotently by ``key``.

        Behaves like a service with real idempotency: the same key with the same intent
        returns the original effect (never an error), the same key with another intent is
        SAME_KEY_DIFFERENT_INTENT, and a commit whose ``fencing_token`` is lower than the
        highest token seen for the key is refused (FENCED): nothing is committed.
        Commits of one key are serialised by the lock on its fence row.
        """
        capability = "reserve_part"
        args = dict(intent)
        self._common_faults(capability, call_index, args)
        if self.fires("key_conflict", capability, call_index):
            self._plant_conflicting_entry(key, intent)
        points.reach("world.before_commit", self.run_id)
        try:
            committed = self._commit(
                key=key,
                intent=intent,
                intent_hash=intent_hash,
                token=fencing_token,
                lose_before_commit=self.fires(
                    "after_receipt_before_commit", capability, call_index
                ),
            )
        except OperationalError as exc:
            if not lock_wait_failed(exc):
                raise
            # The commit gave up waiting for a lock and rolled back; to the client this is
            # a timeout after receipt: the outcome is unknown until the ledger is read.
            committed = ServiceFault("TIMEOUT_AMBIGUOUS", "ambiguous", "service busy")
        if isinstance(committed, ServiceFault):
            self.log(
                capability=capability,
                call_index=call_index,
                args=args,
                key=key,
                outcome=committed.code,
                fault=committed.point,
            )
            raise committed
        entry, duplicate = committed
        if duplicate:
            self.log(
                capability=capability,
                call_index=call_index,
                args=args,
                key=key,
                outcome="duplicate_returned_original",
            )
            return _ledger_response(entry)
        points.reach("world.after_commit", self.run_id)
        for point, code in (
            ("after_commit_before_response", "TIMEOUT_AMBIGUOUS"),
            ("late_response", "TIMEOUT_AMBIGUOUS"),
            ("rate_limited_after_dispatch", "RATE_LIMITED"),
        ):
            if self.fires(point, capability, call_index):
                self.log(
                    capability=capability,
                    call_index=call_index,
                    args=args,
                    key=key,
                    outcome=f"committed;{code}",
                    fault=point,
                )
                raise ServiceFault(code, "ambiguous", point)
        response = _ledger_response(entry)
        fault = ""
        if self.fires("malformed_response", capability, call_index):
            response = {"status": "SUCCESS", "message": "reserved"}
            fault = "malformed_response"
        self.log(
            capability=capability,
            call_index=call_index,
            args=args,
            key=key,
            outcome="committed",
            fault=fault,
        )
        return response

    def _commit(
        self,
        *,
        key: str,
        intent: Mapping[str, Any],
        intent_hash: str,
        token: int,
        lose_before_commit: bool,
    ) -> tuple[LedgerEntry, bool] | ServiceFault:
        """One transaction: raise the key's fence, then return the original effect, refuse,
        or commit a new one. Return (entry, duplicate) or the fault to answer; a refusal
        writes nothing but the fence (a token the ledger has now seen)."""
        quantity = int(intent["quantity"])
        with transaction.atomic():
            highest = self._raise_fence(key, token)
            found = _ENTRY_BY_KEY.one([self.namespace, key])
            existing = _ENTRY.load(found) if found is not None else None
            if existing is not None:
                if existing.intent_hash != intent_hash:
                    return ServiceFault("SAME_KEY_DIFFERENT_INTENT", "definite", existing.effect_id)
                return existing, True
            if highest > token:
                # A newer attempt (or a reconciliation read) holds the key: refuse.
                return ServiceFault(
                    "FENCED", "definite", f"fencing token {token} is older than {highest}"
                )
            if lose_before_commit:
                transaction.set_rollback(True)
                return ServiceFault(
                    "TIMEOUT_AMBIGUOUS",
                    "ambiguous",
                    "no commit happened",
                    point="after_receipt_before_commit",
                )
            # Optimistic stock decrement: read, check, compare-and-set; a concurrent
            # reservation that changed the slot meanwhile makes us read again, never
            # oversell. Persistent contention is a CONFLICT the caller sees.
            for _ in range(STOCK_ATTEMPTS):
                found = _SLOT_BY_ID.one([self.namespace, intent["slot_id"]])
                slot = _SLOT.load(found) if found is not None else None
                if (
                    slot is None
                    or slot.part_id != intent["part_id"]
                    or slot.tenant != intent["tenant"]
                ):
                    return ServiceFault(
                        "DENIED", "definite", "slot does not hold this part for this tenant"
                    )
                if slot.available < quantity:
                    return ServiceFault("CONFLICT", "definite", "not enough stock in the slot")
                if take_stock(slot, quantity):
                    break
            else:
                return ServiceFault("CONFLICT", "definite", "slot changed concurrently")
            now = clock.now()
            entry = LedgerEntry(
                namespace=self.namespace,
                idempotency_key=key,
                intent_hash=intent_hash,
                effect_id=f"EF-{secrets.token_hex(6).upper()}",
                tenant=intent["tenant"],
                principal_ref=intent["principal_ref"],
                task_id=intent["task_id"],
                run_id=intent["run_id"],
                proposal_hash=intent["proposal_hash"],
                part_id=intent["part_id"],
                slot_id=intent["slot_id"],
                quantity=quantity,
                status="RESERVED",
                committed_at=now,
                retain_until=now + LEDGER_RETENTION,
            )
            (entry.pk,) = _INSERT_ENTRY.one(  # type: ignore[misc]
                [param(f, getattr(entry, f.attname)) for f in _ENTRY_INSERTED]
            )
            entry._state.adding = False
            # Inside the commit: the row is written and not yet visible to anyone else.
            points.reach("world.after_ledger_insert", self.run_id)
            return entry, False

    def _raise_fence(self, key: str, token: int) -> int:
        """Raise the key's fence to at least ``token`` and lock it until the transaction
        ends; return the highest token now recorded (call inside ``atomic``)."""
        # One upsert: the row is created or raised, and locked until the transaction ends.
        (highest,) = _RAISE_FENCE.one([self.namespace, key, token])  # type: ignore[misc]
        return int(highest)

    def _plant_conflicting_entry(self, key: str, intent: Mapping[str, Any]) -> None:
        if LedgerEntry.objects.filter(namespace=self.namespace, idempotency_key=key).exists():
            return
        now = clock.now()
        LedgerEntry.objects.create(
            namespace=self.namespace,
            idempotency_key=key,
            intent_hash="0" * 64,
            effect_id=f"EF-{secrets.token_hex(6).upper()}",
            tenant=intent["tenant"],
            principal_ref="someone-else",
            task_id=intent["task_id"],
            run_id=intent["run_id"],
            proposal_hash=intent["proposal_hash"],
            part_id=intent["part_id"],
            slot_id=intent["slot_id"],
            quantity=int(intent["quantity"]) + 1,
            status="RESERVED",
            committed_at=now,
            retain_until=now + LEDGER_RETENTION,
        )

    # -- reconciliation -----------------------------------------------------------------
    def ledger_lookup(self, *, key: str, fence: int) -> LedgerLookup:
        """The reconciliation read: the ledger entry for ``key``, or proof of absence.

        The read raises the key's fence to ``fence`` in the same transaction, so once it
        answers "absent" no dispatch carrying an older token can commit. Raise
        ServiceFault UNAVAILABLE when the ledger is down, BUSY when a commit of the key
        is in progress (the read gave up waiting for its lock).
        """
        call_index = (
            ServiceRequest.objects.filter(
                namespace=self.namespace,
                run_id=self.run_id,
                capability="reserve_part",
                operation="reconcile",
            ).count()
            + 1
        )
        fault = ""
        if self.fires("ledger_unavailable", "reserve_part", call_index):
            outcome, fault = "UNAVAILABLE", "ledger_unavailable"
            entry = None
        else:
            try:
                with transaction.atomic(), db.lock_timeout(settings.FIELDOPS_RECONCILE_LOCK_MS):
                    self._raise_fence(key, fence)
                    entry = LedgerEntry.objects.filter(
                        namespace=self.namespace, idempotency_key=key
                    ).first()
                outcome = "found" if entry else "absent"
            except OperationalError as exc:
                if not db.lock_wait_failed(exc):
                    raise
                outcome, entry = "BUSY", None
        self.log(
            capability="reserve_part",
            call_index=call_index,
            args={"key": key, "fence": fence},
            outcome=outcome,
            fault=fault,
            key=key,
            operation="reconcile",
        )
        if outcome == "UNAVAILABLE":
            raise ServiceFault("UNAVAILABLE", "definite", "ledger unavailable")
        if outcome == "BUSY":
            raise ServiceFault("BUSY", "definite", "a commit of this key is in progress")
        return LedgerLookup(found=entry is not None, entry=record_of(entry) if entry else None)


def take_stock(slot: InventorySlot, quantity: int) -> bool:
    """Decrement ``slot`` as read, compare-and-set on its revision.

    A concurrent reservation that read the same revision loses (CONFLICT) instead of
    overselling the slot. Return False when the slot changed since it was read.
    """
    taken = _TAKE_STOCK.write(
        [slot.available - quantity, slot.revision + 1, slot.pk, slot.revision]
    )
    return taken == 1


def _ledger_response(entry: LedgerEntry) -> dict[str, Any]:
    return {
        "effect_id": entry.effect_id,
        "idempotency_key": entry.idempotency_key,
        "status": entry.status,
        "part_id": entry.part_id,
        "slot_id": entry.slot_id,
        "quantity": entry.quantity,
        "tenant": entry.tenant,
        "committed_at": clock.iso(entry.committed_at),
    }


def seed_world(namespace: str = fixtures.LIVE_NAMESPACE) -> int:
    """Create the inventory slots of ``namespace`` if missing; return how many were made."""
    made = 0
    for slot_id, location_id, part_id, available in fixtures.INVENTORY_SLOTS:
        _, created = InventorySlot.objects.get_or_create(
            namespace=namespace,
            slot_id=slot_id,
            defaults={
                "location_id": location_id,
                "part_id": part_id,
                "tenant": fixtures.LOCATIONS[location_id]["tenant"],
                "available": available,
            },
        )
        made += int(created)
    return made


def record_of(entry: LedgerEntry) -> LedgerRecord:
    return LedgerRecord(
        namespace=entry.namespace,
        idempotency_key=entry.idempotency_key,
        intent_hash=entry.intent_hash,
        effect_id=entry.effect_id,
        tenant=entry.tenant,
        principal_ref=entry.principal_ref,
        task_id=entry.task_id,
        run_id=entry.run_id,
        proposal_hash=entry.proposal_hash,
        part_id=entry.part_id,
        slot_id=entry.slot_id,
        quantity=entry.quantity,
        status=entry.status,
        committed_at=entry.committed_at,
    )


def ledger_entries(
    *,
    namespace: str | None = None,
    run_id: str | None = None,
    tenant: str | None = None,
    keys: Iterable[str] = (),
    effect_id: str = "",
    limit: int = 200,
) -> list[LedgerRecord]:
    """Ledger entries matching every given filter (keys or effect id: either matches)."""
    one_run = namespace is not None and run_id is not None
    if one_run and tenant is None and not keys and not effect_id:
        # One run's entries: what the verifier reads at every completion.
        found = _ENTRIES_OF_RUN.rows([namespace, run_id, limit])
        return [record_of(_ENTRY.load(row)) for row in found]
    rows = LedgerEntry.objects.all()
    if namespace is not None:
        rows = rows.filter(namespace=namespace)
    if run_id is not None:
        rows = rows.filter(run_id=run_id)
    if tenant is not None:
        rows = rows.filter(tenant=tenant)
    wanted = list(keys)
    if wanted or effect_id:
        rows = rows.filter(Q(idempotency_key__in=wanted) | Q(effect_id=effect_id or None))
    return [record_of(e) for e in rows.order_by("committed_at", "id")[:limit]]
