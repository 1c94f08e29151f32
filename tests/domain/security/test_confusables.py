"""access/confusables.py: the skeleton map copied from Unicode's confusables.txt."""

from __future__ import annotations

import unicodedata

from access.confusables import _TABLE, skeleton


def test_every_mapped_letter_is_cyrillic_greek_or_fullwidth_and_reads_as_one_ascii_character():
    for code, target in _TABLE.items():
        name = unicodedata.name(chr(code))
        assert name.split()[0] in ("CYRILLIC", "GREEK", "FULLWIDTH"), name
        assert isinstance(target, str) and len(target) == 1, name
        assert target.isascii() and target.isalnum(), name


def test_it_maps_fullwidth_letters_and_digits_to_their_ascii_ones():
    fullwidth = "".join(chr(0xFF10 + i) for i in range(10))
    fullwidth += "".join(chr(0xFF21 + i) for i in range(26))
    fullwidth += "".join(chr(0xFF41 + i) for i in range(26))
    assert skeleton(fullwidth) == ("0123456789" + "abcdefghijklmnopqrstuvwxyz" * 2)


def test_names_that_look_alike_share_a_skeleton_and_others_do_not():
    assert skeleton("\u0440\u043e\u0440\u0440\u0443") == skeleton("poppy") == "poppy"  # Cyrillic
    assert skeleton("\u039a\u0395\u039c\u03a1") == skeleton("kemp")  # Greek capitals
    assert skeleton("\u0412\u041e\u0412\u0417") == skeleton("Bob3")  # ZE reads as 3
    # Letters confusables.txt maps to no ASCII letter keep the names apart.
    assert skeleton("\u0434\u0430\u043d\u0430") != skeleton("aaha")
    assert skeleton("j\u00fcrgen") != skeleton("jurgen")  # accents are not folded
