"""A small confusable skeleton for user names: which ASCII name a name reads as.

Two names with the same ``skeleton`` look alike on a screen (Latin "poppy" and the same
word in the Cyrillic letters er, o, er, er, u), so the audit trail's ``user:<name>``
could not tell the two people apart.

Source: Unicode's confusables.txt (UTS #39, https://www.unicode.org/Public/security/latest/
confusables.txt, the ``MA`` table). Only its entries for Cyrillic and Greek letters whose
prototype is one ASCII letter or digit are copied here, plus the fullwidth forms of ASCII
letters and digits (U+FF10-FF19, U+FF21-FF3A, U+FF41-FF5A, whose prototypes are the ASCII
characters). Where confusables.txt maps a capital I-like letter (Greek IOTA, Cyrillic I)
to "l", this map says "I": the skeleton is compared case-insensitively (lower-cased after
mapping), as the set_user check for names differing only in case already was.

What it does not cover (docs/security.md says the same): look-alikes inside ASCII
("rn"/"m", "l"/"I"/"1", "O"/"0"), accented Latin letters ("é" and "e" differ), letters of
other scripts (Armenian, Cherokee, ...), letters whose prototype is not ASCII (Cyrillic
small te, ve, en: small capitals), several-letter prototypes (Cyrillic YERU → "bl"),
and names that look alike only in some fonts. Mathematical alphanumerics and other
compatibility forms are refused before this by the NFKC check.
"""

from __future__ import annotations

