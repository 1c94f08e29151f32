"""Catalog console: versions, contracts and diffs, discovered candidates, lifecycle
decisions, the rejection log and the routing report.

Every signed-in user may read. Catalog admins change things, the deployment effect gate
included; operators open and close their own tenant's effect gate (incident runbooks).
Each view: access check, one service or selector call, then the page or its HTMX
partial. Writes are POST with CSRF, go through ``catalog.services`` and leave a
LifecycleDecision row; a refused step changes nothing and answers 409 (conflict with the
version's state) or 400 (incomplete request). The refused form comes back as typed, its
refusal beside the field it is about (``REFUSAL_FIELDS``) or, about no single field, at
the top of the page.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from typing import Any
from urllib.parse import urlencode

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.views.decorators.http import require_POST, require_safe

from access.roles import CATALOG_ADMIN, OPERATOR, require_role, tenant_of
from catalog import executor, selectors, servers, services
from catalog.domain import discovery
from catalog.domain.lifecycle import Refusal
from catalog.models import (
    CapabilityVersion,
    Discovery,
    DiscoveryOutcome,
    Lifecycle,
    ToolDrift,
    ToolServer,
)
from catalog.refusals import BAD_REQUEST_CODES, REFUSAL_FIELDS
from fieldops.http import AuthedHtmxRequest

SERVER_INPUTS = frozenset({"name", "transport", "command", "args", "url", "credential_ref", "env"})
ADMIT_INPUTS = frozenset({"task_transition", "alternatives", "decision", "expiry", "reason"})
MAX_UPLOAD_BYTES = discovery.MAX_BYTES
# The whole import request: the list, the server name and the multipart framing.
MAX_IMPORT_REQUEST_BYTES = MAX_UPLOAD_BYTES + 64 * 1024


def _refusal_context(
    exc: Refusal, *, form: str, fields: Mapping[str, str], shown: Collection[str]
) -> dict[str, Any]:
    """The page context of a refusal of ``form``: ``refusal_at`` is "<form>:<field>" when
    it is shown beside that field (``fields`` maps codes to fields), or "" (the top of the
    page) when it is about no single field or about one the page does not show now (the
    version moved on meanwhile)."""
    field = exc.field or fields.get(exc.code, "")
    at = f"{form}:{field}" if field in shown else ""
    return {"refusal": exc, "refused_form": form, "refusal_at": at}


def _version_url(row: CapabilityVersion) -> str:
    if row.discovered:
        return reverse("catalog-candidate", args=[row.pk])
    return reverse("catalog-contract", args=[row.capability_id, row.version])


# -- reading ---------------------------------------------------------------------------
def _index_context(request: HttpRequest) -> dict[str, Any]:
    filters = selectors.VersionFilters.from_query(request.GET)
    return {
        "rows": selectors.version_list(filters),
        "filters": filters,
        "lifecycles": Lifecycle.values,
        "sources": selectors.SOURCES,
        "counts": selectors.lifecycle_counts(),
        "servers": selectors.tool_servers(),
        "drifts": selectors.open_drifts(),
    }


@require_safe
@login_required
def catalog_index(request: AuthedHtmxRequest) -> HttpResponse:
    context = _index_context(request)
    if request.htmx.target == "catalog-table":
        return render(request, "catalog/index.html#catalog-table", context)
    return render(request, "catalog/index.html", context)


@require_safe
@login_required
def catalog_contract(request: AuthedHtmxRequest, capability_id: str, version: str) -> HttpResponse:
    row = get_object_or_404(CapabilityVersion, capability_id=capability_id, version=version)
    if row.discovered:
        return redirect("catalog-candidate", row.pk)
    tenant = tenant_of(request.user)
    context = selectors.contract_view(row, tenant=tenant)
    if tenant:
        context["user_tenant"] = tenant
        context["tenant_gate_open"] = services.tenant_gate_open(row, tenant)
    return render(request, "catalog/contract.html", context)


@require_safe
@login_required
def catalog_candidate(request: AuthedHtmxRequest, version_id: int) -> HttpResponse:
    row = get_object_or_404(CapabilityVersion, pk=version_id)
    if not row.discovered:
        return redirect("catalog-contract", row.capability_id, row.version)
    context = selectors.candidate_view(row, tenant=tenant_of(request.user))
    # The two-person rule, decided here for the page: the importer may not admit.
    context["imported_by_you"] = row.imported_by_id == request.user.pk
    return render(request, "catalog/candidate.html", context)


# -- trimmed addresses ------------------------------------------------------------------
# A person trims a page's address to reach the list above it (``/catalog/candidates/7/`` to
# ``/catalog/candidates/``): each parent of a real page leads to the page that lists what
# it names, never to a bare 404.
@require_safe
@login_required
def catalog_candidates(request: AuthedHtmxRequest) -> HttpResponse:
    """``/catalog/candidates/``: the catalog's versions filtered to discovered candidates."""
    return redirect(f"{reverse('catalog-index')}?{urlencode({'source': 'discovered'})}")


