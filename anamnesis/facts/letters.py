"""Letters in any script, as pieces of regular expressions.

Python's ``re`` matches a letter of any script with ``[^\\W\\d_]`` but has no class for
a letter's case, and ``\\w`` leaves out the marks that combine with a letter ("e" and
U+0301 is a decomposed "é"; the vowel signs of Devanagari). The fact rules read names
and proper nouns by their capital, so the classes here are built once, when the module
is imported, from the Unicode database: ``CAPITAL`` where an ASCII pattern says
``[A-Z]``, ``LOWER`` for ``[a-z]``, ``LETTER`` for ``[a-zA-Z]``, ``WORD`` for ``\\w``. On
ASCII text each matches what the ASCII class matches, so ASCII text reads as before.
``CAPITAL`` and ``LOWER`` do not belong in a case-insensitive group: ignoring case,
each would match every cased letter.
"""

from __future__ import annotations

import re
import unicodedata
from itertools import repeat

# Each code point's kind: C a capital or a letter without case, l a lowercase letter,
# m a modifier letter, k a combining mark, x anything else. Every cased letter and
# combining mark lies in the first two planes; planes 2 and 3 hold ideographs, letters
# without case, added as one range.
_KIND = {"Lu": "C", "Lt": "C", "Lo": "C", "Ll": "l", "Lm": "m", "Mn": "k", "Mc": "k", "Me": "k"}
_KINDS = "".join(map(_KIND.get, map(unicodedata.category, map(chr, range(0x20000))), repeat("x")))
_IDEOGRAPHS = r"\U00020000-\U0003ffff"


def _ranges(kinds: str) -> str:
    """The code points of the given kinds (``_KIND``) as ranges, for a class body."""
    runs = re.finditer(f"[{kinds}]+", _KINDS)
    return "".join(rf"\U{m.start():08x}-\U{m.end() - 1:08x}" for m in runs)


#: The marks that combine with the letter before them, as a class body.
MARKS = _ranges("k")
#: Capitals and the letters of scripts without case (Chinese, Arabic, Devanagari ...),
#: as a class body: what a name or a proper noun starts with.
CAPITALS = _ranges("C") + _IDEOGRAPHS
#: Every letter and mark, as a class body.
LETTERS = _ranges("Clmk") + _IDEOGRAPHS
#: A capital, or a letter of a script without case. The lookahead, a class of two
#: ranges, lets ``re`` scan ahead for where a match may start, which a long class
#: stops it doing (a pattern that opens with a name would try every character).
CAPITAL = rf"(?=[A-Z\xaa-\U0003ffff])[{CAPITALS}]"
#: A lowercase letter, or a mark on one: what a verb or a common word starts with.
LOWER = f"[{_ranges('lk')}]"
#: A letter, or a mark on one.
LETTER = f"[{LETTERS}]"
#: A word character: ``\\w`` and the marks.
WORD = rf"[\w{MARKS}]"
#: Where a word ends: after a letter or a mark, before no word character (``\\b`` would
#: also end a word before a combining mark).
WORD_END = rf"(?<=[{LETTERS}])(?![\w{MARKS}])"

_CAPITAL = re.compile(CAPITAL)


def capitalised(text: str) -> bool:
    """Whether ``text`` starts with a capital or a letter of a script without case
    ("Zürich", "Łódź", "東京"; not "night")."""
    return _CAPITAL.match(text) is not None
