"""Relative and absolute time expressions, resolved against when they were said.

Sentences are real turns from LoCoMo (``shared/data/locomo10.json.gz``) said at the
date of their session; the expected ranges follow the conventions documented in
``anamnesis.ingest.timeparse``.
"""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from anamnesis.ingest.timeparse import resolve

# (sentence, said at, expression, first day, day after the last, granularity)
CASES = [
    ("I went to a LGBTQ support group yesterday and it was so powerful.",
     "2023-05-08", "yesterday", "2023-05-07", "2023-05-08", "day"),
    ("I wanted to tell you about my school event last week.",
     "2023-06-09", "last week", "2023-05-29", "2023-06-05", "week"),
    ("I ran a charity race for mental health last Saturday",
     "2023-05-25", "last Saturday", "2023-05-20", "2023-05-21", "day"),
    ("Got the tattoo a few years ago, it stands for freedom",
     "2023-08-14", "a few years ago", "2020-01-01", "2021-01-01", "year"),
    ("Guess what - I got a puppy two weeks ago! Her name's Coco",
     "2023-07-21", "two weeks ago", "2023-07-03", "2023-07-10", "week"),
    ("My kids are so excited about summer break! We're thinking about going camping next month.",
     "2023-05-25", "next month", "2023-06-01", "2023-07-01", "month"),
    ("Yeah, I painted that lake sunrise last year! It's special to me.",
     "2023-05-08", "last year", "2022-01-01", "2023-01-01", "year"),
    ("Here's our latest work from last weekend.",
     "2023-07-12", "last weekend", "2023-07-08", "2023-07-10", "weekend"),
    ("Last night was amazing! We celebrated my daughter's birthday with a concert",
     "2023-08-14", "Last night", "2023-08-13", "2023-08-14", "day"),
    ("I went to an LGBTQ conference two days ago.",
     "2023-07-15", "two days ago", "2023-07-13", "2023-07-14", "day"),
    ("I met back up with my teammates on the 15th after my trip",
     "2023-09-20", "on the 15th", "2023-09-15", "2023-09-16", "day"),
    ("I'm hiking with some buddies this weekend.",
     "2023-04-26", "this weekend", "2023-04-29", "2023-05-01", "weekend"),
    ("Last Monday I got to teach a class on painting",
     "2023-08-16", "Last Monday", "2023-08-14", "2023-08-15", "day"),
    ("Let's do it next Saturday!", "2023-10-04", "next Saturday", "2023-10-07", "2023-10-08", "day"),
    ("I started playing acoustic guitar about five years ago",
     "2023-03-01", "five years ago", "2018-01-01", "2019-01-01", "year"),
    ("I adopted her two years ago when I was feeling lonely", "2022-11-10",
     "two years ago", "2020-01-01", "2021-01-01", "year"),
    ("I started volunteering here about a year ago", "2023-05-02", "a year ago",
     "2022-01-01", "2023-01-01", "year"),
    ("We had the party the week before Christmas", "2023-01-10",
     "the week before Christmas", "2022-12-18", "2022-12-25", "week"),
    # Offsets anchored on a date (the "two weeks before Aug 11" kind).
    ("I booked the flights two weeks before Aug 11", "2023-09-01",
     "two weeks before Aug 11", "2023-07-24", "2023-07-31", "week"),
    ("We met again 3 days after Christmas", "2024-01-10",
     "3 days after Christmas", "2023-12-28", "2023-12-29", "day"),
    ("A month after 5 May 2023 I quit", "2023-09-01",
     "A month after 5 May 2023", "2023-06-01", "2023-07-01", "month"),
    ("We moved to Berlin in May 2022", "2023-05-02", "in May 2022", "2022-05-01", "2022-06-01", "month"),
    ("I visited my grandma in March", "2023-05-02", "in March", "2023-03-01", "2023-04-01", "month"),
    ("The concert is on 3 March, 2024", "2023-05-02", "3 March, 2024", "2024-03-03", "2024-03-04", "day"),
    # BEAM user turns, said on their batch's time anchor
    ("I'm kinda worried about the executor choice, you know, since Douglas accepted on April 15 at "
     "Coral Bay Café", "2024-05-02", "on April 15", "2024-04-15", "2024-04-16", "day"),
    ("I'm kinda stressed about balancing production deadlines with the patent response that's due "
     "July 20", "2024-07-10", "due July 20", "2024-07-20", "2024-07-21", "day"),
    ("I've set clear work-free Sundays starting May 5 after David expressed concern",
     "2024-05-20", "starting May 5", "2024-05-05", "2024-05-06", "day"),
    ("I'm kinda stressed about declining that last-minute 3 PM meeting on March 14",
     "2024-03-15", "on March 14", "2024-03-14", "2024-03-15", "day"),
    # LoCoMo turns
    ("Hey Joanna, check this out! I won my fourth video game tournament on Friday!",
     "2022-07-10", "on Friday", "2022-07-08", "2022-07-09", "day"),
    ("So much since we talked! Last Fri I finally took my kids to a pottery workshop.",
     "2023-07-15", "Last Fri", "2023-07-14", "2023-07-15", "day"),
    ("Last August I told you about my fun time at a charity event with Harry Potter trivia.",
     "2023-12-08", "Last August", "2023-08-01", "2023-09-01", "month"),
    ("Max and I had a blast on our camping trip last summer.",
     "2023-08-11", "last summer", "2022-06-01", "2022-09-01", "season"),
    ("So much fun with the whole gang! Wanna do a family outing this summer?",
     "2023-08-17", "this summer", "2023-06-01", "2023-09-01", "season"),
    # the issue's own examples
    ("We are meeting next Friday", "2023-05-08", "next Friday", "2023-05-12", "2023-05-13", "day"),
    ("I paid the rent on the 5th", "2023-05-08", "on the 5th", "2023-05-05", "2023-05-06", "day"),
    ("We moved in May 2023", "2023-09-01", "in May 2023", "2023-05-01", "2023-06-01", "month"),
    ("She left two months ago", "2023-05-08", "two months ago", "2023-03-01", "2023-04-01", "month"),
    # trailing spans (LongMemEval questions)
    ("How many dinner parties have I attended in the past month?", "2023-05-20",
     "the past month", "2023-04-21", "2023-05-21", "month"),
    ("How many charity events did I attend in the last two weeks?", "2023-05-20",
     "the last two weeks", "2023-05-07", "2023-05-21", "week"),
]  # fmt: skip


