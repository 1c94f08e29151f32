"""Sign-in with a throttle on failed attempts.

An account that failed ``PER_ACCOUNT`` times within ``WINDOW``, or an address that failed
``PER_ADDRESS`` times, is refused (HTTP 429, with the time left) until the oldest counted
failure leaves the window; the right password does not lift the refusal early. A
successful sign-in clears its account's failures. Failures live in the database, so the
limit holds across web processes.

Failures are counted under the account the name resolves to, never under the name as
posted: authentication strips the name and normalises it (NFKC), so ``catalog-reviewer ``,
`` catalog-reviewer`` and a fullwidth spelling of it are one account with one counter. A
name that resolves to no account is counted under its normalised spelling.

Anyone can lock an account they can name for at most ``WINDOW``; that trade is deliberate
(guessing is worse) and documented in docs/security.md.
"""

from __future__ import annotations

import ipaddress
import logging
import math
import unicodedata
from datetime import timedelta
from typing import Any

from django.conf import settings
from django.contrib import messages
from django.contrib.auth import get_user_model
from django.contrib.auth import views as auth_views
from django.db.models import Q
from django.http import HttpRequest, HttpResponse
from django.utils import timezone

from access.models import SignInFailure

WINDOW = timedelta(minutes=15)
PER_ACCOUNT = 5
PER_ADDRESS = 30

log = logging.getLogger("fieldops.access")


def _address(request: HttpRequest) -> str | None:
    """The client's IP address, or None when the server gave none it could parse (a Unix
    socket, say): such attempts are then limited per account only.

    Behind ``FIELDOPS_TRUSTED_PROXIES`` proxies (production: 1, the TLS-terminating proxy)
    the connection comes from the nearest one, so the client is the address the farthest
    trusted proxy appended to ``X-Forwarded-For`` (entries before it are the client's own
    claims and are never read). Without a trusted proxy the header is ignored."""
    raw = str(request.META.get("REMOTE_ADDR", ""))
    hops = settings.FIELDOPS_TRUSTED_PROXIES
    if hops > 0:
        forwarded = [
            a.strip() for a in str(request.META.get("HTTP_X_FORWARDED_FOR", "")).split(",")
        ]
        forwarded = [a for a in forwarded if a]
        if len(forwarded) >= hops:
            raw = forwarded[-hops]
    try:
        return str(ipaddress.ip_address(raw))
    except ValueError:
        return None


def normalise_username(raw: str) -> str:
    """The name as authentication reads it: stripped, then NFKC (Django's UsernameField)."""
    return unicodedata.normalize("NFKC", str(raw).strip())


def throttle_key(raw: str) -> str:
    """The counter a sign-in attempt with the posted name ``raw`` is counted under.

    Return the username of the account the name resolves to (what authentication would
    sign in), or the normalised name when no account has it; "" when the name is empty.
    """
    name = normalise_username(raw)
    if not name:
        return ""
    user_model = get_user_model()
    username = (
        user_model._default_manager.filter(**{user_model.USERNAME_FIELD: name})
        .values_list(user_model.USERNAME_FIELD, flat=True)
        .first()
    )
    return str(username if username is not None else name)[:150]


def _username(request: HttpRequest) -> str:
    return throttle_key(str(request.POST.get("username", "")))


def seconds_locked(username: str, address: str | None) -> int:
    """How long sign-in stays refused for this account or address (0: not refused)."""
    now = timezone.now()
    checks = [(Q(username=username), PER_ACCOUNT)]
    if address:
        checks.append((Q(address=address), PER_ADDRESS))
    waits = []
    for criterion, limit in checks:
        recent = list(
            SignInFailure.objects.filter(criterion, at__gt=now - WINDOW)
            .order_by("-at")
            .values_list("at", flat=True)[:limit]
        )
        if len(recent) >= limit:
            # Refused until the oldest of the last ``limit`` failures leaves the window.
            waits.append((recent[-1] + WINDOW - now).total_seconds())
    return math.ceil(max(waits)) if waits else 0


def record_failure(username: str, address: str | None) -> None:
    now = timezone.now()
    SignInFailure.objects.create(username=username, address=address, at=now)
    # Rows that no longer count are of no use to the throttle.
    SignInFailure.objects.filter(at__lt=now - 4 * WINDOW).delete()


class ThrottledLoginView(auth_views.LoginView):
    redirect_authenticated_user = True

    def post(self, request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        username, address = _username(request), _address(request)
        wait = seconds_locked(username, address)
        if wait:
            log.warning(
                "sign-in refused: too many failures",
                extra={"username": username, "address": address, "seconds_left": wait},
            )
            minutes = max(1, math.ceil(wait / 60))
            context = self.get_context_data(
                form=self.get_form_class()(request),
                throttled=f"Too many failed sign-in attempts. Try again in {minutes} "
                f"minute{'s' if minutes != 1 else ''}.",
            )
            response = self.render_to_response(context, status=429)
            response["Retry-After"] = str(wait)
            return response
        return super().post(request, *args, **kwargs)

    def form_valid(self, form: Any) -> HttpResponse:
        SignInFailure.objects.filter(username=form.get_user().get_username()).delete()
        return super().form_valid(form)

    def form_invalid(self, form: Any) -> HttpResponse:
        username = _username(self.request)
        if username:
            record_failure(username, _address(self.request))
        return super().form_invalid(form)


SIGNED_OUT_MESSAGE = "You are signed out."


class SignOutView(auth_views.LogoutView):
    """Log out, and the login page it leads to says so (a bare login form after Log out
    leaves the person unsure whether it worked, on a shared screen above all). Only a
    signed-in person's Log out says it: one sent after the session ended is told that by
    the login page instead (``HtmxLoginRedirectMiddleware``)."""

    def post(self, request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        was_signed_in = request.user.is_authenticated
        response = super().post(request, *args, **kwargs)
        if was_signed_in:
            # The message outlives the session the logout ends: the cookie storage keeps it.
            messages.success(request, SIGNED_OUT_MESSAGE)
        return response