@require_safe
@login_required
def catalog_versions(request: AuthedHtmxRequest) -> HttpResponse:
    """``/catalog/versions/``: the catalog's version list."""
    return redirect("catalog-index")


@require_safe
@login_required
def catalog_version(request: AuthedHtmxRequest, version_id: int) -> HttpResponse:
    """``/catalog/versions/<id>/`` (the parent of its action addresses): the version's page,
    a candidate's or a contract's."""
    return redirect(_version_url(get_object_or_404(CapabilityVersion, pk=version_id)))


@require_safe
@login_required
def catalog_imports(request: AuthedHtmxRequest) -> HttpResponse:
    """``/catalog/imports/``: the import page (an import's result is reached from it)."""
    return redirect("catalog-import")


@require_safe
@login_required
def catalog_discoveries(request: AuthedHtmxRequest) -> HttpResponse:
    """``/catalog/discoveries/``: the tool servers, whose pages list their discoveries."""
    return redirect("catalog-servers")


@require_safe
@login_required
def catalog_drifts(request: AuthedHtmxRequest, drift_id: int | None = None) -> HttpResponse:
    """``/catalog/drift/`` and ``/catalog/drift/<id>/``: the catalog page's open drifts."""
    return redirect(f"{reverse('catalog-index')}#catalog-drift")


@require_safe
@login_required
def catalog_capability(request: AuthedHtmxRequest, capability_id: str) -> HttpResponse:
    """``/catalog/<capability>/``, trimmed from a contract's address: the catalog's versions
    searched by the capability."""
    return redirect(f"{reverse('catalog-index')}?{urlencode({'q': capability_id[:64]})}")


@require_safe
@login_required
def catalog_diff(request: AuthedHtmxRequest) -> HttpResponse:
    default_a, default_b = selectors.default_diff_pair()
    a_ref = request.GET.get("a") or default_a
    b_ref = request.GET.get("b") or default_b
    left, right = selectors.version_by_ref(a_ref), selectors.version_by_ref(b_ref)
    context: dict[str, Any] = {"a": a_ref, "b": b_ref, "choices": selectors.diff_choices()}
    status = 200
    if left is None or right is None:
        missing = a_ref if left is None else b_ref
        context["error"] = f"No stored version {missing!r}: choose two versions."
        status = 404
    else:
        context.update(selectors.diff_view(left, right))
    return render(request, "catalog/diff.html", context, status=status)


@require_safe
@login_required
def catalog_rejections(request: AuthedHtmxRequest) -> HttpResponse:
    return render(request, "catalog/rejections.html", selectors.rejection_log())