@pytest.mark.parametrize(("sentence", "said", "expression", "first", "end", "granularity"), CASES)
def test_resolves_real_sentences(sentence, said, expression, first, end, granularity) -> None:
    said_at = datetime.fromisoformat(said).replace(hour=13, tzinfo=UTC)
    (mention,) = resolve(sentence, said_at)
    assert mention.expression == expression
    assert mention.start.date().isoformat() == first
    assert mention.end.date().isoformat() == end
    assert mention.granularity == granularity


def test_a_bare_weekday_looks_forward_when_the_sentence_does() -> None:
    (mention,) = resolve("We'll meet on Friday", datetime(2024, 4, 20, tzinfo=UTC))
    assert mention.start.date().isoformat() == "2024-04-26"


def test_a_day_and_month_without_a_year_is_the_nearest_occurrence() -> None:
    said = datetime(2024, 1, 3, tzinfo=UTC)
    (late_december,) = resolve("we met on December 28", said)
    (next_spring,) = resolve("the deadline is March 1", said)
    assert late_december.start.date().isoformat() == "2023-12-28"
    assert next_spring.start.date().isoformat() == "2024-03-01"


def test_longest_overlapping_expression_wins() -> None:
    (mention,) = resolve("the day before yesterday", datetime(2023, 5, 8, tzinfo=UTC))
    assert mention.start.date().isoformat() == "2023-05-06"


def test_several_expressions_come_back_in_text_order() -> None:
    mentions = resolve(
        "Yesterday I called mum, and last Friday I saw a film", datetime(2023, 5, 10, tzinfo=UTC)
    )
    assert [m.expression for m in mentions] == ["Yesterday", "last Friday"]


@pytest.mark.parametrize(
    "sentence",
    [
        "I may go",
        "since we last talked",
        "two weeks before it happened",
        "My friend May is here",
        "It was recently fixed",
        "I may 5 times have tried",
        "I go there on Fridays",
        "Egypt's pyramids were built about 4600 years ago",
        "that was 99999999 days ago",
    ],
)
def test_words_that_are_not_dates_resolve_to_nothing(sentence) -> None:
    assert resolve(sentence, datetime(2023, 5, 10, tzinfo=UTC)) == []


