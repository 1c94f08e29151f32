"""The base of every FieldOps management command: argparse's own refusals stay short.

argparse quotes the value it refuses whole (``invalid choice: 'xxxx…'`` with the
100,000 characters a caller passed, then the choices; ``unrecognized arguments: …``), so
one hostile or mistaken argument made a refusal of 100 kB on the terminal, in a CI log or
a cron mail. Every command here subclasses ``FieldOpsCommand``; its parser cuts each
quoted value (and each unquoted word, as ``unrecognized arguments`` lists them) of such a
refusal to ``SHOWN`` characters and an ellipsis, and keeps the rest of the message and
the usage line as argparse wrote them. The commands' own refusals name values shortly
already (``kernel.text.quoted_shortly``, ``fieldops.arguments``).
"""

from __future__ import annotations

import re
from typing import Any, NoReturn

from django.core.management.base import BaseCommand, CommandParser

SHOWN = 80  # characters of a quoted value a refusal shows
ELLIPSIS = "…"

# A Python string literal as repr() writes one (argparse's %r), else a word. A quote
# right after a letter or digit is an apostrophe ("don't"), not the start of a value.
_PIECE = re.compile(r"""(?<!\w)(?:'(?:[^'\\]|\\.)*'|"(?:[^"\\]|\\.)*")|\S+""", re.DOTALL)


def _cut(match: re.Match[str]) -> str:
    piece = match.group(0)
    if len(piece) <= SHOWN + 2:
        return piece
    if piece[0] in "'\"" and piece[-1] == piece[0] and len(piece) > 1:
        return piece[0] + piece[1 : SHOWN + 1] + ELLIPSIS + piece[0]
    return piece[:SHOWN] + ELLIPSIS


def shortened(message: str) -> str:
    """``message`` with each quoted value or word over SHOWN characters cut to SHOWN and
    an ellipsis (a quoted one keeps its closing quote); everything else unchanged."""
    return _PIECE.sub(_cut, message)


class ShortRefusalParser(CommandParser):
    """Django's command parser whose argparse errors quote values shortly."""

    def error(self, message: str) -> NoReturn:
        super().error(shortened(message))
        raise AssertionError("unreachable: CommandParser.error raises or exits")


class FieldOpsCommand(BaseCommand):
    """A management command whose argument errors name values shortly (see the module)."""

    def create_parser(self, prog_name: str, subcommand: str, **kwargs: Any) -> CommandParser:
        parser = super().create_parser(prog_name, subcommand, **kwargs)
        # Django builds a CommandParser itself and offers no hook for its class; the
        # subclass adds no state, only ``error``, so the parser built becomes one.
        parser.__class__ = ShortRefusalParser
        return parser
