"""The exact-match guard: an identifier the user typed keeps its turns at the top,
and a question without one is ranked as before."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from anamnesis import Memory
from anamnesis.bench.presets import BENCH_PRESETS
from anamnesis.embed import get_embedder
from anamnesis.retrieve.identifiers import identifier_terms

EDGE = get_embedder("edge")


def _orders(count: int) -> tuple[list[str], list[dict[str, str]]]:
    """A user–assistant chat of near-identical order turns, each with its own number."""
    rng = random.Random(2)
    numbers = [str(rng.randint(100_000, 999_999)) for _ in range(count)]
    asked = "I placed order {} yesterday, when will it arrive?"
    answered = "Your order {} has been placed and should arrive next week."
    turns = [
        {"role": "user", "content": asked.format(n)}
        if i % 2 == 0
        else {"role": "assistant", "content": answered.format(n)}
        for i, n in enumerate(numbers)
    ]
    return numbers, turns


def test_identifiers_are_numbers_and_names_the_question_capitalises() -> None:
    assert identifier_terms("When will order A1234 arrive?") == ["a1234"]
    assert identifier_terms("What did Caroline tell Zbigniew in 2022?") == ["caroline", "zbigniew"]
    assert identifier_terms("Zbigniew said what about the harbour?") == []  # first word
    assert identifier_terms("what did she say about the harbour?") == []
    # Sentence openings, emphasis and acronyms are not names; counts are not codes.
    assert identifier_terms("List them in order. Mention ONLY the REST API ones.") == []
    assert identifier_terms("What did I do 3 days after the 2nd call?") == []
    # Dates are the time channels' (a month, a weekday, a year).
    assert identifier_terms("What did she host on Friday, May 23, 2023 for order 4471?") == ["4471"]


@pytest.mark.parametrize("preset", ["default", "full-ranker-exact", "full-priors-exact"])
def test_the_turn_holding_the_typed_number_comes_first(tmp_path: Path, preset: str) -> None:
    numbers, turns = _orders(40)
    config = BENCH_PRESETS[preset]
    with Memory(path=tmp_path / "m.db", embedder=EDGE, config=config, warm=False) as memory:
        episodes = memory.add_many(turns, user_id="u", session_id="orders")
        for number, episode in zip(numbers, episodes, strict=True):
            hits = memory.search(f"when will order {number} arrive?", user_id="u", explain=True)
            assert hits[0].episode.id == episode.id
            assert "exact_match" in hits[0].channels
            assert [h.score for h in hits] == sorted((h.score for h in hits), reverse=True)


def test_without_the_guard_the_default_buries_half_of_them(tmp_path: Path) -> None:
    numbers, turns = _orders(40)
    config = BENCH_PRESETS["full-ranker"]
    with Memory(path=tmp_path / "m.db", embedder=EDGE, config=config, warm=False) as memory:
        episodes = memory.add_many(turns, user_id="u", session_id="orders")
        first = [
            memory.search(f"when will order {number} arrive?", user_id="u")[0].episode.id
            for number in numbers
        ]
    assert sum(f == e.id for f, e in zip(first, episodes, strict=True)) <= 30  # 20 today


def test_a_name_many_turns_hold_changes_nothing(tmp_path: Path) -> None:
    turns = [
        {"speaker": "Caroline", "content": f"I painted the harbour again, picture {i}"}
        for i in range(6)
    ] + [{"speaker": "Melanie", "content": "We went camping with the kids"}]
    guarded, plain = BENCH_PRESETS["full-ranker-exact"], BENCH_PRESETS["full-ranker"]
    with Memory(path=tmp_path / "m.db", embedder=EDGE, warm=False) as memory:
        memory.add_many(turns, user_id="u", session_id="s1")
    question = "What did Caroline paint?"
    results = []
    for config in (guarded, plain):
        with Memory(path=tmp_path / "m.db", embedder=EDGE, config=config, warm=False) as memory:
            results.append([(h.episode.id, h.score) for h in memory.search(question, user_id="u")])
    assert results[0] == results[1]


def test_pinned_turns_keep_the_pipelines_order_among_themselves(monkeypatch) -> None:
    from types import SimpleNamespace

    from anamnesis.retrieve import exact
    from anamnesis.retrieve.fusion import Fused
    from anamnesis.store.base import Candidate

    monkeypatch.setattr(exact, "speakers_named", lambda request: [])
    holders = [Candidate("b", 2.0), Candidate("a", 1.0)]  # BM25's order: b, then a
    store = SimpleNamespace(lexical_search=lambda terms, scope, filters, limit: holders)
    request = SimpleNamespace(
        analysis=SimpleNamespace(text="What did my friend Zbigniew lend me?"),
        store=store,
        scope=None,
        filters=None,
    )
    fused = [Fused("x", 0.9), Fused("a", 0.5), Fused("y", 0.4), Fused("b", 0.3)]
    ranked = [f.episode_id for f in exact.exact_match(request, fused)]  # type: ignore[arg-type]
    assert ranked == ["a", "b", "x", "y"]