# -- import ----------------------------------------------------------------------------
@login_required
def catalog_import(request: AuthedHtmxRequest) -> HttpResponse:
    if request.method not in ("GET", "HEAD", "POST"):
        return HttpResponse(status=405, headers={"Allow": "GET, HEAD, POST"})
    context: dict[str, Any] = {"limits": discovery}
    if request.method in ("GET", "HEAD"):
        return render(request, "catalog/import.html", context)
    require_role(request.user, CATALOG_ADMIN)
    server = request.POST.get("server", "")
    text = request.POST.get("tool_list", "")
    source = "pasted"
    upload = request.FILES.get("file")
    if upload is not None:
        if upload.size is not None and upload.size > MAX_UPLOAD_BYTES:
            return _import_refused(
                request,
                context,
                server,
                "",
                [f"the file is {upload.size} bytes (limit {MAX_UPLOAD_BYTES})"],
            )
        raw = upload.read(MAX_UPLOAD_BYTES + 1)
        try:
            # A leading byte order mark is no part of the list (editors on Windows save
            # UTF-8 with one); without "-sig" the parser refused it in its own words.
            text = raw.decode("utf-8-sig")
        except UnicodeDecodeError:
            return _import_refused(request, context, server, "", ["the file is not UTF-8 text"])
        source = f"file {upload.name}"[:200]
    try:
        record = services.tool_list_import(
            text=text,
            server=server,
            user=request.user,
            tenant=tenant_of(request.user) or "",
            source=source,
        )
    except discovery.ImportRefused as exc:
        return _import_refused(request, context, server, text, exc.errors)
    # Post/redirect/get: the result is a stored record shown by a GET, so reloading it (or
    # back and forward) shows it again instead of importing the list again.
    return redirect("catalog-import-result", record.pk)


@require_safe
@login_required
def catalog_import_result(request: AuthedHtmxRequest, import_id: int) -> HttpResponse:
    """An import's result as it was when the list was imported, for the importer's tenant;
    another tenant's or an unknown import is a 404 with the page's empty state."""
    context: dict[str, Any] = {"limits": discovery}
    record = selectors.tool_list_import_for(import_id=import_id, tenant=tenant_of(request.user))
    if record is None:
        context["missing"] = True
        return render(request, "catalog/import.html", context, status=404)
    context.update(selectors.tool_list_import_view(record))
    return render(request, "catalog/import.html", context)


# -- tool servers and live discovery -----------------------------------------------------
@login_required
def catalog_servers(request: AuthedHtmxRequest) -> HttpResponse:
    """GET: registered servers and the registration form. POST: register one."""
    if request.method not in ("GET", "HEAD", "POST"):
        return HttpResponse(status=405, headers={"Allow": "GET, HEAD, POST"})
    context: dict[str, Any] = {
        "servers": selectors.tool_servers(),
        "allowed_commands": servers.allowed_commands(),
        "max_env": servers.MAX_ENV,
        "form": {"transport": "stdio"},
    }
    if request.method in ("GET", "HEAD"):
        return render(request, "catalog/servers.html", context)
    require_role(request.user, CATALOG_ADMIN)
    form = {
        key: request.POST.get(key, "")
        for key in ("name", "transport", "command", "args", "url", "credential_ref", "env")
    }
    form["scheduled"] = request.POST.get("scheduled", "") == "on"
    try:
        server = servers.tool_server_register(
            user=request.user,
            name=form["name"],
            transport=form["transport"],
            command=form["command"],
            args_text=form["args"],
            url=form["url"],
            credential_ref=form["credential_ref"],
            env_text=form["env"],
            scheduled=bool(form["scheduled"]),
        )
    except Refusal as exc:
        refusal = _refusal_context(
            exc, form="server", fields=REFUSAL_FIELDS["server"], shown=SERVER_INPUTS
        )
        # An entry whose value is not a reference may be the secret itself: not shown again.
        form["env"] = servers.env_text_as_kept(str(form["env"]))
        context.update({**refusal, "form": form})
        return render(request, "catalog/servers.html", context, status=400)
    messages.success(request, f"Tool server {server.name} registered. Discover it now.")
    return redirect("catalog-server", server.pk)


