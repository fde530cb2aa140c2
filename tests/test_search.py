"""Hybrid search: channels, fusion, explanations, neighbours, filters."""

from __future__ import annotations

import numpy as np
import pytest

from anamnesis import Memory, SearchConfig
from anamnesis.bench.presets import BENCH_PRESETS
from anamnesis.errors import InvalidInputError
from anamnesis.retrieve.fusion import fused_scores, weighted_rrf
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


def test_score_mix_lets_a_confident_channel_outvote_rank() -> None:
    # BM25 is sure of "a" (far above the rest); dense puts "a" third by a hair.
    lexical = [Candidate(i, s) for i, s in zip("abcde", [20.0, 2.1, 2.0, 1.9, 1.8], strict=True)]
    dense = [Candidate(i, s) for i, s in zip("bcade", [0.51, 0.505, 0.50, 0.25, 0.20], strict=True)]
    lists = {"lexical": lexical, "dense": dense}
    weights = {"lexical": 1.0, "dense": 1.0}
    assert weighted_rrf(lists, weights, k=60)[0].episode_id == "b"
    mixed = {f.episode_id: f.score for f in weighted_rrf(lists, weights, 60, score_mix=0.3)}
    assert max(mixed, key=mixed.get) == "a"

    def z(scores: list[float], i: int) -> float:
        return float((scores[i] - np.mean(scores)) / np.std(scores))

    expected_a = (0.7 / 61 + 0.3 * z([20.0, 2.1, 2.0, 1.9, 1.8], 0) / 60) + (
        0.7 / 63 + 0.3 * z([0.51, 0.505, 0.50, 0.25, 0.20], 2) / 60
    )
    assert mixed["a"] == pytest.approx(expected_a)


def test_score_mix_never_makes_a_vote_negative() -> None:
    # One far outlier below the rest: its z-score is deeply negative.
    scores = [1.0] * 20 + [-50.0]
    lexical = [Candidate(f"e{i}", s) for i, s in enumerate(scores)]
    fused = weighted_rrf({"lexical": lexical}, {}, k=60, score_mix=0.9)
    assert min(f.score for f in fused) == 0.0 and fused[-1].episode_id == "e20"


def test_score_mix_votes_by_rank_alone_for_lists_not_ordered_by_score() -> None:
    # The facts channel orders a history chain oldest first, not by score.
    lists = {"facts": [Candidate("old", 0.2), Candidate("new", 0.9)]}
    mixed = weighted_rrf(lists, {}, k=60, score_mix=0.5)
    assert [f.episode_id for f in mixed] == ["old", "new"]
    assert mixed[0].score == 0.5 / 61


@pytest.mark.parametrize("score_mix", [0.0, 0.2, 1.0])
def test_fused_scores_rank_as_weighted_rrf_does(score_mix: float) -> None:
    # The seed ranking of derived channels uses the cheaper form; it must not differ.
    rng = np.random.default_rng(7)
    lists = {
        name: [Candidate(f"e{i}", float(s)) for i, s in zip(ids, scores, strict=True)]
        for name, ids, scores in (
            (name, rng.choice(40, size=25, replace=False), np.sort(rng.random(25))[::-1])
            for name in ("lexical", "dense", "session")
        )
    }
    weights = {"lexical": 0.5, "dense": 2.0}
    expected = [(f.episode_id, f.score) for f in weighted_rrf(lists, weights, 60, score_mix)]
    assert fused_scores(lists, weights, 60, score_mix) == expected


def test_score_mix_out_of_range_is_refused(db_path, embedder) -> None:
    with pytest.raises(InvalidInputError, match="score_mix"):
        weighted_rrf({"lexical": [Candidate("a", 1.0)]}, {}, score_mix=1.5)
    with pytest.raises(InvalidInputError, match="score_mix"):
        Memory(db_path, embedder=embedder, config=SearchConfig(score_mix=-0.1))


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
    with Memory(path=db_path, embedder=embedder, config=BENCH_PRESETS["bm25"]) as mem:
        mem.add(["My dog loves the beach", "Quarterly taxes are due"], user_id="u")
        assert mem.search("puppy at the seaside", user_id="u") == []
    with Memory(path=db_path, embedder=embedder, config=BENCH_PRESETS["dense"]) as mem:
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
