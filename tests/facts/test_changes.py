"""Changes said with a negation or a past tense end the old value.

"I left Tencent and now work at Moonshot AI" makes Moonshot AI the employer and
Tencent a past one; "we moved out of Boston", "I quit smoking", "I'm not with Sam
anymore" end a value with nothing in its place. Through ``Memory`` with the rule
extractor and a real SQLite store; the patterns themselves on single sentences.
"""

from __future__ import annotations

from datetime import UTC, date, datetime
from pathlib import Path

import pytest
from locomo_slice import load_slice

from anamnesis import Memory
from anamnesis.embed import get_embedder
from anamnesis.facts.llm_extract import _draft
from anamnesis.facts.predicates import is_single_valued
from anamnesis.facts.rules import RuleExtractor

from .test_rules import episode

EDGE = get_embedder("edge")


@pytest.fixture
def mem(tmp_path: Path):
    with Memory(path=tmp_path / "m.db", embedder=EDGE, warm=False) as memory:
        yield memory


def said(memory: Memory, *turns: tuple[str, str]) -> None:
    """Each ``(day, text)`` as a user turn, then one consolidation."""
    for day, text in turns:
        memory.add(text, role="user", event_time=day)
    memory.consolidate()


def current(memory: Memory, predicate: str) -> list[str]:
    return [f.object for f in memory.facts(predicate=predicate)]


def test_left_tencent_and_now_work_at_moonshot(mem: Memory) -> None:
    said(
        mem,
        ("2024-01-10", "I work at Tencent."),
        ("2024-09-02", "Big news: I left Tencent and now work at Moonshot AI"),
    )
    assert current(mem, "works_at") == ["Moonshot AI"]
    tencent, moonshot = mem.fact_history(predicate="works_at")
    assert (tencent.object, moonshot.object) == ("Tencent", "Moonshot AI")
    assert tencent.superseded_by == moonshot.id and moonshot.supersedes == tencent.id
    assert tencent.valid_to == datetime(2024, 9, 2, tzinfo=UTC)
    assert len(tencent.provenance) == 2  # told in January, its end told in September


def test_the_same_story_across_two_consolidations(mem: Memory) -> None:
    said(mem, ("2024-01-10", "I work at Tencent."))
    said(mem, ("2024-09-02", "Big news: I left Tencent and now work at Moonshot AI"))
    assert current(mem, "works_at") == ["Moonshot AI"]
    assert [f.object for f in mem.fact_history(predicate="works_at")] == ["Tencent", "Moonshot AI"]


@pytest.mark.parametrize(
    ("before", "after", "predicate"),
    [
        ("I live in Boston.", "We moved out of Boston last spring.", "lives_in"),
        ("I work at Amazon.", "I no longer work at Amazon.", "works_at"),
        ("My boyfriend Sam is sweet.", "I'm not with Sam anymore.", "partner"),
        ("My boyfriend Sam is sweet.", "I'm single again.", "partner"),
        ("I smoke about a pack a day.", "I quit smoking.", "habit"),
        ("I love sushi.", "I'm not into sushi anymore.", "likes"),
        ("I'm vegan.", "I'm no longer vegan.", "diet"),
        ("I just got a new car.", "I sold my car.", None),
    ],
)
def test_an_ending_leaves_the_slot_empty_and_keeps_the_value(
    mem: Memory, before: str, after: str, predicate: str | None
) -> None:
    said(mem, ("2024-01-10", before))
    [held] = mem.facts()
    said(mem, ("2024-06-01", after))
    assert mem.facts(predicate=predicate or held.predicate) == []
    [ended] = mem.facts(predicate=held.predicate, include_superseded=True)
    assert ended.id == held.id and ended.superseded_by is None and not ended.is_current
    assert held.valid_from is not None and ended.valid_to is not None
    assert held.valid_from < ended.valid_to <= datetime(2024, 6, 1, tzinfo=UTC)


def test_sold_my_car_ends_the_car_but_not_other_possessions(mem: Memory) -> None:
    said(mem, ("2024-01-10", "I bought a car."), ("2024-01-11", "I bought a piano."))
    said(mem, ("2024-06-01", "I sold my car last month."))
    assert current(mem, "owns") == ["a piano"]


