"""Context assembly: Memory.context packs dated, provenance-tagged excerpts into a budget."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from click.testing import CliRunner

from anamnesis import Memory
from anamnesis.cli import main
from anamnesis.context import assemble
from anamnesis.errors import InvalidInputError
from anamnesis.tokens import TokenCounter
from anamnesis.types import ContextFact

ASKED = datetime(2023, 6, 1, 12, 0, tzinfo=UTC)


def _conversation(mem: Memory) -> None:
    mem.add(
        [
            {"content": "Guess what, I adopted a puppy!", "speaker": "Ana", "session_id": "s1"},
            {"content": "No way! What is its name?", "speaker": "Bo", "session_id": "s1"},
            {"content": "Her name is Pixel, a beagle.", "speaker": "Ana", "session_id": "s1"},
            {"content": "I am learning the cello now.", "speaker": "Bo", "session_id": "s1"},
        ],
        user_id="u",
        event_time="2023-05-08T13:56:00Z",
    )
    mem.add(
        [
            {"content": "Pixel chewed my shoes today.", "speaker": "Ana", "session_id": "s2"},
            {"content": "Typical beagle behaviour!", "speaker": "Bo", "session_id": "s2"},
        ],
        user_id="u",
        event_time="2023-05-20T09:00:00Z",
    )


def test_context_groups_dated_sessions_in_order_with_turn_tags(memory: Memory) -> None:
    _conversation(memory)
    context = memory.context("What did Ana adopt?", user_id="u", now=ASKED, budget_tokens=300)
    text = context.text
    assert text.startswith("Current date: 2023-06-01 (Thursday)")
    assert "== Session s1 · 2023-05-08 (Monday) 13:56 ==" in text
    assert "#0 Ana: Guess what, I adopted a puppy!" in text  # same minute as the header
    assert text.index("Session s1") < text.index("Session s2")  # chronological
    assert context.tokens <= 300 and context.budget_tokens == 300
    assert context.tokens == TokenCounter().count([text])[0]
    hits = [line for s in context.sessions for line in s.lines if line.rank is not None]
    assert hits and all(line.score is not None for line in hits)


def test_times_are_shown_only_when_they_move_on(memory: Memory) -> None:
    memory.add(
        [
            {"content": "Breakfast was pancakes", "event_time": "2023-05-08T08:00:00Z"},
            {"content": "Lunch was ramen", "event_time": "2023-05-08T12:30:00Z"},
            {"content": "Dinner was pancakes again", "event_time": "2023-05-09T19:00:00Z"},
        ],
        user_id="u",
        session_id="meals",
        speaker="Ana",
    )
    text = memory.context("what did Ana eat?", user_id="u").text
    assert text.splitlines() == [
        "== Session meals · 2023-05-08 (Monday) 08:00 ==",
        "#0 Ana: Breakfast was pancakes",
        "#1 [12:30] Ana: Lunch was ramen",
        "#2 [2023-05-09 19:00] Ana: Dinner was pancakes again",
    ]


def test_the_best_hit_brings_its_neighbouring_turns(memory: Memory) -> None:
    _conversation(memory)
    (hit,) = memory.search("What did Ana adopt?", user_id="u", limit=1)
    assert hit.episode.content == "Guess what, I adopted a puppy!"
    context = assemble("What did Ana adopt?", [hit], counter=TokenCounter(), neighbour_hits=1)
    lines = [line for s in context.sessions for line in s.lines]
    assert [line.episode.content for line in lines] == [
        "Guess what, I adopted a puppy!",
        "No way! What is its name?",  # the reply, included as a neighbour (rank None)
    ]
    assert [line.rank for line in lines] == [1, None]


def test_a_tight_budget_keeps_the_best_hit_and_stays_within_it(memory: Memory) -> None:
    _conversation(memory)
    context = memory.context("Pixel chewed shoes", user_id="u", budget_tokens=40)
    assert 0 < context.tokens <= 40
    assert [line.episode.content for s in context.sessions for line in s.lines] == [
        "Pixel chewed my shoes today."
    ]


def test_repeated_text_appears_once_per_session(memory: Memory) -> None:
    memory.add(["I love hiking", "I love hiking", "Hiking is fun"], user_id="u", session_id="s")
    memory.add(["I love hiking"], user_id="u", session_id="later")
    context = memory.context("hiking", user_id="u")
    assert context.text.count("I love hiking") == 2  # once in s, once (a new event) later
    assert len(set(context.episode_ids)) == len(context.episode_ids)


def test_facts_come_first_with_their_dates(memory: Memory) -> None:
    _conversation(memory)
    fact = ContextFact("Ana has a beagle named Pixel.", ASKED, ("e1",))
    context = memory.context("Ana's dog", user_id="u", facts=[fact])
    assert context.text.split("\n")[0] == "Facts:"
    assert "- Ana has a beagle named Pixel. (as of 2023-06-01)" in context.text
    assert context.facts == (fact,)


def test_scope_is_respected(memory: Memory) -> None:
    _conversation(memory)
    memory.add(["Zed adopted a parrot"], user_id="other")
    context = memory.context("who adopted a parrot?", user_id="u")
    assert "parrot" not in context.text


def test_an_empty_memory_gives_an_empty_context(memory: Memory) -> None:
    context = memory.context("anything", user_id="u")
    assert context.text == "" and context.tokens == 0 and context.sessions == ()


def test_budgets_too_small_are_refused(memory: Memory) -> None:
    with pytest.raises(InvalidInputError, match="budget_tokens"):
        memory.context("anything", user_id="u", budget_tokens=5)
    with pytest.raises(InvalidInputError, match="neighbour_hits"):
        memory.context("anything", user_id="u", neighbour_hits=-1)


def test_assemble_without_neighbours_packs_only_hits(memory: Memory) -> None:
    _conversation(memory)
    hits = memory.search("puppy name", user_id="u", limit=2)
    context = assemble("puppy name", hits, counter=TokenCounter(), neighbour_hits=0)
    assert set(context.episode_ids) == {h.episode.id for h in hits}


def test_cli_context_prints_the_text(tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("ANAMNESIS_PATH", str(tmp_path / "cli.db"))
    runner = CliRunner()
    added = runner.invoke(main, ["add", "I adopted a beagle named Pixel", "--user", "u"])
    assert added.exit_code == 0, added.output
    result = runner.invoke(
        main, ["context", "what dog?", "--user", "u", "--budget", "200", "--now", "2023-06-01"]
    )
    assert result.exit_code == 0, result.output
    assert result.output.startswith("Current date: 2023-06-01")
    assert "Pixel" in result.output
    as_json = runner.invoke(main, ["context", "what dog?", "--user", "u", "--json"])
    assert '"tokens"' in as_json.output and '"episode_id"' in as_json.output


def test_long_neighbours_are_left_out(memory: Memory) -> None:
    essay = "Here is a very long answer about sourdough starters. " * 30
    memory.add(
        [
            {"role": "user", "content": "How do I keep my sourdough starter alive?"},
            {"role": "assistant", "content": essay},
            {"role": "user", "content": "Thanks, I named my starter Bubbles."},
        ],
        user_id="u",
        session_id="s",
    )
    (hit,) = memory.search("named my starter Bubbles", user_id="u", limit=1)
    assert hit.episode.content.startswith("Thanks")
    counter = TokenCounter()
    kept = assemble("q", [hit], counter=counter, neighbour_hits=1, neighbour_max_tokens=None)
    trimmed = assemble("q", [hit], counter=counter, neighbour_hits=1, neighbour_max_tokens=128)
    assert essay.strip() in kept.text
    assert essay.strip() not in trimmed.text


def test_facts_carried_by_hits_fill_the_facts_section(memory: Memory) -> None:
    from dataclasses import replace

    from anamnesis.context import facts_of
    from anamnesis.types import Fact

    _conversation(memory)
    (hit,) = memory.search("What did Ana adopt?", user_id="u", limit=1)
    fact = Fact(
        id="f1",
        user_id="u",
        agent_id=None,
        subject="Ana",
        predicate="adopted",
        object="a beagle",
        text="Ana adopted a beagle.",
        valid_from=datetime(2023, 5, 8, tzinfo=UTC),
        valid_to=None,
        recorded_at=ASKED,
        provenance=(hit.episode.id,),
    )
    with_fact = replace(hit, facts=(fact, fact))
    (shown,) = facts_of([with_fact])
    assert shown == ContextFact("Ana adopted a beagle.", fact.valid_from, (hit.episode.id,))
    context = assemble("q", [with_fact], counter=TokenCounter(), facts=facts_of([with_fact]))
    assert "- Ana adopted a beagle. (as of 2023-05-08)" in context.text
