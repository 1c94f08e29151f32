"""Tell the user when a committed action's kick could not reach the work queue.

A start, approval or cancellation commits its transition and an outbox row first; handing
the run to a worker comes after, and may fail while the broker is down. That is not an
error (the sweeper re-drives the outbox), so the action answers as usual and the page says
that the run waits for the queue. The note is added once the view answered (after its own
message), so it shows on the page the action redirects to, as every action of the console
does; a page rendered by the same request shows it on the next page instead.
"""

from __future__ import annotations

from collections.abc import Callable

from django.contrib import messages
from django.http import HttpRequest, HttpResponse

from runs.engine import executor

UNDELIVERED_NOTE = (
    "Saved. The work queue is unreachable right now; the sweeper will hand this run to a "
    "worker when it is back."
)


class UndeliveredKickNoteMiddleware:
    """Place after MessageMiddleware and AuthenticationMiddleware."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        undelivered: list[str] = []
        with executor.undelivered_listener(undelivered.append):
            response = self.get_response(request)
        user = getattr(request, "user", None)
        # A machine caller (the signed callback) gets no note; a failed request has none.
        answered = response.status_code < 500
        if undelivered and answered and user is not None and user.is_authenticated:
            messages.warning(request, UNDELIVERED_NOTE, fail_silently=True)
        return response
