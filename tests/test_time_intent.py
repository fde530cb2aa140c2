"""Query analysis: what a question asks about time, and the times it names.

Questions are real ones from LoCoMo, LongMemEval and BEAM (``shared/data``), or the
issue's own examples.
"""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from anamnesis.retrieve.analysis import analyse

ASKED = datetime(2023, 5, 20, 12, tzinfo=UTC)


@pytest.mark.parametrize(
    ("question", "asks"),
    [
        ("When did Caroline go to the LGBTQ support group?", {"when"}),
        ("In which month's game did John achieve a career-high score in points?", {"when"}),
        ("Which year did Jolene and her partner start dating?", {"when"}),
        ("How many days ago did I participate in the 5K charity run?", {"duration"}),
        ("How long had I been a member of 'Book Lovers Unite' when I attended the meetup?",
         {"duration"}),
        ("Which event did I participate in first, the volleyball league or the charity 5K run?",
         {"first"}),
        ("Which streaming service did I start using most recently?", {"last"}),
        ("Can you list the order in which I brought up different aspects of my project?",
         {"order"}),
        ("What new kitchen gadget did I invest in before getting the Air Fryer?", {"before"}),
        ("What charity event did I participate in a month ago?", {"range"}),
        ("What is the monthly grocery budget Alexis and I have agreed on?", set()),
        ("What are some common responses when something goes wrong with an API?", set()),
        ("When building an app that calls a REST API, what errors should I handle?", set()),
    ],
)  # fmt: skip
def test_temporal_intents(question, asks) -> None:
    assert set(analyse(question, ASKED).time.asks) == asks


def test_a_named_time_is_a_range_not_a_last_question() -> None:
    intent = analyse("What did I do last week?", ASKED).time
    assert intent.asks == ("range",)
    assert not intent.ordering


@pytest.mark.parametrize(
    ("question", "history", "current"),
    [
        ("What were all the cars I've had?", True, False),
        ("What did I use to drive before the Tesla?", True, False),
        ("How has my running pace changed?", True, False),
        ("What was my previous job?", True, False),
        ("What is my current job?", False, True),
        ("Where do I live now?", False, True),
        ("What is the latest version of my resume?", False, True),
        ("Where did I get my guitar serviced?", False, False),
        # A bare closing "before" asks for history; "before" with a time names a range.
        ("What companies did I work at before?", True, False),
        ("What did I cook before Christmas?", False, False),
        ("Where was I originally from?", True, False),
    ],
)
def test_history_and_current_state_intents(question, history, current) -> None:
    intent = analyse(question, ASKED).time
    assert (intent.history, intent.current) == (history, current)
    assert intent.wants_history == (history and not current)


def test_the_questions_own_times_resolve_against_now_and_are_widened() -> None:
    (named,) = analyse("What did I buy in June?", ASKED).time.ranges
    assert named.mention.start == datetime(2022, 6, 1, tzinfo=UTC)  # the latest June before
    assert named.mention.end == datetime(2022, 7, 1, tzinfo=UTC)
    assert named.start == datetime(2022, 5, 25, tzinfo=UTC)  # a week of slack each side
    assert named.end == datetime(2022, 7, 8, tzinfo=UTC)
    (ago,) = analyse("What did I mention four weeks ago?", ASKED).time.ranges
    assert ago.mention.start == datetime(2023, 4, 17, tzinfo=UTC)


def test_a_time_after_since_opens_a_range_up_to_now() -> None:
    (since,) = analyse("What have I bought since March 2023?", ASKED).time.ranges
    assert since.start == datetime(2023, 2, 22, tzinfo=UTC)  # March, less a week of slack
    assert since.end == datetime(2023, 5, 27, 12, tzinfo=UTC)  # now, plus the slack
    # "since Christmas" asked in May is the Christmas before, not the one to come.
    (christmas,) = analyse("What books have I read since Christmas?", ASKED).time.ranges
    assert christmas.start.date() == datetime(2022, 12, 24).date()
    assert christmas.end.date() == datetime(2023, 5, 21).date()
    (plain,) = analyse("What did I buy in March 2023?", ASKED).time.ranges
    assert plain.end == datetime(2023, 4, 8, tzinfo=UTC)


def test_now_defaults_to_the_present() -> None:
    before = datetime.now(UTC)
    assert analyse("what happened yesterday?").now >= before


def test_the_analysis_is_json_friendly() -> None:
    view = analyse("What did I do on 7 May 2023?", ASKED).to_dict()
    assert view["now"] == ASKED.isoformat()
    assert view["time"]["ranges"] == [
        {
            "expression": "7 May 2023",
            "calendar": True,
            "granularity": "day",
            "resolved": ["2023-05-07T00:00:00+00:00", "2023-05-08T00:00:00+00:00"],
            "window": ["2023-05-06T00:00:00+00:00", "2023-05-09T00:00:00+00:00"],
        }
    ]


@pytest.mark.parametrize(
    ("question", "calendar"),
    [
        ("What was Sam doing on December 4, 2023?", True),
        ("Where did we go in May?", True),
        ("What did I buy in 2021?", True),
        ("What charity event did I join a month ago?", False),
        ("How many museums did I visit in the past few weeks?", False),
        ("What did I cook last weekend?", False),
    ],
)
def test_a_calendar_time_is_told_from_a_relative_one(question, calendar) -> None:
    (named,) = analyse(question, ASKED).time.ranges
    assert named.calendar is calendar
    assert analyse(question, ASKED).time.calendar_times == ([named.exact] if calendar else [])
