"""Letters in any script, as pieces of regular expressions.

Python's ``re`` matches a letter of any script with ``[^\\W\\d_]`` but has no class for
a letter's case, and ``\\w`` leaves out the marks that combine with a letter ("e" and
U+0301 is a decomposed "é"; the vowel signs of Devanagari). The fact rules read names
and proper nouns by their capital, so the classes here are built once, when the module
is imported, from the Unicode database: ``CAPITAL`` where an ASCII pattern says
``[A-Z]``, ``LOWER`` for ``[a-z]``, ``LETTER`` (``letter_or``) for ``[a-zA-Z]``,
``WORD`` for ``\\w``. On ASCII text each matches what the ASCII class matches, so
ASCII text reads as before.
``CAPITAL`` and ``LOWER`` do not belong in a case-insensitive group: ignoring case,
each would match every cased letter.
"""

from __future__ import annotations

import re
import unicodedata
from itertools import repeat

# Each code point's kind: l a lowercase letter, m a modifier letter, n a numeral that
# is no digit ("½", "²": ``\w`` takes them), k a combining mark, x anything else. Every
# cased letter, numeral and mark lies in the first two planes, but for the variation
# selectors of plane 14. The classes are written with the characters themselves:
# ``re`` parses them several times faster than escapes.
_KIND = {"Ll": "l", "Lm": "m", "Nl": "n", "No": "n", "Mn": "k", "Mc": "k", "Me": "k"}
_CHARS = "".join(map(chr, (*range(0x20000), *range(0xE0100, 0xE01F0))))
_KINDS = "".join(map(_KIND.get, map(unicodedata.category, _CHARS), repeat("x")))


def _ranges(kinds: str) -> str:
    """The characters of the given kinds (``_KIND``), for a class body: a run of three
    or more as a range."""
    spans = (m.span() for m in re.finditer(f"[{kinds}]+", _KINDS))
    return "".join(_CHARS[a:b] if b - a < 3 else f"{_CHARS[a]}-{_CHARS[b - 1]}" for a, b in spans)


#: The marks that combine with the letter before them, as a class body.
MARKS = _ranges("k")
#: A capital, or a letter of a script without case (Chinese, Arabic, Devanagari ...):
#: what a name or a proper noun starts with. A letter (``[^\W\d_]``) that is no
#: lowercase or modifier letter and no numeral. The first lookahead (A-Z, or beyond
#: U+00A9) lets ``re`` scan ahead for where a match may start; a long class stops it.
CAPITAL = rf"(?:(?=[^\x00-\x40\x5b-\xa9])(?![{_ranges('lmn')}])[^\W\d_])"
#: A lowercase letter, or a mark on one: what a verb or a common word starts with.
LOWER = f"[{_ranges('lk')}]"


def letter_or(extra: str = "") -> str:
    """A letter, a mark on one, or one of the characters of ``extra`` (a class body;
    ``"'’-"`` for the apostrophes and hyphens of a name)."""
    return rf"(?:(?![\d_])[\w{MARKS}{extra}])"


#: A letter, or a mark on one.
LETTER = letter_or()
#: A word character: ``\w`` and the marks.
WORD = rf"[\w{MARKS}]"
_CAPITAL = re.compile(CAPITAL)


def capitalised(text: str) -> bool:
    """Whether ``text`` starts with a capital or a letter of a script without case
    ("Zürich", "Łódź", "東京"; not "night")."""
    return _CAPITAL.match(text) is not None