@require_safe
@login_required
def catalog_server(request: AuthedHtmxRequest, server_id: int) -> HttpResponse:
    server = get_object_or_404(ToolServer, pk=server_id)
    return render(request, "catalog/server.html", selectors.server_view(server))


@require_POST
@login_required
def catalog_server_discover(request: AuthedHtmxRequest, server_id: int) -> HttpResponse:
    """Discover now: record the request, hand it to a worker (production) or carry it out
    at once (embedded), and open the discovery's page, which follows it to its outcome."""
    require_role(request.user, CATALOG_ADMIN)
    server = get_object_or_404(ToolServer, pk=server_id)
    try:
        run, new = servers.discovery_request(server_id=server.pk, user=request.user)
    except Refusal as exc:  # deleted meanwhile
        raise Http404(exc.message) from exc
    if not new:
        messages.info(request, f"A discovery of {server.name} is already running: here it is.")
        return redirect("catalog-discovery", run.pk)
    if not executor.hand_over(run):
        servers.discovery_not_handed_over(run)
    run.refresh_from_db()
    if run.outcome == DiscoveryOutcome.RUNNING:
        messages.info(
            request, f"Discovering {server.name}: this page shows the outcome when it ends."
        )
    elif run.ok:
        messages.success(request, f"Discovered {server.name}: {run.message}")
    else:
        messages.error(request, f"Discovery of {server.name} failed: {run.message}")
    return redirect("catalog-discovery", run.pk)


@require_safe
@login_required
def catalog_discovery(request: AuthedHtmxRequest, discovery_id: int) -> HttpResponse:
    run = get_object_or_404(Discovery.objects.select_related("server"), pk=discovery_id)
    if request.htmx.target == "discovery-progress":
        # The running page asks every second: the progress while it runs, then a reload
        # of the whole page, which shows the outcome.
        if run.outcome == DiscoveryOutcome.RUNNING and not servers.is_lost(run):
            return render(
                request, "catalog/discovery.html#discovery-progress", selectors.discovery_view(run)
            )
        return HttpResponse(headers={"HX-Refresh": "true"})
    return render(request, "catalog/discovery.html", selectors.discovery_view(run))


@require_POST
@login_required
def catalog_drift_resolve(request: AuthedHtmxRequest, drift_id: int) -> HttpResponse:
    require_role(request.user, CATALOG_ADMIN)
    drift = get_object_or_404(ToolDrift, pk=drift_id)
    back = request.POST.get("next", "")
    # Back to where it was reviewed: a catalog page or the drift runbook's step.
    back = back if back.startswith(("/catalog/", "/runbooks/")) else reverse("catalog-index")
    reason = request.POST.get("reason", "")
    try:
        services.drift_resolve(drift_id=drift.pk, user=request.user, reason=reason)
    except Refusal as exc:
        if exc.code in REFUSAL_FIELDS["drift"]:
            return _drift_refused(request, drift, exc, reason=reason, back=back)
        messages.error(request, f"Refused ({exc.code}): {exc.message}")
        return redirect(back)
    messages.success(request, f"Drift of {drift.capability_id} on {drift.server_label} reviewed.")
    return redirect(back)


def _drift_refused(
    request: HttpRequest, drift: ToolDrift, exc: Refusal, *, reason: str, back: str
) -> HttpResponse:
    """The page the drift was reviewed on (its server's page, the drift runbook or the
    catalog) again, the refusal beside that drift's reason and the reason as typed."""
    refusal = _refusal_context(exc, form="drift", fields=REFUSAL_FIELDS["drift"], shown={"reason"})
    extra = {**refusal, "refused_drift": drift.pk, "form": {"reason": reason}, "drift_back": back}
    if back.startswith("/runbooks/"):
        from runs.console import runbooks_views  # the runbook pages are the console's

        page = runbooks_views.drift_refused(request, back, extra)
        if page is not None:
            return page
    server = drift.tool_server
    if server is not None and back == reverse("catalog-server", args=[server.pk]):
        context, template = selectors.server_view(server), "catalog/server.html"
    else:
        context, template = _index_context(request), "catalog/index.html"
    context.update(extra)
    return render(request, template, context, status=400)


