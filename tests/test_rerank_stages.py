"""Post-fusion rerankers and filters: what each stage does to a real search."""

from __future__ import annotations

from datetime import UTC, datetime

import numpy as np
import pytest
from store_fixtures import postgres_schema_url_fixture  # noqa: F401  (registered fixture)

from anamnesis import Memory, SearchConfig
from anamnesis.bench.presets import BENCH_PRESETS
from anamnesis.errors import InvalidInputError
from anamnesis.retrieve.filters import rejects
from anamnesis.retrieve.rerank import fingerprints, surprise, zscore_sigmoid
from anamnesis.retrieve.stages import STAGES

HYBRID = BENCH_PRESETS["hybrid"]


def _with(stages: tuple[str, ...], **options: dict) -> SearchConfig:
    return HYBRID.with_(stages=stages, stage_options=options)


def test_every_stage_is_registered_under_its_configured_name() -> None:
    assert {"memx", "surprise", "dedup", "abstain", "cross-encoder", "ensemble-e5"} <= set(STAGES)
    for name, config in BENCH_PRESETS.items():
        assert set(config.stages) <= set(STAGES), name


def test_unknown_stage_names_are_refused(db_path, embedder) -> None:
    with pytest.raises(InvalidInputError, match="unknown search stage"):
        Memory(path=db_path, embedder=embedder, config=_with(("rerank-magic",)))


# -- MemX four-factor ------------------------------------------------------------------------


def test_zscore_sigmoid_is_calibrated_and_keeps_the_order() -> None:
    raw = np.array([0.9, 0.1, 0.5, 0.3])
    calibrated = zscore_sigmoid(raw)
    assert list(np.argsort(-calibrated)) == list(np.argsort(-raw))
    assert ((calibrated > 0) & (calibrated < 1)).all()
    flat = np.array([0.4, 0.4])
    assert (zscore_sigmoid(flat) == flat).all()  # std < 1e-6: left alone (MemX Eq. 4)


def test_memx_prefers_the_recent_of_two_equally_relevant_episodes(db_path, embedder) -> None:
    asked = datetime(2024, 6, 1, tzinfo=UTC)
    with Memory(path=db_path, embedder=embedder, config=_with(("memx",))) as mem:
        mem.add(
            [
                {"content": "My favourite band is Arcade Fire", "event_time": "2022-01-10"},
                {"content": "My favourite band is Arcade Fire", "event_time": "2024-05-20"},
            ],
            user_id="u",
        )
        hits = mem.search("favourite band", user_id="u", now=asked)
    assert hits[0].episode.event_time.year == 2024
    assert 0 < hits[-1].score < hits[0].score < 1  # ŝ is a calibrated score


def test_memx_importance_annotation_lifts_an_episode(db_path, embedder) -> None:
    config = _with(("memx",), memx={"weights": {"recency": 0.0}})
    with Memory(path=db_path, embedder=embedder, config=config) as mem:
        mem.add(
            [
                {"content": "The wifi password is in the drawer"},
                {"content": "The wifi password is in the drawer", "metadata": {"importance": 1.0}},
            ],
            user_id="u",
        )
        hits = mem.search("wifi password", user_id="u")
    assert hits[0].episode.metadata == {"importance": 1.0}


# -- True Memory surprise --------------------------------------------------------------------


def test_fingerprints_are_numbers_dates_proper_nouns_and_event_words() -> None:
    found = fingerprints("Yes! We went to Paris with Mel in May 2023 and adopted a puppy.")
    assert found == {"paris", "mel", "may", "2023", "adopted"}
    assert "yes" not in found  # a capital at the start of a sentence is not a name


def test_surprise_is_the_share_of_new_fingerprints() -> None:
    assert surprise("We moved to Porto in 2021", {"porto"}) == pytest.approx(2 / 3)
    assert surprise("ok sounds good", set()) == 0.0


def test_surprise_stage_lifts_the_turn_that_brings_new_facts(db_path, embedder) -> None:
    turns = [
        "I started a pottery class in Porto",
        "I started a pottery class in Porto",  # repeats what the session already said
        "We talked about my pottery class, Jon joined in March 2023 at Clayworks",
    ]
    messages = [{"content": t, "session_id": "s1"} for t in turns]
    base = None
    for config in (HYBRID, _with(("surprise",))):
        with Memory(path=db_path, embedder=embedder, config=config) as mem:
            if base is None:
                mem.add(messages, user_id="u")
            hits = mem.search("pottery class", user_id="u")
            ranks = {h.episode.turn_index: r for r, h in enumerate(hits)}
            if base is None:
                base = ranks
    assert ranks[2] < base[2] or ranks[2] == 0
    assert ranks[2] < ranks[1]  # the bare repeat carries nothing new


