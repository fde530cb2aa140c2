"""Names and proper nouns in any script read as ASCII ones do.

"My brother Kıvanç", "I quit Škoda", "I'm moving to Österreich" state the same facts
as "My brother Kevin", "I quit Tesla", "I'm moving to Austria": a rule that reads a
name or a proper noun by its capital reads a capital in any script (and a letter of a
script without case, as a name in 美咲 or प्रिया has none), and a word goes on through
every letter of it, the marks on letters included ("Zoe" and U+0308 is a decomposed
"Zoë"). On ASCII text the rules read what they read before.
"""

from __future__ import annotations

import pytest

from anamnesis.facts.predicates import normalise_value

from .test_phrasing import read

# (sentence, the facts it states), one family of rules each; every sentence holds a
# letter beyond ASCII where the rule reads a name, a proper noun or a word.
BEYOND_ASCII: list[tuple[str, set[tuple[str, str, str]]]] = [
    # relations: the name after the relation, mid-sentence and at the end
    ("My brother Kıvanç lives in Zürich.", {("add", "brother", "Kıvanç")}),
    ("My wife Zoë is a nurse.", {("add", "partner", "Zoë")}),
    ("My friend Ángel visits often.", {("add", "friend", "Ángel")}),
    ("I miss my brother İlker!", {("add", "brother", "İlker")}),
    ("This is my sister, Łucja.", {("add", "sister", "Łucja")}),
    ("My friend José Álvarez, who lives nearby, came over.", {("add", "friend", "José Álvarez")}),
    ("My brother is called Kıvanç.", {("add", "brother", "Kıvanç")}),
    ("My sister Ελένη is visiting.", {("add", "sister", "Ελένη")}),
    ("My husband Дмитрий cooks.", {("add", "partner", "Дмитрий")}),
    ("My wife 美咲 loves tea.", {("add", "partner", "美咲")}),
    ("My wife प्रिया is a doctor.", {("add", "partner", "प्रिया")}),
    # identity
    ("My name is Zoë.", {("add", "name", "Zoë")}),
    ("Call me Ólafur", {("add", "name", "Ólafur")}),
    # partners, and their ends
    ("I'm married to Søren.", {("add", "partner", "Søren")}),
    ("I started dating Zoë last spring.", {("add", "partner", "Zoë")}),
    ("I broke up with Émile.", {("end", "partner", "Émile")}),
    ("Émile and I broke up.", {("end", "partner", "Émile")}),
    ("I'm not with Ærlig anymore.", {("end", "partner", "Ærlig")}),
    # pets, and their ends
    ("I have a dog named Ōkami.", {("add", "pet", "dog named Ōkami")}),
    ("My cat Émile sleeps all day.", {("add", "pet", "cat named Émile")}),
    ("Our dog Émile died.", {("end", "pet", "dog named Émile")}),
    # moves and homes
    ("I'm moving to Österreich next month.", {("add", "plans", "move to Österreich")}),
    ("I live in 東京.", {("add", "lives_in", "東京")}),
    (
        "I left Łódź and settled in Kraków.",
        {("add", "lives_in", "Kraków"), ("end", "lives_in", "Łódź")},
    ),
    # jobs and employers, and their ends
    (
        "I quit Škoda and now work for Tata.",
        {("add", "works_at", "Tata"), ("end", "works_at", "Škoda")},
    ),
    (
        "After leaving Électricité de France, I joined a startup.",
        {("add", "started", "a startup"), ("end", "works_at", "Électricité de France")},
    ),
    ("I work at 任天堂.", {("add", "works_at", "任天堂")}),
    ("I'm a café manager.", {("add", "job", "café manager")}),
    ("I used to be a café manager.", {("end", "job", "café manager")}),
    # routines and preferences: a word goes on through its last letter
    (
        "I usually grab breakfast at the lobby café.",
        {("add", "habit", "grab breakfast at the lobby café")},
    ),
    ("I go to the café every morning.", {("add", "habit", "go to the café")}),
    ("My favourite café is Café Olé.", {("add", "favorite café", "Café Olé")}),
]


@pytest.mark.parametrize(("text", "expected"), BEYOND_ASCII, ids=[t for t, _ in BEYOND_ASCII])
def test_a_name_or_a_proper_noun_beyond_ascii_states_its_fact(text, expected) -> None:
    assert read(text) == expected


# The same statements in ASCII: what the rules read before, unchanged.
ASCII: list[tuple[str, set[tuple[str, str, str]]]] = [
    ("My brother Kevin lives in Zurich.", {("add", "brother", "Kevin")}),
    ("I miss my brother Ilker!", {("add", "brother", "Ilker")}),
    ("This is my sister, Lucja.", {("add", "sister", "Lucja")}),
    ("My friend Jose Alvarez, who lives nearby, came over.", {("add", "friend", "Jose Alvarez")}),
    ("My name is Zoe.", {("add", "name", "Zoe")}),
    ("Emile and I broke up.", {("end", "partner", "Emile")}),
    ("Our dog Emile died.", {("end", "pet", "dog named Emile")}),
    ("I'm moving to Austria next month.", {("add", "plans", "move to Austria")}),
    (
        "I quit Skoda and now work for Tata.",
        {("add", "works_at", "Tata"), ("end", "works_at", "Skoda")},
    ),
    ("I'm a cafe manager.", {("add", "job", "cafe manager")}),
    ("I go to the cafe every morning.", {("add", "habit", "go to the cafe")}),
    ("My favourite cafe is Cafe Ole.", {("add", "favorite cafe", "Cafe Ole")}),
]


@pytest.mark.parametrize(("text", "expected"), ASCII, ids=[t for t, _ in ASCII])
def test_the_same_statements_in_ascii_read_as_before(text, expected) -> None:
    assert read(text) == expected


def test_a_lowercase_word_is_no_name_in_any_script() -> None:
    # A capital is what makes a word after "my sister" a name, beyond ASCII too.
    assert read("My sister élodie visits often.") == set()
    assert read("My sister visits often.") == set()
    assert read("I left école early and moved home.") == set()


def test_a_name_written_decomposed_keeps_its_marks() -> None:
    # "Zoe" and U+0308 (combining diaeresis) is "Zoë" written decomposed: the name is
    # read whole, not cut before its mark, and compares equal to the composed form.
    assert read("My wife Zoe\u0308 is a nurse.") == {("add", "partner", "Zoe\u0308")}
    assert read("My name is Zoe\u0308.") == {("add", "name", "Zoe\u0308")}
    assert normalise_value("Zoe\u0308") == normalise_value("Zoë") == "zoë"


def test_the_marks_of_a_script_are_part_of_a_value() -> None:
    # Devanagari writes vowels as marks on consonants: without them two names compare
    # equal ("प्रिया" and "पारया" share the consonants प, र, य).
    assert normalise_value("प्रिया") == "प्रिया"
    assert normalise_value("प्रिया") != normalise_value("पारया")


def test_letters_read_as_ascii_ones_still_spell_the_relation() -> None:
    # A case-insensitive ASCII pattern reads "ſiſter" (long s) as "sister"; the name
    # after it may hold letters beyond ASCII, dotless i included.
    assert read("My \u017fi\u017fter Emma visits often.") == {("add", "sister", "Emma")}
    assert read("My \u017fi\u017fter Kıvılcım visits often.") == {("add", "sister", "Kıvılcım")}