def _import_refused(
    request: HttpRequest, context: dict[str, Any], server: str, text: str, errors: list[str]
) -> HttpResponse:
    context.update({"errors": errors, "server": server[:200], "tool_list": text[:MAX_UPLOAD_BYTES]})
    return render(request, "catalog/import.html", context, status=400)


def catalog_import_too_large(request: AuthedHtmxRequest, size: int | None) -> HttpResponse:
    """The import page's own refusal of a request body over the limit (nothing was read).

    Called by ``catalog.middleware.ImportBodyLimitMiddleware`` before anything parses the
    body: Django would otherwise answer a bare 400 (or its debug page).
    """
    shown = f"{size} bytes" if size else "larger than the limit"
    errors = [
        f"the request is {shown}: a pasted or uploaded tool list may be at most "
        f"{MAX_UPLOAD_BYTES} bytes. Nothing was read or stored. For a large server, "
        "register it and use Discover now, which reads every page within its own limits."
    ]
    return _import_refused(request, {"limits": discovery}, "", "", errors)


# -- lifecycle decisions ---------------------------------------------------------------
def _refused(
    request: HttpRequest,
    row: CapabilityVersion,
    exc: Refusal,
    form: dict[str, Any],
    *,
    name: str,
) -> HttpResponse:
    """The version's page again, after a refusal of its form ``name`` ("admit", a
    lifecycle action such as "deprecate", "gate", "tenant_gate")."""
    status = 400 if exc.code in BAD_REQUEST_CODES else 409
    row.refresh_from_db()
    if row.discovered:
        context = selectors.candidate_view(row, tenant=tenant_of(request.user))
        template = "catalog/candidate.html"
    else:
        context = selectors.contract_view(row, tenant=tenant_of(request.user))
        template = "catalog/contract.html"
    # The fields of the refused form that the page shows now (its state was read again).
    fields: Mapping[str, str] = {}
    shown: Collection[str] = ()
    if name == "admit" and name in context["actions"]:
        fields = REFUSAL_FIELDS["admit"]
        shown = ADMIT_INPUTS | ({"local_ref"} if context.get("local_choices") else set())
    elif name in context["actions"] and name != "retire":  # retire has its own page
        fields, shown = REFUSAL_FIELDS["lifecycle"], {"reason"}
    elif name in ("gate", "tenant_gate"):
        fields, shown = REFUSAL_FIELDS["gate"], {"reason"}
    refusal = _refusal_context(exc, form=name, fields=fields, shown=shown)
    context.update({**refusal, "form": form})
    if not shown and form.get("reason", "").strip():
        # The form is gone (the version moved on): the typed reason stays with the refusal.
        context["kept_reason"] = form["reason"]
    return render(request, template, context, status=status)


@require_POST
@login_required
def catalog_admit(request: AuthedHtmxRequest, version_id: int) -> HttpResponse:
    require_role(request.user, CATALOG_ADMIN)
    row = get_object_or_404(CapabilityVersion, pk=version_id)
    form = {
        "task_transition": request.POST.get("task_transition", ""),
        "alternatives": request.POST.get("alternatives", ""),
        "decision": request.POST.get("decision", ""),
        "expiry": request.POST.get("expiry", ""),
        "reason": request.POST.get("reason", ""),
        "local_ref": request.POST.get("local_ref", ""),
    }
    # The lifecycle state the page showed: a post without it (an older page, a script)
    # binds nothing and is refused like a stale one.
    shown_state = request.POST.get("lifecycle", "")
    try:
        row = services.capability_admit(
            version_id=row.pk,
            user=request.user,
            task_transition=form["task_transition"],
            alternatives=form["alternatives"].splitlines(),
            decision=form["decision"],
            expiry=form["expiry"],
            reason=form["reason"],
            local_ref=form["local_ref"],
            shown_state=shown_state,
        )
    except Refusal as exc:
        return _refused(request, row, exc, form, name="admit")
    messages.success(request, f"{row.ref} admitted with an admission record.")
    return redirect(_version_url(row))


