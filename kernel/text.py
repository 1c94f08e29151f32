"""Free text a person writes for others to read (a reason, an answer, a view's name).

Bidirectional control characters (embeddings, overrides and isolates) reorder the text
shown after them: in an audit trail they can make a reason read as
something else ("Trojan Source", CVE-2021-42574). They are refused, never stripped, so
what is recorded is what was written. The plain marks U+200E and U+200F only set the
direction of neutral characters next to them and are allowed.
"""

from __future__ import annotations

import unicodedata

# The explicit embedding, override and isolate controls of the Unicode bidirectional
# algorithm (UAX #9): U+202A..U+202E and U+2066..U+2069.
BIDI_CONTROLS = frozenset(chr(c) for c in (*range(0x202A, 0x202F), *range(0x2066, 0x206A)))


def bidi_control_refusal(text: str, *, what: str = "a reason") -> str | None:
    """Return why ``text`` is refused ("U+202E RIGHT-TO-LEFT OVERRIDE is not allowed in
    a reason"), naming its first bidirectional control character, or None without one."""
    for char in text:
        if char in BIDI_CONTROLS:
            name = unicodedata.name(char, "BIDIRECTIONAL CONTROL")
            return f"U+{ord(char):04X} {name} is not allowed in {what}"
    return None


FIELD_NAME_SHOWN_CHARS = 60


def field_name_shown(name: str) -> str:
    """A form field's or query parameter's name as a refusal quotes it (whatever was sent):
    quoted with ``repr``, so control, invisible and bidirectional characters show escaped,
    cut to a readable length; an empty name is said to be empty."""
    if name == "":
        return "with an empty name"
    shown = repr(name[:FIELD_NAME_SHOWN_CHARS])
    return shown + ("…" if len(name) > FIELD_NAME_SHOWN_CHARS else "")
