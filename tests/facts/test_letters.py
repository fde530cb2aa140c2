"""The letter classes the fact rules read names and words with (``facts.letters``).

Each class stands for Unicode categories that Python's ``re`` cannot name; over every
code point it matches those categories exactly, and over ASCII exactly what the ASCII
class it replaced matched, so ASCII text reads as before.
"""

from __future__ import annotations

import re
import string
import unicodedata

import pytest

from anamnesis.facts.letters import CAPITAL, LETTER, LOWER, WORD, capitalised

EVERY_CHARACTER = "".join(map(chr, range(0x110000)))
BY_CATEGORY: dict[str, set[str]] = {}
for character in EVERY_CHARACTER:
    BY_CATEGORY.setdefault(unicodedata.category(character), set()).add(character)
MARKS = BY_CATEGORY["Mn"] | BY_CATEGORY["Mc"] | BY_CATEGORY["Me"]


def matched(piece: str, text: str = EVERY_CHARACTER) -> set[str]:
    """The characters of ``text`` that ``piece`` (one character wide) matches."""
    return {m.group() for m in re.finditer(piece, text)}


def of(*categories: str) -> set[str]:
    """The characters of the given categories."""
    return set().union(*(BY_CATEGORY[c] for c in categories))


def test_a_capital_is_an_upper_or_title_case_letter_or_one_without_case() -> None:
    assert matched(CAPITAL) == of("Lu", "Lt", "Lo")


def test_a_lowercase_letter_is_one_with_its_marks() -> None:
    assert matched(LOWER) == of("Ll") | MARKS


def test_a_letter_is_any_letter_or_mark() -> None:
    # ``\w`` also takes numerals that are no digits ("½"): they stay, as in ``[^\W\d_]``.
    numerals = {c for c in of("No", "Nl") if c.isalnum()}
    assert matched(LETTER) == of("Lu", "Lt", "Lo", "Ll", "Lm") | MARKS | numerals


def test_a_word_character_is_one_of_backslash_w_or_a_mark() -> None:
    assert matched(WORD) == matched(r"\w") | MARKS


@pytest.mark.parametrize(
    ("piece", "ascii_class"),
    [(CAPITAL, "[A-Z]"), (LOWER, "[a-z]"), (LETTER, "[a-zA-Z]"), (WORD, r"\w")],
    ids=["capital", "lower", "letter", "word"],
)
def test_on_ascii_each_class_is_the_ascii_one(piece, ascii_class) -> None:
    ascii_text = "".join(map(chr, range(128)))
    assert matched(piece, ascii_text) == matched(ascii_class, ascii_text)


def test_capitalised_reads_the_first_letter_in_any_script() -> None:
    assert [capitalised(w) for w in ("Zürich", "Łódź", "Škoda", "東京", "İzmir")] == [True] * 5
    assert [capitalised(w) for w in ("night", "école", "ıslak", "½ mile", "", "'Tis")] == [
        False
    ] * 6
    assert all(capitalised(c) for c in string.ascii_uppercase)