@require_POST
@login_required
def catalog_decide(request: AuthedHtmxRequest, version_id: int) -> HttpResponse:
    require_role(request.user, CATALOG_ADMIN)
    row = get_object_or_404(CapabilityVersion, pk=version_id)
    action = request.POST.get("action", "")
    form = {"action": action, "reason": request.POST.get("reason", "")}
    try:
        row = services.capability_decide(
            version_id=row.pk,
            user=request.user,
            action=action,
            reason=form["reason"],
            acknowledge=request.POST.get("acknowledge") == "1",
            # No form of the contract page confirms a retirement: only the retire page
            # shows the request a confirmation binds.
            confirms=request.POST.get("confirms", ""),
            shown_state=request.POST.get("lifecycle", ""),
        )
    except Refusal as exc:
        # Each lifecycle form is named by its action; admission has a form of its own.
        return _refused(request, row, exc, form, name="decide" if action == "admit" else action)
    _decided_message(request, row)
    return redirect(_version_url(row))


def _decided_message(request: HttpRequest, row: CapabilityVersion) -> None:
    if row.retire_requested_by_id is not None and row.lifecycle != Lifecycle.RETIRED:
        messages.success(
            request,
            f"Retirement of {row.ref} requested; a second catalog admin must confirm it on "
            "the retire page.",
        )
    else:
        messages.success(request, f"{row.ref} is now {row.lifecycle}.")


def _retire_refused(
    request: HttpRequest,
    row: CapabilityVersion,
    exc: Refusal,
    form: dict[str, Any],
    *,
    name: str,
) -> HttpResponse:
    """The retire page again, after a refusal of its form ``name`` ("retire" or
    "withdraw")."""
    row.refresh_from_db()
    context = selectors.retire_view(row, viewer=request.user)
    # The fields of the refused form that the page shows now (its state was read again).
    shown: set[str] = set()
    if name == "retire" and context["can_retire"] and not context["own_request"]:
        shown = {"reason", "acknowledge"} if context["risks"] else {"reason"}
    elif name == "withdraw" and context["can_retire"] and context["requested_by"]:
        shown = {"reason"}
    refusal = _refusal_context(exc, form=name, fields=REFUSAL_FIELDS[name], shown=shown)
    context.update({**refusal, "form": form})
    typed = form.get("reason") or form.get("withdraw_reason") or ""
    if not shown and typed.strip():
        # The form is gone (the version moved on): the typed reason stays with the refusal.
        context["kept_reason"] = typed
    status = 400 if exc.code in BAD_REQUEST_CODES else 409
    return render(request, "catalog/retire.html", context, status=status)


@login_required
def catalog_retire(request: AuthedHtmxRequest, version_id: int) -> HttpResponse:
    """GET: the retire page from live data. POST: request or confirm the retirement."""
    if request.method not in ("GET", "HEAD", "POST"):
        return HttpResponse(status=405, headers={"Allow": "GET, HEAD, POST"})
    row = get_object_or_404(
        CapabilityVersion.objects.select_related("retire_requested_by"), pk=version_id
    )
    if request.method in ("GET", "HEAD"):
        context = selectors.retire_view(row, viewer=request.user)
        return render(request, "catalog/retire.html", context)
    require_role(request.user, CATALOG_ADMIN)
    form = {"reason": request.POST.get("reason", "")}
    try:
        row = services.capability_decide(
            version_id=row.pk,
            user=request.user,
            action="retire",
            reason=form["reason"],
            acknowledge=request.POST.get("acknowledge") == "1",
            confirms=request.POST.get("confirms", ""),
            # The lifecycle state the retire page showed: a version deprecated (or moved
            # otherwise) since is refused (lifecycle_changed), like a post naming none.
            shown_state=request.POST.get("lifecycle", ""),
        )
    except Refusal as exc:
        return _retire_refused(request, row, exc, form, name="retire")
    _decided_message(request, row)
    if row.lifecycle == Lifecycle.RETIRED:
        return redirect(_version_url(row))
    return redirect("catalog-retire", row.pk)


