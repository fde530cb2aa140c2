"""How the rule extractor reads English phrasings that hold in any conversation.

One test per reading rule, each on sentences written for it (no sentence here is from
a labelled set): where an object ends, what a routine, a plan, a taste or a possession
is said like. ``anamnesis bench facts`` measures the rules on the labelled sets.
"""

from __future__ import annotations

from datetime import date

from test_facts_rules import episode

from anamnesis.facts.rules import RuleExtractor


def read(text: str) -> set[tuple[str, str, str]]:
    """The ``(op, predicate, object)`` of every draft the user's ``text`` gives."""
    drafts = RuleExtractor().extract(episode(text, None, date(2024, 6, 1)))
    return {("end" if d.action == "END" else "add", d.predicate, d.object) for d in drafts}


def test_adverbs_before_the_verb_may_stack() -> None:
    assert read("I actually already bought a road bike.") == {("add", "owns", "a road bike")}
    assert read("I just recently joined a choir.") == {("add", "started", "a choir")}


def test_a_quantity_is_not_part_of_a_possession() -> None:
    assert read("I bought some new hiking boots.") == {("add", "owns", "new hiking boots")}
    assert read("We bought a few old maps at the fair.") == {("add", "owns", "old maps")}
    assert read("I bought a pair of gloves.") == {("add", "owns", "a pair of gloves")}


def test_how_much_is_not_what() -> None:
    assert read("I used to swim a lot in college.") == {("end", "habit", "swim")}
    assert read("I love jazz so much.") == {("add", "likes", "jazz")}
    assert read("I'll see which one I like the most.") == set()


def test_a_time_phrase_is_no_object() -> None:
    assert read("These are the candles I bought the day before yesterday.") == set()
    assert read("I bought a lamp the other day.") == {("add", "owns", "a lamp")}
