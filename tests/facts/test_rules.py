"""The rule-based fact extractor on real sentences from the benchmark data sets.

Sources (copied verbatim, one sentence or turn each):
- LoCoMo: snap-research/LoCoMo ``data/locomo10.json`` @ 3eb6f2c (CC BY-NC 4.0),
  cited as conversation and dia_id; the date is the session's date.
- LongMemEval-S: hussainzs/Memoria ``evaluations/data/lme_jsons/`` @ 959167b (MIT),
  cited as question id, session id and turn index (all user turns).
"""

from __future__ import annotations

from datetime import UTC, date, datetime

import pytest

from anamnesis.facts.rules import RuleExtractor
from anamnesis.types import Episode

# (source, speaker, said on, text, expected (predicate, object) drafts, in order)
REAL_SENTENCES: list[tuple[str, str | None, date, str, list[tuple[str, str]]]] = [
    (
        "LoCoMo conv-26 D1:3",
        "Caroline",
        date(2023, 5, 8),
        "I went to a LGBTQ support group yesterday and it was so powerful.",
        [("visited", "a LGBTQ support group")],
    ),
    (
        "LoCoMo conv-26 D5:4",
        "Melanie",
        date(2023, 7, 3),
        "Wow, Caroline! That's great! I just signed up for a pottery class yesterday. It's like "
        "therapy for me, letting me express myself and get creative. Have you found any "
        "activities that make you feel the same way?",
        [("started", "a pottery class")],
    ),
    (
        "LoCoMo conv-41 D19:1",
        "Maria",
        date(2023, 6, 16),
        "Hey John, been good since we talked? I got some great news to share - I joined a gym "
        "last week! It's been super positive - I'm sticking to my workout routine and the "
        "people are awesome. The atmosphere is so welcoming.",
        [("started", "a gym")],
    ),
    (
        "LoCoMo conv-42 D3:10",
        "Nate",
        date(2022, 2, 7),
        "I love coconut milk, but I also enjoy chocolate and mixed berry flavors.",
        [("likes", "coconut milk"), ("likes", "chocolate and mixed berry flavors")],
    ),
    (
        "LoCoMo conv-47 D21:16",
        "John",
        date(2022, 8, 26),
        "Great idea, except I don't like dark beer. Maybe there's something else there?",
        [("dislikes", "dark beer")],
    ),
    (
        "LoCoMo conv-50 D1:13",
        "Calvin",
        date(2023, 3, 23),
        "I'm planning to explore the city, try out different local cuisines, and perhaps "
        "collaborate with musicians in the area.",
        [("plans", "explore the city")],
    ),
    (
        "LoCoMo conv-50 D9:18",
        "Dave",
        date(2023, 6, 21),
        "Yes, Cal! I recently joined a rock band and have been practicing guitar. Look at this "
        "photo – it's us, the guys! ",
        [("started", "a rock band")],
    ),
    (
        # "Max and I": not a statement about the speaker alone.
        "LoCoMo conv-47 D14:27",
        "James",
        date(2022, 6, 16),
        "Max and I love taking walks on this nearby trail. It's a mile from my house. It's so "
        "tranquil and a great way to relax and connect with nature.",
        [],
    ),
    (
        "LongMemEval-S 1f2b8d4f c8c64252 #2",
        None,
        date(2023, 5, 20),
        "I live in Chicago, I'm open to any diet that's healthy and nutritious, I'm looking for "
        "meals that can help with immune system boosting, and I'd like to receive meals 3-4 "
        "times a week.",
        [("lives_in", "Chicago")],
    ),
    (
        "LongMemEval-S 099778bb 47103d08 #6",
        None,
        date(2023, 5, 20),
        "I've been feeling restless for a few months now, ever since I moved to Denver for work.",
        [("lives_in", "Denver")],
    ),
    (
        "LongMemEval-S 0862e8bf 95c36d37 #6",
        None,
        date(2023, 5, 20),
        "I'm currently living in Roppongi, which is convenient for work, but I'm looking for a "
        "place with a more convenient commute.",
        [("lives_in", "Roppongi")],
    ),
    (
        "LongMemEval-S 18bc8abd answer_fff743f5_1 #2",
        None,
        date(2023, 5, 20),
        "Speaking of which, I need to stock up on my favorite BBQ sauce, Sweet Baby Ray's, to "
        "serve with the ribs.",
        [("favorite bbq sauce", "Sweet Baby Ray's")],
    ),
    (
        "LongMemEval-S 07741c45 604de0a3_2 #0",
        None,
        date(2023, 5, 20),
        "I just got a new 50-inch 4K TV and I'm looking for some recommendations on what video "
        "games to play on it.",
        [("owns", "a new 50-inch 4K TV")],
    ),
    (
        "LongMemEval-S 00ca467f 6395ae23_1 #0",
        None,
        date(2023, 5, 20),
        "By the way, I finally managed to clean out my cat, Luna's, food and water bowls last "
        "week, and now I need to restock her favorite grain-free cat food.",
        [("pet", "cat named Luna")],
    ),
]


