"""Stored capability versions with their digest and lifecycle, and the audited decisions
that moved them."""

from __future__ import annotations

from django.conf import settings
from django.db import models
from django.utils import timezone

from kernel.principals import PRINCIPAL_REF_MAX


class Lifecycle(models.TextChoices):
    DISCOVERED = "DISCOVERED"
    ADMITTED = "ADMITTED"
    DEPRECATED = "DEPRECATED"
    RETIRED = "RETIRED"
    REJECTED = "REJECTED"
    DEFERRED = "DEFERRED"


class Source(models.TextChoices):
    REVIEWED = "reviewed", "reviewed local contract"
    DISCOVERED = "discovered", "discovered definition (untrusted)"


class CapabilityVersion(models.Model):
    """A stored capability version.

    ``source=reviewed``: ``contract`` is a local reviewed contract (from catalog/
    capabilities) and ``digest`` its digest. ``source=discovered``: an imported tool
    definition; ``definition`` holds it verbatim, ``digest`` is its digest, ``version`` is
    named by that digest, and ``contract`` is empty until an admission maps it to a local
    reviewed contract (``local_contract_ref``). Discovered definitions never reach a model.
    """

    # MCP tool names run to 128 characters.
    capability_id = models.CharField(max_length=128)
    version = models.CharField(max_length=32)
    digest = models.CharField(max_length=64)
    contract = models.JSONField()
    lifecycle = models.CharField(max_length=12, choices=Lifecycle.choices)
    # Closing the effect gate stops new effect dispatch while reads continue.
    effect_gate_open = models.BooleanField(default=True)
    created_at = models.DateTimeField(auto_now_add=True)
    source = models.CharField(max_length=12, choices=Source.choices, default=Source.REVIEWED)
    server = models.CharField(max_length=200, blank=True, default="")
    definition = models.JSONField(default=dict, blank=True)
    # Untrusted hints and reviewer flags found at import (shown, never enforced).
    discovery = models.JSONField(default=dict, blank=True)
    imported_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.PROTECT, related_name="+"
    )
    local_contract_ref = models.CharField(max_length=100, blank=True, default="")
    # A retirement that needs two people waits here for a second catalog admin.
    retire_requested_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.PROTECT, related_name="+"
    )
    retire_requested_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["capability_id", "version"], name="capability_version_unique"
            ),
        ]
        ordering = ["capability_id", "version"]

    def __str__(self) -> str:
        return f"{self.capability_id}@{self.version} {self.lifecycle}"

    @property
    def ref(self) -> str:
        return f"{self.capability_id}@{self.version}"

    @property
    def discovered(self) -> bool:
        return self.source == Source.DISCOVERED

    @property
    def hints(self) -> dict[str, bool]:
        return dict(self.discovery.get("hints", {}))

    @property
    def effect_class(self) -> str:
        return str(self.contract.get("effect_class", "")) if self.contract else ""

    @property
    def is_effect(self) -> bool:
        """True when the effect gate means something (an approval-gated effect)."""
        return bool(self.contract.get("requires_approval")) if self.contract else False


class TenantEffectGate(models.Model):
    """One tenant's effect gate of one version: closed, it stops that tenant's new effect
    dispatch only. Set by that tenant's operators; the deployment gate
    (``CapabilityVersion.effect_gate_open``) belongs to catalog admins. No row: open."""

    version = models.ForeignKey(
        CapabilityVersion, on_delete=models.PROTECT, related_name="tenant_gates"
    )
    tenant = models.CharField(max_length=32)
    open = models.BooleanField(default=True)
    changed_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.PROTECT, related_name="+"
    )
    changed_at = models.DateTimeField(auto_now=True)
    reason = models.CharField(max_length=1000, blank=True, default="")

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["version", "tenant"], name="tenant_effect_gate_unique"),
        ]
        ordering = ["version_id", "tenant"]

    def __str__(self) -> str:
        return f"{self.version_id} {self.tenant} {'open' if self.open else 'closed'}"


