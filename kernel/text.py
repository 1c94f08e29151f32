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


# Letters that render as nothing (Hangul fillers, the blank Braille pattern): a text of
# them looks empty although no category says so.
BLANK_LETTERS = frozenset("\u115f\u1160\u3164\uffa0\u2800")
# White space, format characters (U+200B ZERO WIDTH SPACE, U+2060 WORD JOINER, U+FEFF,
# the soft hyphen), controls and marks with nothing to sit on.
_SHOWS_NOTHING = frozenset({"Zs", "Zl", "Zp", "Cc", "Cf", "Mn", "Me"})


def shows_nothing(text: str) -> bool:
    """Whether ``text`` shows a reader nothing: empty, or only white space, invisible
    characters and blank letters. A required reason or answer made of them ("\u200b") is
    as empty as "" to whoever reads the record, so it is refused as missing."""
    return all(
        char.isspace() or char in BLANK_LETTERS or unicodedata.category(char) in _SHOWS_NOTHING
        for char in text
    )


def nothing_shown_note(text: str) -> str:
    """What a refusal of a missing reason adds when something was sent that shows nothing
    ("; it holds only characters that show nothing, such as U+200B ZERO WIDTH SPACE"), or
    "" when nothing (or only white space) was sent."""
    hidden = next((c for c in text if not c.isspace()), None)
    if hidden is None:
        return ""
    name = unicodedata.name(hidden, "INVISIBLE CHARACTER")
    return f"; it holds only characters that show nothing, such as U+{ord(hidden):04X} {name}"


FIELD_NAME_SHOWN_CHARS = 60


def field_name_shown(name: str) -> str:
    """A form field's or query parameter's name as a refusal quotes it (whatever was sent):
    quoted with ``repr``, so control, invisible and bidirectional characters show escaped,
    cut to a readable length; an empty name is said to be empty."""
    if name == "":
        return "with an empty name"
    shown = repr(name[:FIELD_NAME_SHOWN_CHARS])
    return shown + ("…" if len(name) > FIELD_NAME_SHOWN_CHARS else "")


def quoted_shortly(value: object, shown: int = 40) -> str:
    """``value`` quoted for a refusal; a long one by its start and length (the client
    sent it, it needs no echo of all of it)."""
    if not isinstance(value, str) or len(value) <= shown:
        return repr(value)
    return f"{value[:shown]!r}... ({len(value)} characters)"