def episode(text: str, speaker: str | None, said: date, role: str | None = "user") -> Episode:
    when = datetime(said.year, said.month, said.day, 13, 0, tzinfo=UTC)
    return Episode(
        id="ep_test",
        user_id="u",
        agent_id=None,
        session_id=None,
        role=role,
        speaker=speaker,
        content=text,
        modality="text",
        event_time=when,
        recorded_at=when,
        metadata={},
        content_hash="h",
    )


@pytest.mark.parametrize(
    ("source", "speaker", "said", "text", "expected"),
    REAL_SENTENCES,
    ids=[row[0] for row in REAL_SENTENCES],
)
def test_rule_extractor_on_real_sentences(source, speaker, said, text, expected):
    drafts = RuleExtractor().extract(episode(text, speaker, said))
    assert [(d.predicate, d.object) for d in drafts] == expected


def test_first_person_is_the_user_in_a_user_turn_else_the_named_speaker():
    extractor = RuleExtractor()
    said = date(2023, 1, 1)
    # A conversation between named people (no roles): each speaks of themselves.
    [named] = extractor.extract(episode("I live in Denver, Colorado.", "Caroline", said, None))
    [anonymous] = extractor.extract(episode("I live in Denver, Colorado.", None, said))
    # A user turn is the scope's user, whatever name they speak under.
    [user] = extractor.extract(episode("I live in Denver, Colorado.", "Miguel", said))
    assert (named.subject, anonymous.subject, user.subject) == ("Caroline", "user", "user")
    assert anonymous.text == user.text == "user lives in Denver"


def test_assistant_turns_state_nothing_about_the_user():
    turn = episode("I live in the cloud and I love helping.", None, date(2023, 1, 1), "assistant")
    assert RuleExtractor().extract(turn) == []


def test_a_time_expression_dates_an_event():
    # LoCoMo conv-26 D1:3, said on 8 May 2023: the support group was on 7 May.
    [draft] = RuleExtractor().extract(episode(REAL_SENTENCES[0][3], "Caroline", date(2023, 5, 8)))
    assert draft.valid_from == datetime(2023, 5, 7, tzinfo=UTC)


def test_identity_work_relationships_and_pets():
    text = (
        "My name is Ana and I work at Google as a software engineer. "
        "My sister Emma visits often. I have a dog named Max. I'm 34 years old."
    )
    drafts = RuleExtractor().extract(episode(text, None, date(2023, 1, 1)))
    assert {(d.predicate, d.object) for d in drafts} == {
        ("name", "Ana"),
        ("works_at", "Google"),
        ("job", "software engineer"),
        ("sister", "Emma"),
        ("pet", "dog named Max"),
        ("age", "34"),
    }
