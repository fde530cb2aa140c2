"""Hybrid search: channels, fusion, explanations, neighbours, filters."""

from __future__ import annotations

from anamnesis import Memory, SearchConfig
from anamnesis.config import PRESETS
from anamnesis.retrieve.fusion import weighted_rrf
from anamnesis.retrieve.query import search_terms
from anamnesis.store.base import Candidate


def test_weighted_rrf_sums_weighted_reciprocal_ranks() -> None:
    fused = weighted_rrf(
        {"lexical": [Candidate("a", 9.0), Candidate("b", 5.0)], "dense": [Candidate("b", 0.9)]},
        {"lexical": 1.0, "dense": 2.0},
        k=60,
    )
    scores = {f.episode_id: f.score for f in fused}
    assert scores["a"] == 1 / 61
    assert scores["b"] == 1 / 62 + 2 / 61
    assert [f.episode_id for f in fused] == ["b", "a"]
    assert fused[0].channels["lexical"].rank == 2 and fused[0].channels["dense"].rank == 1


def test_search_terms_drop_stopwords_and_possessives() -> None:
    assert search_terms("What did Caroline's sister do at the support group?") == [
        "caroline",
        "sister",
        "support",
        "group",
    ]


def test_explain_reports_each_channels_rank(memory: Memory) -> None:
    memory.add(
        ["Melanie painted a sunrise over the lake", "I bought new running shoes"], user_id="u"
    )
    (hit, *_) = memory.search("painting of a sunrise", user_id="u", explain=True)
    assert hit.episode.content.startswith("Melanie painted")
    assert {"lexical", "dense"} <= set(hit.channels) <= set(memory.config.channels)
    assert hit.channels["dense"].rank == 1
    assert memory.search("painting of a sunrise", user_id="u")[0].channels == {}


def test_dense_channel_finds_paraphrases_lexical_cannot(db_path, embedder) -> None:
    with Memory(path=db_path, embedder=embedder, config=PRESETS["bm25"]) as mem:
        mem.add(["My dog loves the beach", "Quarterly taxes are due"], user_id="u")
        assert mem.search("puppy at the seaside", user_id="u") == []
    with Memory(path=db_path, embedder=embedder, config=PRESETS["dense"]) as mem:
        assert mem.search("puppy at the seaside", user_id="u")[0].episode.content.startswith(
            "My dog"
        )


def test_hits_carry_their_neighbouring_turns(memory: Memory) -> None:
    memory.add(
        [
            {"role": "user", "content": "Guess what I adopted yesterday"},
            {"role": "assistant", "content": "Tell me!"},
            {"role": "user", "content": "A kitten called Miso"},
        ],
        user_id="u",
        session_id="s",
    )
    hit = next(h for h in memory.search("Tell me!", user_id="u") if h.episode.content == "Tell me!")
    assert [e.content for e in hit.context] == [
        "Guess what I adopted yesterday",
        "A kitten called Miso",
    ]


def test_filters_apply_on_every_channel(memory: Memory) -> None:
    memory.add(
        [
            {
                "role": "user",
                "content": "I love hiking in the Alps",
                "event_time": "2023-01-05T00:00:00Z",
            },
            {
                "role": "assistant",
                "content": "Hiking in the Alps sounds lovely",
                "event_time": "2023-06-05T00:00:00Z",
            },
        ],
        user_id="u",
    )
    memory.add("Note: hiking boots for the Alps", user_id="u")  # no role
    by_role = memory.search("hiking Alps", user_id="u", filters={"role": "assistant"})
    assert [h.episode.role for h in by_role] == ["assistant"]
    not_assistant = memory.search("hiking Alps", user_id="u", filters={"not_role": "assistant"})
    assert sorted(str(h.episode.role) for h in not_assistant) == ["None", "user"]
    by_time = memory.search(
        "hiking Alps", user_id="u", filters={"event_before": "2023-03-01T00:00:00Z"}
    )
    assert [h.episode.role for h in by_time] == ["user"]


def test_metadata_filter(memory: Memory) -> None:
    memory.add({"content": "blue notebook", "metadata": {"topic": "office"}}, user_id="u")
    memory.add({"content": "blue ocean", "metadata": {"topic": "travel"}}, user_id="u")
    hits = memory.search("blue", user_id="u", filters={"metadata": {"topic": "travel"}})
    assert [h.episode.content for h in hits] == ["blue ocean"]


def test_unknown_channel_is_rejected(db_path, embedder) -> None:
    import pytest

    from anamnesis import InvalidInputError

    with pytest.raises(InvalidInputError, match="unknown search channel"):
        Memory(path=db_path, embedder=embedder, config=SearchConfig(channels=("psychic",)))