# -- dedup -------------------------------------------------------------------------------------


def test_dedup_keeps_the_best_of_repeated_statements(db_path, embedder) -> None:
    with Memory(path=db_path, embedder=embedder, config=_with(("dedup",))) as mem:
        mem.add(
            [
                "I love hiking in the Alps",
                "I love hiking in the Alps",  # same text, same speaker: same hash
                "I love hiking in the Alps!",  # near-duplicate: cosine above 0.97
                "I love hiking in the Rocky Mountains with my brother",
            ],
            user_id="u",
            session_id="s1",
        )
        contents = [h.episode.content for h in mem.search("hiking", user_id="u")]
    assert contents.count("I love hiking in the Alps") == 1
    assert "I love hiking in the Alps!" not in contents
    assert "I love hiking in the Rocky Mountains with my brother" in contents


def test_a_repeat_in_another_session_is_kept_unless_scope_is_all(db_path, embedder) -> None:
    messages = [
        {"content": "I need new sandals with better straps", "session_id": "march"},
        {"content": "I need new sandals with better straps!", "session_id": "june"},
    ]
    with Memory(path=db_path, embedder=embedder, config=_with(("dedup",))) as mem:
        mem.add(messages, user_id="u")
        assert len(mem.search("sandals", user_id="u")) == 2  # two dated events
    config = _with(("dedup",), dedup={"scope": "all"})
    with Memory(path=db_path, embedder=embedder, config=config) as mem:
        assert len(mem.search("sandals", user_id="u")) == 1


def test_dedup_by_hash_only_when_the_cosine_test_is_off(db_path, embedder) -> None:
    config = _with(("dedup",), dedup={"min_cosine": None})
    with Memory(path=db_path, embedder=embedder, config=config) as mem:
        mem.add(["I love hiking in the Alps", "I love hiking in the Alps!"], user_id="u")
        assert len(mem.search("hiking", user_id="u")) == 2


# -- abstention --------------------------------------------------------------------------------


def test_abstention_rule_r1_needs_both_signals() -> None:
    assert rejects({"top_cosine": 0.1, "lexical_hits": 0.0}, 0.3)
    assert not rejects({"top_cosine": 0.1, "lexical_hits": 2.0}, 0.3)
    assert not rejects({"top_cosine": 0.5, "lexical_hits": 0.0}, 0.3)
    assert rejects({"top_cosine": 0.1, "lexical_hits": 2.0}, 0.3, rule="cosine")


def test_abstain_returns_nothing_for_an_unrelated_question(db_path, embedder) -> None:
    config = _with(("abstain",), abstain={"min_cosine": 0.3})
    with Memory(path=db_path, embedder=embedder, config=config) as mem:
        mem.add(["My sister Lena plays the cello", "We adopted a cat named Miso"], user_id="u")
        assert mem.search("quantum chromodynamics lattice", user_id="u") == []
        assert mem.search("who plays the cello?", user_id="u")[0].episode.content.startswith(
            "My sister"
        )


def test_abstain_refuses_an_unknown_rule(db_path, embedder) -> None:
    config = _with(("abstain",), abstain={"rule": "vibes"})
    with Memory(path=db_path, embedder=embedder, config=config) as mem:
        mem.add(["hello"], user_id="u")
        with pytest.raises(InvalidInputError, match="abstain rule"):
            mem.search("hello", user_id="u")


# -- both backends -----------------------------------------------------------------------------


def test_stages_and_context_run_the_same_on_postgres(postgres_schema_url, embedder) -> None:
    config = _with(("dedup", "memx", "surprise", "abstain"), abstain={"min_cosine": 0.3})
    messages = [
        {"content": "I love hiking in the Alps", "session_id": "s1"},
        {"content": "I love hiking in the Alps", "session_id": "s1"},
        {"content": "Jon joined my hiking club in March 2023", "session_id": "s1"},
        {"content": "My sister Lena plays the cello", "session_id": "s2"},
    ]
    with Memory(url=postgres_schema_url, embedder=embedder, config=config) as mem:
        mem.add(messages, user_id="u")
        mem.add(["hiking secrets of another user"], user_id="other")
        contents = [h.episode.content for h in mem.search("hiking", user_id="u")]
        assert contents.count("I love hiking in the Alps") == 1
        assert "hiking secrets of another user" not in contents
        assert mem.search("quantum chromodynamics lattice", user_id="u") == []
        context = mem.context("hiking club", user_id="u")
        assert "Jon joined my hiking club" in context.text and "another user" not in context.text