class LifecycleDecision(models.Model):
    """An audited lifecycle step or gate change, with reviewer and reason."""

    version = models.ForeignKey(
        CapabilityVersion, on_delete=models.PROTECT, related_name="decisions"
    )
    action = models.CharField(max_length=24)
    from_state = models.CharField(max_length=12)
    to_state = models.CharField(max_length=12)
    reviewer = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.PROTECT, related_name="+"
    )
    reviewer_ref = models.CharField(max_length=PRINCIPAL_REF_MAX)
    reason = models.CharField(max_length=1000)
    admission = models.JSONField(default=dict, blank=True)
    # What else the decision recorded: retirement inventory, import source, diff summary.
    details = models.JSONField(default=dict, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-created_at", "-id"]

    def __str__(self) -> str:
        return f"{self.action} {self.from_state}->{self.to_state}"


class ToolListImport(models.Model):
    """One accepted import of a pasted or uploaded tool list, and what its result page
    shows (post/redirect/get: reloading the page reads this row, it imports nothing).

    ``result`` is ``ImportResult.summary()`` (version refs per outcome, the tools refused
    alone, the warnings), as a Discovery keeps it. The record belongs to the importer's
    tenant (``""``: a user of none); only that tenant reads it.
    """

    tenant = models.CharField(max_length=32, blank=True, default="")
    imported_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.PROTECT, related_name="+"
    )
    imported_by_ref = models.CharField(max_length=PRINCIPAL_REF_MAX)
    server = models.CharField(max_length=200)
    source = models.CharField(max_length=200, blank=True, default="")
    result = models.JSONField(default=dict, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-created_at", "-id"]

    def __str__(self) -> str:
        return f"import {self.pk} from {self.server}"


# -- tool servers and live discovery ------------------------------------------------------
class Transport(models.TextChoices):
    STDIO = "stdio", "stdio (a local command)"
    HTTP = "http", "HTTP (Streamable HTTP, or the deprecated HTTP+SSE)"


class ToolServer(models.Model):
    """A registered MCP tool server the catalog discovers from.

    ``credential_ref`` names where the HTTP credential lives (``env:NAME``); ``env`` maps
    each environment variable a stdio server is started with to the reference of where
    its value lives (``{"BRAVE_API_KEY": "env:FIELDOPS_MCP_ENV_BRAVE"}``). Values are read
    when the server is reached and never stored, logged or put in a decision.
    """

    name = models.SlugField(max_length=64, unique=True)
    transport = models.CharField(max_length=8, choices=Transport.choices)
    command = models.CharField(max_length=500, blank=True, default="")
    args = models.JSONField(default=list, blank=True)
    url = models.CharField(max_length=500, blank=True, default="")
    credential_ref = models.CharField(max_length=80, blank=True, default="")
    env = models.JSONField(default=dict, blank=True)
    # Scheduled re-discovery (beat) visits this server.
    scheduled = models.BooleanField(default=True)
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.PROTECT, related_name="+"
    )
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name

    @property
    def target_label(self) -> str:
        if self.transport == Transport.STDIO:
            return " ".join([self.command, *[str(a) for a in self.args]])
        return self.url


class DiscoveryOutcome(models.TextChoices):
    RUNNING = "running"
    OK = "ok"
    FAILED = "failed"


