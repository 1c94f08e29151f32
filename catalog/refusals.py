"""How the console answers a refused catalog step: which refusal codes are a 400 (an
incomplete request) rather than a 409 (the version's state), and the form field each code
is about. The catalog's pages and the runbooks that carry catalog forms (gates, drift
reviews) share them."""

from __future__ import annotations

from collections.abc import Mapping

BAD_REQUEST_CODES = frozenset(
    {
        "reason_required",
        "reason_too_long",
        "reason_bidi_control",
        "admission_incomplete",
        "answer_too_long",
        "answer_bidi_control",
        "unknown_action",
        "acknowledgement_required",
        "gate_refused",
    }
)
# The field each form's refusal codes are about (the input's name): the page shows the
# refusal beside it, marks it aria-invalid and puts the focus there. A code not listed is
# about no single field (permission, the version's state) and is shown at the top. Where
# one code covers several answers, the refusal names its own field (``Refusal.field``).
REFUSAL_FIELDS: Mapping[str, Mapping[str, str]] = {
    "server": {
        "bad_name": "name",
        "name_taken": "name",
        "bad_transport": "transport",
        "command_required": "command",
        "command_not_allowed": "command",
        "bad_arguments": "args",
        "bad_url": "url",
        "credential_in_url": "url",
        "credential_ref_invalid": "credential_ref",
        "credential_ref_stdio": "credential_ref",
        "env_invalid": "env",
        "env_name_forbidden": "env",
        "env_ref_invalid": "env",
        "env_http": "env",
    },
    "admit": {
        "reason_required": "reason",
        "reason_too_long": "reason",
        "reason_bidi_control": "reason",
        "no_local_contract": "local_ref",
        "trusted_control": "local_ref",
    },
    # reject, defer, deprecate
    "lifecycle": {
        "reason_required": "reason",
        "reason_too_long": "reason",
        "reason_bidi_control": "reason",
    },
    "retire": {
        "reason_required": "reason",
        "reason_too_long": "reason",
        "reason_bidi_control": "reason",
        "acknowledgement_required": "acknowledge",
    },
    "withdraw": {
        "reason_required": "reason",
        "reason_too_long": "reason",
        "reason_bidi_control": "reason",
    },
    # the deployment gate and a tenant's gate of a version
    "gate": {
        "reason_required": "reason",
        "reason_too_long": "reason",
        "reason_bidi_control": "reason",
    },
    "drift": {
        "reason_required": "reason",
        "reason_too_long": "reason",
        "reason_bidi_control": "reason",
    },
}