def test_an_ending_never_told_before_is_kept_as_a_past_value(mem: Memory) -> None:
    said(mem, ("2024-06-01", "I quit smoking two years ago."))
    assert mem.facts() == []
    [smoking] = mem.facts(include_superseded=True)
    assert (smoking.predicate, smoking.object, smoking.valid_from) == ("habit", "smoking", None)
    assert smoking.valid_to is not None and smoking.valid_to.year == 2022


def test_a_value_said_again_after_it_ended_holds_again(mem: Memory) -> None:
    said(mem, ("2024-01-10", "I'm vegan."), ("2024-03-01", "I'm no longer vegan."))
    said(mem, ("2024-08-01", "I'm vegan now."))
    assert current(mem, "diet") == ["vegan"]
    assert len(mem.facts(predicate="diet", include_superseded=True)) == 2
    said(mem, ("2024-01-10", "I love sushi."), ("2024-03-01", "I'm not into sushi anymore."))
    said(mem, ("2024-08-01", "I love sushi."))
    assert current(mem, "likes") == ["sushi"]


def test_an_ending_restated_only_confirms_it(mem: Memory) -> None:
    said(mem, ("2024-01-10", "I work at IBM."), ("2024-03-01", "I used to work at IBM."))
    report = mem.consolidate()
    said(mem, ("2024-05-01", "I no longer work at IBM."))
    assert report.episodes == 0
    [ibm] = mem.facts(include_superseded=True)
    assert len(ibm.provenance) == 3 and not ibm.is_current


def test_the_report_counts_endings(mem: Memory) -> None:
    mem.add("I live in Oslo.", role="user", event_time="2024-01-10")
    mem.add("We used to live in Oslo.", role="user", event_time="2024-05-10")
    report = mem.consolidate()
    assert (report.added, report.ended) == (1, 1)


# -- the patterns ---------------------------------------------------------------------
CHANGES = [
    ("I left Tencent and now work at Moonshot AI.", {("works_at", "Moonshot AI", "ADD"),
                                                    ("works_at", "Tencent", "END")}),
    ("I moved from Seattle to Portland in June.", {("lives_in", "Portland", "ADD"),
                                                  ("lives_in", "Seattle", "END")}),
    ("I used to be a teacher, now I'm a lawyer.", {("job", "lawyer", "ADD"),
                                                  ("job", "teacher", "END")}),
    ("I'm now working at Shopify after leaving Amazon.", {("works_at", "Shopify", "ADD"),
                                                          ("works_at", "Amazon", "END")}),
    ("I left New York and settled in Chicago.", {("lives_in", "Chicago", "ADD"),
                                                ("lives_in", "New York", "END")}),
    ("I quit my job.", {("works_at", "", "END")}),
    ("I was laid off from Meta.", {("works_at", "Meta", "END")}),
    ("Jamie and I split up.", {("partner", "Jamie", "END")}),
    ("I divorced Mark in 2020.", {("partner", "Mark", "END")}),
    ("Our dog Biscuit died in April.", {("pet", "dog named Biscuit", "END")}),
    ("I gave my parrot to my sister.", {("pet", "parrot", "END")}),
    ("I don't have my bike anymore.", {("owns", "my bike", "END")}),
    ("I stopped going to the gym.", {("habit", "going to the gym", "END")}),
    ("I don't run anymore because of my knee.", {("habit", "run", "END")}),
    ("I no longer eat meat.", {("avoids", "meat", "ADD")}),
    ("I don't like horror movies anymore.", {("likes", "horror movies", "END")}),
    ("I cancelled my trip to Peru.", {("plans", "my trip to Peru", "END")}),
    ("Moved to Denver last year for a new job.", {("lives_in", "Denver", "ADD")}),
]  # fmt: skip
STATES = [
    ("I'm a software engineer.", {("job", "software engineer", "ADD")}),
    ("I'm a nurse at Mercy Hospital.", {("job", "nurse", "ADD"),
                                        ("works_at", "Mercy Hospital", "ADD")}),
    ("I'm married to Tom.", {("partner", "Tom", "ADD")}),
    ("I have two cats.", {("pet", "cats", "ADD")}),
    ("I'm allergic to peanuts.", {("allergic_to", "peanuts", "ADD")}),
    ("I was diagnosed with type 2 diabetes last year.", {("condition", "type 2 diabetes", "ADD")}),
    ("I go to the gym three times a week.", {("habit", "go to the gym", "ADD")}),
    ("I'm planning a trip to Arizona.", {("plans", "a trip to Arizona", "ADD")}),
    ("My husband and I moved to Austin.", {("lives_in", "Austin", "ADD")}),
    ("I just moved back to my hometown, Dayton.", {("lives_in", "Dayton", "ADD"),
                                                  ("from", "Dayton", "ADD")}),
]  # fmt: skip
NOTHING = [
    "Do you work at Google?",
    "If I quit my job, I could travel.",
    "I don't work at Apple.",  # a negation, not a change
    "I'm not a nurse.",
    "I work at night.",
    "I moved to a new apartment.",
    "I'm a big believer in hard work.",
    "I'm a bit nervous about tomorrow.",
    "He left Google last year.",
    "They quit smoking together.",
    "Max and I love taking walks.",
    "I left my keys at home.",
    "I'm going through a lot right now.",
    "I have a fish tank.",
]