# confusables.txt MA entries, Cyrillic and Greek letter → one ASCII letter or digit.
_CYRILLIC = {
    "\u0405": "S",  # CYRILLIC CAPITAL LETTER DZE
    "\u0406": "I",  # CYRILLIC CAPITAL LETTER BYELORUSSIAN-UKRAINIAN I (confusables: "l")
    "\u0408": "J",  # CYRILLIC CAPITAL LETTER JE
    "\u0410": "A",  # CYRILLIC CAPITAL LETTER A
    "\u0412": "B",  # CYRILLIC CAPITAL LETTER VE
    "\u0415": "E",  # CYRILLIC CAPITAL LETTER IE
    "\u0417": "3",  # CYRILLIC CAPITAL LETTER ZE
    "\u041a": "K",  # CYRILLIC CAPITAL LETTER KA
    "\u041c": "M",  # CYRILLIC CAPITAL LETTER EM
    "\u041d": "H",  # CYRILLIC CAPITAL LETTER EN
    "\u041e": "O",  # CYRILLIC CAPITAL LETTER O
    "\u0420": "P",  # CYRILLIC CAPITAL LETTER ER
    "\u0421": "C",  # CYRILLIC CAPITAL LETTER ES
    "\u0422": "T",  # CYRILLIC CAPITAL LETTER TE
    "\u0423": "Y",  # CYRILLIC CAPITAL LETTER U
    "\u0425": "X",  # CYRILLIC CAPITAL LETTER HA
    "\u042c": "b",  # CYRILLIC CAPITAL LETTER SOFT SIGN
    "\u0430": "a",  # CYRILLIC SMALL LETTER A
    "\u0431": "6",  # CYRILLIC SMALL LETTER BE
    "\u0433": "r",  # CYRILLIC SMALL LETTER GHE
    "\u0435": "e",  # CYRILLIC SMALL LETTER IE
    "\u043e": "o",  # CYRILLIC SMALL LETTER O
    "\u0440": "p",  # CYRILLIC SMALL LETTER ER
    "\u0441": "c",  # CYRILLIC SMALL LETTER ES
    "\u0443": "y",  # CYRILLIC SMALL LETTER U
    "\u0445": "x",  # CYRILLIC SMALL LETTER HA
    "\u0455": "s",  # CYRILLIC SMALL LETTER DZE
    "\u0456": "i",  # CYRILLIC SMALL LETTER BYELORUSSIAN-UKRAINIAN I
    "\u0458": "j",  # CYRILLIC SMALL LETTER JE
    "\u0461": "w",  # CYRILLIC SMALL LETTER OMEGA
    "\u0474": "V",  # CYRILLIC CAPITAL LETTER IZHITSA
    "\u0475": "v",  # CYRILLIC SMALL LETTER IZHITSA
    "\u04ae": "Y",  # CYRILLIC CAPITAL LETTER STRAIGHT U
    "\u04af": "y",  # CYRILLIC SMALL LETTER STRAIGHT U
    "\u04bb": "h",  # CYRILLIC SMALL LETTER SHHA
    "\u04bd": "e",  # CYRILLIC SMALL LETTER ABKHASIAN CHE
    "\u04c0": "I",  # CYRILLIC LETTER PALOCHKA (confusables: "l")
    "\u04cf": "i",  # CYRILLIC SMALL LETTER PALOCHKA
    "\u04e0": "3",  # CYRILLIC CAPITAL LETTER ABKHASIAN DZE
    "\u0501": "d",  # CYRILLIC SMALL LETTER KOMI DE
    "\u050c": "G",  # CYRILLIC CAPITAL LETTER KOMI SJE
    "\u051b": "q",  # CYRILLIC SMALL LETTER QA
    "\u051c": "W",  # CYRILLIC CAPITAL LETTER WE
    "\u051d": "w",  # CYRILLIC SMALL LETTER WE
}
_GREEK = {
    "\u037f": "J",  # GREEK CAPITAL LETTER YOT
    "\u0391": "A",  # GREEK CAPITAL LETTER ALPHA
    "\u0392": "B",  # GREEK CAPITAL LETTER BETA
    "\u0395": "E",  # GREEK CAPITAL LETTER EPSILON
    "\u0396": "Z",  # GREEK CAPITAL LETTER ZETA
    "\u0397": "H",  # GREEK CAPITAL LETTER ETA
    "\u0399": "I",  # GREEK CAPITAL LETTER IOTA (confusables: "l")
    "\u039a": "K",  # GREEK CAPITAL LETTER KAPPA
    "\u039c": "M",  # GREEK CAPITAL LETTER MU
    "\u039d": "N",  # GREEK CAPITAL LETTER NU
    "\u039f": "O",  # GREEK CAPITAL LETTER OMICRON
    "\u03a1": "P",  # GREEK CAPITAL LETTER RHO
    "\u03a4": "T",  # GREEK CAPITAL LETTER TAU
    "\u03a5": "Y",  # GREEK CAPITAL LETTER UPSILON
    "\u03a7": "X",  # GREEK CAPITAL LETTER CHI
    "\u03b1": "a",  # GREEK SMALL LETTER ALPHA
    "\u03b3": "y",  # GREEK SMALL LETTER GAMMA
    "\u03b9": "i",  # GREEK SMALL LETTER IOTA
    "\u03bd": "v",  # GREEK SMALL LETTER NU
    "\u03bf": "o",  # GREEK SMALL LETTER OMICRON
    "\u03c1": "p",  # GREEK SMALL LETTER RHO
    "\u03c3": "o",  # GREEK SMALL LETTER SIGMA
    "\u03c5": "u",  # GREEK SMALL LETTER UPSILON
    "\u03dc": "F",  # GREEK LETTER DIGAMMA
    "\u03f2": "c",  # GREEK LUNATE SIGMA SYMBOL
    "\u03f3": "j",  # GREEK LETTER YOT
    "\u03f9": "C",  # GREEK CAPITAL LUNATE SIGMA SYMBOL
    "\u03fa": "M",  # GREEK CAPITAL LETTER SAN
}
# Fullwidth ASCII digits and letters (U+FF10-FF19, U+FF21-FF3A, U+FF41-FF5A).
_FULLWIDTH = {
    chr(0xFF10 + i): c
    for i, c in enumerate("0123456789:;<=>?@ABCDEFGHIJKLMNOPQRSTUVWXYZ")
    if c.isalnum()
} | {chr(0xFF41 + i): c for i, c in enumerate("abcdefghijklmnopqrstuvwxyz")}

_TABLE = str.maketrans(_CYRILLIC | _GREEK | _FULLWIDTH)


def skeleton(name: str) -> str:
    """The ASCII spelling ``name`` reads as, lower-cased: equal skeletons look alike."""
    return name.translate(_TABLE).lower()