# One or more expressions of every rule, beside words that only look like them.
EVERY_RULE = [
    "the day before yesterday, yesterday and last night; today, tonight and this morning",
    "tomorrow; 3 days ago, a couple of weeks ago, several years ago",
    "last Monday, this past Tues, next fri; this coming weekend, last weekend",
    "last week, next month, this year; the past two weeks, over the last 3 months.",
    "on 4 December 2023, on Dec. 4, 2023, on 2023-12-04, in May 2021, since March",
    "in 2019, on the 15th, the week before Christmas, over Thanksgiving, for Easter",
    "two weeks before Aug 11, 3 days after the 4th of July, a week after New Year's Day",
    "by June 3, from the 9th of Sept, on Sunday, last April, this past summer",
    "during the winter of 2022, autumn 2020, in the spring",
    "Maybe my daughter's money is common knowledge: showed a doctor the market in 3 pages",
]


def test_every_rule_names_words_each_of_its_matches_holds() -> None:
    # resolve skips a rule in an ASCII text that lacks one of its words: a word left
    # out of its groups would lose the expressions that use it.
    from anamnesis.ingest.timeparse import _WORDS, NEEDS, RULES, _lacks

    matched = set()
    for text in EVERY_RULE:
        for pattern, resolver in RULES:
            for match in pattern.finditer(text):
                matched.add(resolver.__name__)
                words = set(_WORDS.findall(match.group(0).lower()))
                assert not _lacks(words, NEEDS[pattern]), (resolver.__name__, match.group(0))
    assert matched == {resolver.__name__ for _, resolver in RULES}


@pytest.mark.parametrize("text", [*EVERY_RULE, *(case[0] for case in CASES)])
def test_skipping_rules_by_their_words_resolves_as_every_rule_does(monkeypatch, text) -> None:
    from anamnesis.ingest import timeparse

    said = datetime(2023, 5, 8, tzinfo=UTC)
    skipping = resolve(text, said)
    monkeypatch.setattr(timeparse, "NEEDS", dict.fromkeys(timeparse.NEEDS, ()))
    assert skipping == resolve(text, said)


def test_a_text_beyond_ascii_is_read_by_every_rule() -> None:
    # The patterns match the long s as "s" (their case folding is Unicode's); the word
    # lookup would find "pa" and "t" in "paſt", not "past".
    said = datetime(2023, 5, 8, tzinfo=UTC)
    found = resolve("I was busy the pa\u017ft two weeks", said)
    assert [m.expression for m in found] == ["the pa\u017ft two weeks"]


@pytest.mark.parametrize(
    "letter, ascii_letter", [("\u017f", "s"), ("\u0131", "i"), ("\u0130", "I")]
)
def test_letters_the_patterns_read_as_ascii_resolve_as_the_ascii_word(letter, ascii_letter) -> None:
    # Case-insensitive patterns take the long s, the dotless i and the dotted capital I
    # for "s", "i" and "I": the words they match resolve as the ASCII words would, and
    # the expression comes back as the text spells it.
    said = datetime(2023, 5, 8, tzinfo=UTC)
    for sentence in ("I moved last week", "I was there this Friday"):
        respelled = sentence.replace(ascii_letter.lower(), letter).replace(
            ascii_letter.upper(), letter
        )
        if respelled == sentence:
            continue
        expected = resolve(sentence, said)
        found = resolve(respelled, said)
        assert [(m.start, m.end, m.granularity) for m in found] == [
            (m.start, m.end, m.granularity) for m in expected
        ]
        assert all(m.expression in respelled for m in found)


def test_the_past_few_units_resolve_whatever_follows() -> None:
    # "the past two weeks" is the span up to today, at a sentence's end or before more words.
    said = datetime(2023, 5, 8, tzinfo=UTC)
    for text in ("I was busy the past two weeks.", "I was busy the past two weeks at work"):
        (found,) = resolve(text, said)
        assert found.expression == "the past two weeks"
        assert (found.start.date().isoformat(), found.end.date().isoformat()) == (
            "2023-04-25",
            "2023-05-09",
        )