class Discovery(models.Model):
    """One discovery attempt against a registered server, successful or not.

    A failed attempt stores this record and nothing else: no candidate, no sighting.
    ``summary`` lists what a successful one created, left unchanged, saw change, marked
    gone and refused (with reasons).
    """

    server = models.ForeignKey(ToolServer, on_delete=models.CASCADE, related_name="discoveries")
    trigger = models.CharField(max_length=16)  # manual | schedule | command
    requested_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.PROTECT, related_name="+"
    )
    requested_ref = models.CharField(max_length=PRINCIPAL_REF_MAX)
    # When the discovery was asked for (its record is written when it ends: see finished_at).
    started_at = models.DateTimeField(default=timezone.now)
    finished_at = models.DateTimeField(null=True, blank=True)
    outcome = models.CharField(
        max_length=8, choices=DiscoveryOutcome.choices, default=DiscoveryOutcome.RUNNING
    )
    code = models.CharField(max_length=32, blank=True, default="")
    message = models.CharField(max_length=2000, blank=True, default="")
    stderr = models.CharField(max_length=1000, blank=True, default="")
    identity = models.JSONField(default=dict, blank=True)
    pages = models.PositiveIntegerField(default=0)
    tools_listed = models.PositiveIntegerField(default=0)
    wire_bytes = models.PositiveBigIntegerField(default=0)
    seconds = models.FloatField(default=0.0)
    summary = models.JSONField(default=dict, blank=True)

    class Meta:
        ordering = ["-started_at", "-id"]

    def __str__(self) -> str:
        return f"discovery of {self.server_id} {self.outcome}"

    @property
    def ok(self) -> bool:
        return self.outcome == DiscoveryOutcome.OK


class ToolSighting(models.Model):
    """A discovered definition as served by one server: the same definition on two
    servers has two sightings. ``gone_at`` is set when that server stopped serving it
    (removed, changed into another definition, or refused on re-discovery)."""

    version = models.ForeignKey(
        CapabilityVersion, on_delete=models.PROTECT, related_name="sightings"
    )
    server_label = models.CharField(max_length=200)
    tool_server = models.ForeignKey(
        ToolServer, null=True, blank=True, on_delete=models.SET_NULL, related_name="sightings"
    )
    identity = models.JSONField(default=dict, blank=True)
    first_seen = models.DateTimeField(auto_now_add=True)
    last_seen = models.DateTimeField()
    gone_at = models.DateTimeField(null=True, blank=True)
    discovery = models.ForeignKey(
        Discovery, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["version", "server_label"], name="tool_sighting_unique"
            ),
        ]
        ordering = ["server_label", "-last_seen"]

    def __str__(self) -> str:
        return f"{self.version_id} on {self.server_label}"


class DriftKind(models.TextChoices):
    CHANGED = "changed", "definition changed"
    GONE = "gone", "no longer listed"
    REFUSED = "refused", "now refused"


class ToolDrift(models.Model):
    """A server changed, dropped or broke a tool it served before.

    ``paused`` lists the admitted mappings this drift paused (deprecated). Open until a
    catalog admin marks it reviewed (with a reason).
    """

    server_label = models.CharField(max_length=200)
    tool_server = models.ForeignKey(
        ToolServer, null=True, blank=True, on_delete=models.SET_NULL, related_name="drifts"
    )
    capability_id = models.CharField(max_length=128)
    kind = models.CharField(max_length=8, choices=DriftKind.choices)
    before = models.ForeignKey(
        CapabilityVersion, on_delete=models.PROTECT, related_name="drifts_from"
    )
    after = models.ForeignKey(
        CapabilityVersion,
        null=True,
        blank=True,
        on_delete=models.PROTECT,
        related_name="drifts_to",
    )
    discovery = models.ForeignKey(
        Discovery, null=True, blank=True, on_delete=models.SET_NULL, related_name="drifts"
    )
    paused = models.JSONField(default=list, blank=True)
    details = models.JSONField(default=dict, blank=True)
    detected_at = models.DateTimeField(auto_now_add=True)
    resolved_at = models.DateTimeField(null=True, blank=True)
    resolved_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.PROTECT, related_name="+"
    )
    resolution = models.CharField(max_length=1000, blank=True, default="")

    class Meta:
        ordering = ["-detected_at", "-id"]

    def __str__(self) -> str:
        return f"{self.kind} {self.capability_id} on {self.server_label}"

    @property
    def open(self) -> bool:
        return self.resolved_at is None

    @property
    def under_admitted_mapping(self) -> bool:
        return bool(self.paused)
