"""Numbers on a management command's line, read the way a person means them.

Python's ``int`` and ``float`` (argparse's ``type=int``) read far more than digits: Arabic-
Indic and fullwidth digits (U+0663, U+FF13), a sign (``+5``), underscores (``1_0``),
exponents (``1e3``), ``nan`` and ``inf``, and refuse a long number with a ``ValueError``
traceback instead of a message. A command takes the digits 0-9 only (and one decimal point
where it reads a decimal), within a length any of its limits fits in; its own range check
then says what the value may be.
"""

from __future__ import annotations

import argparse
import re

DIGITS_MAX = 18  # every limit of a command fits; a 64-bit integer holds any such number
_WHOLE = re.compile(rf"[0-9]{{1,{DIGITS_MAX}}}")
_DECIMAL = re.compile(r"[0-9]{1,12}(?:\.[0-9]{1,12})?|\.[0-9]{1,12}")


def _shown(text: str) -> str:
    return repr(text if len(text) <= 40 else text[:40] + "...")


def whole_number_or_none(text: str) -> int | None:
    """``text`` as a whole number written in the digits 0-9 (None when it is not one)."""
    return int(text) if _WHOLE.fullmatch(text) else None


def whole_number(text: str) -> int:
    """argparse type: a whole number in the digits 0-9."""
    value = whole_number_or_none(text)
    if value is None:
        raise argparse.ArgumentTypeError(
            f"{_shown(text)} is not a whole number (at most {DIGITS_MAX} of the digits 0-9)"
        )
    return value


def decimal_number(text: str) -> float:
    """argparse type: a decimal number in the digits 0-9 with at most one decimal point."""
    if not _DECIMAL.fullmatch(text):
        raise argparse.ArgumentTypeError(
            f"{_shown(text)} is not a decimal number (the digits 0-9 and one '.')"
        )
    return float(text)