@require_POST
@login_required
def catalog_retire_withdraw(request: AuthedHtmxRequest, version_id: int) -> HttpResponse:
    """Withdraw the pending retirement request (its requester or any catalog admin)."""
    require_role(request.user, CATALOG_ADMIN)
    row = get_object_or_404(
        CapabilityVersion.objects.select_related("retire_requested_by"), pk=version_id
    )
    form = {"withdraw_reason": request.POST.get("reason", "")}
    try:
        row = services.capability_retire_withdraw(
            version_id=row.pk, user=request.user, reason=form["withdraw_reason"]
        )
    except Refusal as exc:
        return _retire_refused(request, row, exc, form, name="withdraw")
    messages.success(
        request, f"Retirement request of {row.ref} withdrawn; it stays {row.lifecycle}."
    )
    return redirect("catalog-retire", row.pk)


@require_POST
@login_required
def catalog_gate(request: AuthedHtmxRequest, version_id: int) -> HttpResponse:
    """The deployment gate of a version (catalog admins): closed, no tenant's run
    dispatches its effect. Tenants' own gates are ``catalog_tenant_gate``."""
    require_role(request.user, CATALOG_ADMIN)
    row = get_object_or_404(CapabilityVersion, pk=version_id)
    form = {"reason": request.POST.get("reason", "")}
    try:
        row, change = services.capability_gate_change(
            version_id=row.pk,
            user=request.user,
            open_gate=request.POST.get("open") == "1",
            reason=form["reason"],
        )
    except Refusal as exc:
        return _refused(request, row, exc, form, name="gate")
    if not change.changed:
        messages.info(request, change.already(f"The deployment effect gate of {row.ref}"))
        return redirect(_version_url(row))
    state = "open: new dispatch allowed" if row.effect_gate_open else "closed: new dispatch stopped"
    messages.success(request, f"Deployment effect gate of {row.ref} is {state}.")
    return redirect(_version_url(row))


@require_POST
@login_required
def catalog_tenant_gate(request: AuthedHtmxRequest, version_id: int) -> HttpResponse:
    """The operator's own tenant's gate of a version: never another tenant's (a posted
    ``tenant`` other than the operator's is 404, its existence not disclosed)."""
    require_role(request.user, OPERATOR)
    tenant = tenant_of(request.user)
    posted = request.POST.get("tenant", "")
    if not tenant or (posted and posted != tenant):
        raise Http404("No such tenant gate")
    row = get_object_or_404(CapabilityVersion, pk=version_id)
    form = {"reason": request.POST.get("reason", "")}
    try:
        gate, change = services.tenant_gate_change(
            capability_id=row.capability_id,
            version=row.version,
            tenant=tenant,
            open_gate=request.POST.get("open") == "1",
            reviewer=request.user,
            reason=form["reason"],
        )
    except Refusal as exc:
        return _refused(request, row, exc, form, name="tenant_gate")
    except ValueError as exc:
        refusal = Refusal("gate_refused", str(exc))
        return _refused(request, row, refusal, form, name="tenant_gate")
    if not change.changed:
        messages.info(request, change.already(f"The effect gate of {row.ref} for tenant {tenant}"))
        return redirect(_version_url(row))
    state = "open" if gate.open else "closed: this tenant's new effect dispatch is stopped"
    messages.success(request, f"Effect gate of {row.ref} for tenant {tenant} is {state}.")
    return redirect(_version_url(row))