@pytest.mark.parametrize(
    ("text", "expected"), CHANGES + STATES, ids=[t for t, _ in CHANGES + STATES]
)
def test_the_extractor_reads_changes_and_states(text: str, expected: set) -> None:
    drafts = RuleExtractor().extract(episode(text, None, date(2024, 6, 1)))
    assert {(d.predicate, d.object, d.action) for d in drafts} == expected


@pytest.mark.parametrize("text", NOTHING)
def test_questions_hypotheticals_negations_and_others_state_nothing(text: str) -> None:
    assert RuleExtractor().extract(episode(text, None, date(2024, 6, 1))) == []


def test_an_ending_is_dated_by_its_time_expression() -> None:
    [draft] = RuleExtractor().extract(
        episode("I quit smoking two years ago.", None, date(2024, 6, 1))
    )
    assert (draft.action, draft.valid_from and draft.valid_from.year) == ("END", 2022)


def test_an_llm_end_needs_a_fact_it_was_shown() -> None:
    """An LLM END names the stored fact that stopped holding; naming one it was not
    shown proposes nothing (read as an ADD, it would state what just ended)."""
    turn = episode("I left Tencent.", None, date(2024, 6, 1))
    item = {"predicate": "works_at", "object": "Tencent", "action": "END", "target": "f_1"}
    draft = _draft(item, turn, "user", {"f_1"})
    assert draft is not None and (draft.action, draft.target) == ("END", "f_1")
    assert _draft(item, turn, "user", {"f_2"}) is None


def test_consolidating_a_real_conversation_gives_sensible_facts(mem: Memory) -> None:
    """LoCoMo conv-26, sessions 1-4: two speakers, 76 turns."""
    load_slice(mem, "u")
    report = mem.consolidate(user_id="u")
    facts = mem.facts(user_id="u", include_superseded=True, limit=500)
    found = {(f.subject, f.predicate, f.object) for f in facts}
    assert {
        ("Caroline", "from", "Sweden"),  # D4:3 "my home country, Sweden"
        ("Caroline", "visited", "a LGBTQ support group"),  # D1:3
        ("Melanie", "finished", "a charity race"),  # D2:1
        ("Caroline", "started", "transitioning"),  # D3:1 "since I started transitioning"
    } <= found
    assert {f.subject for f in facts} <= {"Caroline", "Melanie"}
    assert report.ended == 0 and all(f.is_current for f in facts)  # nothing ended there
    slots = [(f.subject, f.predicate) for f in facts if is_single_valued(f.predicate)]
    assert len(slots) == len(set(slots))  # one value per single-valued slot
    support_group = next(f for f in facts if f.object == "a LGBTQ support group")
    assert support_group.valid_from == datetime(2023, 5, 7, tzinfo=UTC)  # "yesterday"
    transition = next(f for f in facts if f.object == "transitioning")
    assert transition.valid_from and transition.valid_from.year == 2020  # "three years ago"


def test_the_cli_shows_an_ended_fact_as_ended(tmp_path: Path) -> None:
    from click.testing import CliRunner

    from anamnesis.cli import main

    def cli(*args: str) -> str:
        path = str(tmp_path / "cli.db")
        result = CliRunner().invoke(main, ["--path", path, "--embedder", "edge", *args])
        assert result.exit_code == 0, result.output
        return result.output

    cli("add", "I live in Boston.", "--role", "user", "--time", "2022-01-01")
    cli("add", "We moved out of Boston.", "--role", "user", "--time", "2023-06-15")
    cli("consolidate")
    shown = cli("facts", "--all")
    assert "Boston" in shown and "ended" in shown and "current" not in shown
