"""How the rule extractor reads English phrasings that hold in any conversation.

One test per reading rule, each on sentences written for it (no sentence here is from
a labelled set): where an object ends, what a routine, a plan, a taste or a possession
is said like. ``anamnesis bench facts`` measures the rules on the labelled sets.
"""

from __future__ import annotations

from datetime import date

from anamnesis.facts.rules import RuleExtractor

from .test_rules import episode


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


def test_a_capped_object_ends_at_a_phrase_boundary() -> None:
    # Eight words of object: the cap keeps six ("... by the old"), then drops the
    # half-said phrase.
    assert read("I love walking my dog by the old stone bridge.") == {
        ("add", "likes", "walking my dog")
    }


def test_a_routine_said_with_an_adverb_of_frequency() -> None:
    assert read("I often doodle in the margins of my notebook.") == {
        ("add", "habit", "doodle in the margins")
    }
    assert read("I usually spend my evenings reading history books.") == {
        ("add", "habit", "spend my evenings reading history books")
    }


def test_an_activity_begun_with_a_frequency_is_a_routine() -> None:
    assert read("I started swimming at the lake every Sunday.") == {
        ("add", "habit", "swimming at the lake")
    }
    assert read("I started swimming at the lake.") == {("add", "started", "swimming at the lake")}


def test_an_activity_begun_with_have_and_a_how_to() -> None:
    assert read("I've started learning how to knit.") == {
        ("add", "started", "learning how to knit")
    }
    assert read("I've started running to clear my head.") == {("add", "started", "running")}


def test_and_or_between_two_nouns_is_one_object() -> None:
    assert read("I love jazz and blues records.") == {("add", "likes", "jazz and blues records")}
    assert read("I usually eat an apple or nuts at my desk.") == {
        ("add", "habit", "eat an apple or nuts")
    }


def test_and_or_before_a_clause_or_a_verb_phrase_ends_the_object() -> None:
    assert read("I love jazz and I play the sax.") == {("add", "likes", "jazz")}
    assert read("I love hiking and swimming in lakes.") == {("add", "likes", "hiking")}
    assert read("I love coastal towns and the cliffs are huge.") == {
        ("add", "likes", "coastal towns")
    }


def test_a_dash_with_a_space_on_one_side_ends_a_clause() -> None:
    assert read("We moved to Lisbon- we love it.") == {("add", "lives_in", "Lisbon")}
    assert read("I love sci-fi.") == {("add", "likes", "sci-fi")}


def test_liking_the_thing_just_shown_is_a_reaction_not_a_taste() -> None:
    assert read("I like the layout.") == set()
    assert read("I love the colours in this one.") == set()
    assert read("I love the outdoors.") == {("add", "likes", "the outdoors")}


def test_a_liking_said_as_a_fan_a_love_or_a_favourite() -> None:
    assert read("I'm a huge Beatles fan!") == {("add", "likes", "Beatles")}
    assert read("I'm a big fan of opera.") == {("add", "likes", "opera")}
    assert read("I've always had a love for old trains.") == {("add", "likes", "old trains")}
    assert read("Baking bread and cakes is my favorite!") == {
        ("add", "likes", "Baking bread and cakes")
    }
    assert read("This one is my favorite.") == set()


def test_a_relative_clause_is_about_the_thing_before_it() -> None:
    assert read("Those are the colours that I love in my garden.") == set()


def test_a_plan_said_by_booking_or_by_we() -> None:
    assert read("I booked a trip to Iceland for next month!") == {
        ("add", "plans", "a trip to Iceland")
    }
    assert read("We're planning a family reunion this summer.") == {
        ("add", "plans", "a family reunion")
    }
    assert read("We are planning to paint the kitchen.") == {("add", "plans", "paint the kitchen")}


def test_a_planned_thing_drops_its_purpose_and_a_vague_plan_is_none() -> None:
    assert read("I'm planning a road trip to clear my head.") == {("add", "plans", "a road trip")}
    assert read("I'm hoping to do something fun this weekend.") == set()


def test_what_was_done_or_planned_together_is_the_speakers_too() -> None:
    assert read("My brother and I went to Kyoto last spring.") == {("add", "visited", "Kyoto")}
    assert read("My wife and I love sushi.") == set()  # a taste is each person's own


def test_coming_back_from_a_place_is_a_visit() -> None:
    assert read("I just got back from a week-long trip to Norway- it was great.") == {
        ("add", "visited", "Norway")
    }
    assert read("Yesterday I came back from Boston with new ideas.") == {
        ("add", "visited", "Boston")
    }


def test_a_pet_named_in_apposition() -> None:
    assert read("We got a new pet, a tabby kitten named Miso.") == {
        ("add", "pet", "kitten named Miso")
    }


def test_a_quoted_title_is_part_of_the_object() -> None:
    assert read('I love "Hotel California" by the Eagles.') == {
        ("add", "likes", "Hotel California by the Eagles")
    }


def test_a_relation_spelled_with_letters_read_as_ascii_is_the_relation() -> None:
    # The patterns match "ſiſter" (long s) as "sister": the relation is looked up as such.
    assert read("My \u017fi\u017fter Emma visits often.") == {("add", "sister", "Emma")}
