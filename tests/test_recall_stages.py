"""Candidate-side stages of the read path (issue 5): query understanding, the derived
channels (speaker, entity, pseudo-relevance feedback, neighbours, session) and learned
fusion, on a real LoCoMo slice (see fixtures/README.md) with the real MiniLM."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import numpy as np
import pytest
from locomo_slice import load_slice

from anamnesis import Memory
from anamnesis.bench.presets import BENCH_PRESETS, plus, then
from anamnesis.config import SearchConfig
from anamnesis.errors import InvalidInputError
from anamnesis.retrieve.candidates import query_texts, seed_ranking, speakers_named
from anamnesis.retrieve.contextual import CONTEXT_WEIGHT
from anamnesis.retrieve.expansion import feedback_terms
from anamnesis.retrieve.fusion import Fused, LogisticFusion, learned_fusion, load_fusion_model
from anamnesis.retrieve.llm_decompose import parse_subqueries
from anamnesis.retrieve.pipeline import Retriever
from anamnesis.retrieve.stages import STAGES
from anamnesis.retrieve.understanding import (
    addressed_role,
    decompose,
    is_list_question,
    is_summary_request,
    named_speakers,
    names,
    question_type,
    strip_names,
)
from anamnesis.store.base import Candidate, Filters
from anamnesis.types import Scope

USER = Scope("conv-26")


# -- query understanding (pure) ------------------------------------------------------------------
@pytest.mark.parametrize(
    ("question", "kind"),
    [
        ("When did Caroline go to the LGBTQ support group?", "when"),
        ("How many times has Melanie gone to the beach?", "how-many"),
        ("Where did Caroline move from 4 years ago?", "where"),
        ("Would Caroline likely have Dr. Seuss books on her bookshelf?", "yes-no"),
        ("What is Caroline's identity?", "what"),
        ("Caroline's plans for the summer", "other"),
    ],
)
def test_question_type_comes_from_the_opening_words(question, kind):
    assert question_type(question) == kind


@pytest.mark.parametrize(
    ("question", "role"),
    [
        # LongMemEval-S and BEAM questions: the user's own turns hold the answer ...
        ("How many days passed between when I obtained my API key and the wireframe?", "user"),
        ("Could you show me how to implement a login feature?", "user"),
        ("Can you list the order in which I brought up aspects of my budget tracker?", "user"),
        # ... unless the question is about what the assistant said.
        ("Can you remind me of the Mayo Clinic video you recommended?", "assistant"),
        ("I'm going back to our previous chat about the Lost Temple one-shot.", "assistant"),
        ("What sealant did you suggest in your last answer?", "assistant"),
        # A summary covers both sides of the conversation.
        ("Can you give me a comprehensive summary of how my weather app progressed?", None),
    ],
)
def test_the_addressed_role_is_the_user_unless_asked_what_the_assistant_said(question, role):
    assert addressed_role(question) == role


@pytest.mark.parametrize(
    ("question", "listing"),
    [
        ("What activities does Melanie partake in?", True),
        ("How many times has Melanie gone to the beach?", True),
        ("What kinds of art does Melanie do?", True),
        ("What are some hobbies of John?", True),
        ("What is Caroline's identity?", False),
        ("What does Melanie do?", False),
        ("What was the name of his dog?", False),
    ],
)
def test_list_questions_ask_for_a_count_or_for_plural_things(question, listing):
    assert is_list_question(question) is listing


def test_names_are_capitalised_runs_without_question_words_or_possessives():
    assert names("What did Caroline's friends say about Little Women in New York?") == [
        "Caroline",
        "Little Women",
        "New York",
    ]
    assert names("What is the best way to relax?") == []


def test_named_speakers_are_the_known_speakers_the_question_mentions_in_order():
    known = ["Melanie", "Caroline"]
    assert named_speakers("What did Caroline's mother give Melanie?", known) == [
        "Caroline",
        "Melanie",
    ]
    assert named_speakers("What did caroline paint?", known) == ["Caroline"]
    assert named_speakers("What did Jon paint?", known) == []
    assert named_speakers("Where does Caroline live?", ["Caroline Smith"]) == ["Caroline Smith"]


@pytest.mark.parametrize(
    ("question", "known", "named"),
    [
        ("What did Muhammad say about the trip?", ["Muhhamed", "Sara"], ["Muhhamed"]),
        ("Where is Mohammed's new office?", ["Muhhamed"], ["Muhhamed"]),
        ("How many times did Audrey and Andew hike?", ["Audrey", "Andrew"], ["Audrey", "Andrew"]),
        ("When did Melany start painting?", ["Melanie", "Caroline"], ["Melanie"]),
        # Short names differ in a letter and are other people; so do other initials.
        ("When did Jen go hiking?", ["Jon", "Gina"], []),
        ("What did Katherine bake?", ["Catherine"], []),
        # A speaker's own name wins over another speaker's respelling of it.
        ("What did Joanna tell Jolene?", ["Joanna", "Jolene", "Joanne"], ["Joanna", "Jolene"]),
    ],
)
def test_a_respelled_name_still_names_the_speaker(question, known, named):
    assert named_speakers(question, known) == named


def test_speaker_names_are_dropped_from_lexical_terms_but_never_all_terms():
    assert strip_names(["caroline", "research"], ["Caroline"]) == ["research"]
    assert strip_names(["caroline"], ["Caroline"]) == ["caroline"]


def test_decomposition_splits_coordinated_names_several_questions_and_clauses():
    assert decompose("What do Jon and Gina both have in common?") == [
        "What do Jon have in common?",
        "What do Gina have in common?",
    ]
    assert decompose("Where did she go? What did she buy?") == [
        "Where did she go?",
        "What did she buy?",
    ]
    assert decompose("When did Nate move and where did he live before?") == [
        "When did Nate move",
        "where did he live before?",
    ]
    assert decompose("What did Caroline research?") == []
    assert decompose("Did Caroline and Melanie's friends come?")  # names still coordinate


def test_feedback_terms_favour_words_shared_by_the_best_hits():
    hits = [
        "I went to a pottery class and made a bowl",
        "The pottery workshop was fun, I made a mug",
        "We talked about the weather",
    ]
    extra = feedback_terms(["class"], hits, 2, exclude=["melanie"])
    assert extra == ["made", "pottery"]
    assert feedback_terms(["class"], hits, 0) == []
    assert feedback_terms(["class"], [], 3) == []


# -- channels on a real conversation -------------------------------------------------------------
@pytest.fixture(scope="module")
def conversation(tmp_path_factory, embedder):
    path = tmp_path_factory.mktemp("recall") / "conv26.db"
    with Memory(path=path, embedder=embedder) as memory:
        qa = load_slice(memory, USER.user_id)
        # Another tenant who talks about the same people: never a candidate for USER.
        memory.add_many(
            [
                {"speaker": "Caroline", "content": "I researched adoption agencies."},
                {"speaker": "Melanie", "content": "Caroline told me about her research."},
            ],
            user_id="someone-else",
            session_id="session_1",
        )
    return path, qa


@pytest.fixture
def open_memory(conversation, embedder):
    path, _ = conversation
    with Memory(path=path, embedder=embedder) as memory:
        yield memory


def _request(memory, config: SearchConfig, question: str, filters: Filters | None = None):
    retriever = Retriever(memory.store, memory.embedder, config)
    return retriever, retriever.request(question, USER, filters or Filters())


def _episodes(memory, candidates):
    return memory.store.get_episodes([c.episode_id for c in candidates], USER)


def test_speaker_channels_search_only_the_named_speakers_turns(open_memory):
    config = BENCH_PRESETS["full"]
    _, request = _request(open_memory, config, "What did Caroline research?")
    assert speakers_named(request) == ["Caroline"]
    for name in ("speaker_lexical", "speaker_dense"):
        found = _episodes(open_memory, request.channel(name, 20))
        assert found and {e.speaker for e in found} == {"Caroline"}
    # The answer (D2:8, Caroline on adoption agencies) comes first among her turns.
    top = _episodes(open_memory, request.channel("speaker_lexical", 5))
    assert "D2:8" in [e.metadata["dia_id"] for e in top]


def test_speaker_channels_cover_every_named_speaker_and_stay_in_scope(open_memory):
    _, request = _request(
        open_memory, BENCH_PRESETS["full"], "What do Caroline and Melanie both like?"
    )
    for name in ("speaker_lexical", "speaker_dense"):
        candidates = request.channel(name, 10)
        found = _episodes(open_memory, candidates)
        assert len(found) == len(candidates)  # every candidate is inside USER's scope
        assert {e.speaker for e in found[:2]} == {"Caroline", "Melanie"}


def test_speaker_channels_are_silent_without_a_named_speaker_or_under_a_speaker_filter(
    open_memory,
):
    _, request = _request(open_memory, BENCH_PRESETS["full"], "Who went camping?")
    assert request.channel("speaker_dense", 10) == []
    _, request = _request(
        open_memory,
        BENCH_PRESETS["full"],
        "What did Caroline research?",
        Filters(speaker="Melanie"),
    )
    assert request.channel("speaker_lexical", 10) == []


def test_the_speakers_feature_drops_speaker_names_from_the_lexical_query(open_memory):
    retriever, request = _request(open_memory, BENCH_PRESETS["full"], "What did Caroline research?")
    plain_retriever, plain = _request(
        open_memory, BENCH_PRESETS["hybrid"], "What did Caroline research?"
    )
    lexical = _episodes(open_memory, request.channel("lexical", 50))
    assert all("research" in e.content.lower() for e in lexical)
    assert len(plain.channel("lexical", 50)) > len(lexical)  # "caroline" matched more turns


def test_role_channels_search_the_addressed_roles_turns_in_scope(tmp_path, embedder):
    chat = [
        {"role": "user", "content": "My sister recommended a hotel called the Grand Lisboa."},
        {"role": "assistant", "content": "For Lisbon I recommend the Hotel Avenida Palace."},
        {"role": "user", "content": "Thanks, which hotel has a pool?"},
    ]
    note = "Note: my sister's hotel in Lisbon was lovely."  # added without a role
    config = BENCH_PRESETS["full-role"]
    with Memory(path=tmp_path / "chat.db", embedder=embedder) as memory:
        memory.add_many(chat, user_id=USER.user_id, session_id="s1")
        memory.add_many(chat, user_id="someone-else", session_id="s1")
        memory.add(note, user_id=USER.user_id)
        for question, role in [
            ("Which hotel did my sister recommend?", "user"),
            ("Which hotel did you recommend for Lisbon?", "assistant"),
        ]:
            _, request = _request(memory, config, question)
            for name in ("role_lexical", "role_dense"):
                found = _episodes(memory, request.channel(name, 10))
                assert len(found) == len(request.channel(name, 10))  # all in USER's scope
                # The addressed side's turns, and turns without a role (the note).
                assert {e.role for e in found} == {role, None}
        # A search the caller already restricted to a role, or a summary request, leaves
        # the channels silent.
        _, request = _request(memory, config, "Which hotel?", Filters(role="assistant"))
        assert request.channel("role_dense", 10) == []
        _, request = _request(memory, config, "Summarise what we said about hotels.")
        assert request.channel("role_lexical", 10) == request.channel("role_dense", 10) == []

        # The role_prior stage scales the other role's turns down (here by half).
        _, request = _request(
            memory, BENCH_PRESETS["rerank-role"], "Which hotel did my sister pick?"
        )
        found = memory.store.get_episodes(
            [c.episode_id for c in request.channel("dense", 10)], USER
        )
        roles = {e.id: e.role for e in found}
        fused = STAGES["role_prior"](request, [Fused(i, 1.0) for i in roles])
        assert {f.score for f in fused if roles[f.episode_id] != "assistant"} == {1.0}
        assert {f.score for f in fused if roles[f.episode_id] == "assistant"} == {0.5}
        assert roles[fused[-1].episode_id] == "assistant"


def test_role_channels_read_the_deep_pools_and_never_search_the_scope_again(
    tmp_path, embedder, monkeypatch
):
    # Few of the user's own turns among many of the assistant's: the pools, searched
    # four times deeper than the channels, hold some of them, and those are what the
    # role channels propose, in the pools' order, without searching again.
    assistant = [
        {"role": "assistant", "content": f"Hotel option {i}: a room near the old harbour."}
        for i in range(240)
    ]
    mine = [
        {"role": "user", "content": f"My sister liked hotel number {i} by the harbour."}
        for i in range(6)
    ]
    with Memory(path=tmp_path / "chat.db", embedder=embedder) as memory:
        memory.add_many(
            assistant[:120] + mine + assistant[120:], user_id=USER.user_id, session_id="s1"
        )
        config = BENCH_PRESETS["full-role"].with_(candidates=20)
        _, request = _request(memory, config, "Which hotel did my sister like?")
        pools = {
            "role_lexical": request.channel("lexical", 20) and request.memo[("pool", "lexical")],
            "role_dense": request.channel("dense", 20) and request.memo[("pool", "dense")],
        }
        searches = []
        for name in ("lexical_search", "dense_search"):
            monkeypatch.setattr(memory.store, name, lambda *a, _n=name: searches.append(_n) or [])
        for name, pool in pools.items():
            roles = {e.id: e.role for e in _episodes(memory, pool)}
            expected = [c for c in pool if roles[c.episode_id] != "assistant"][:20]
            assert 0 < len(expected) < 20
            assert request.channel(name, 20) == expected
        assert searches == []


def test_dense_context_scores_each_turn_with_its_neighbours_vectors(tmp_path, embedder):
    chat = [
        {"speaker": "Jolene", "content": "I finally finished the quilt for my sister."},
        {"speaker": "Jolene", "content": "Where did you meet your new neighbour Anna?"},
        {"speaker": "Deborah", "content": "It happened at yoga in the park."},
        {"speaker": "Jolene", "content": "My car needs new tyres before winter."},
    ]
    with Memory(path=tmp_path / "chat.db", embedder=embedder) as memory:
        added = memory.add_many(chat, user_id=USER.user_id, session_id="s1")
        ids = [e.id for e in added]
        config = plus(BENCH_PRESETS["hybrid"], "dense_context", 1.0)
        _, request = _request(memory, config, "Where did Deborah meet her neighbour Anna?")
        found = request.channel("dense_context", 10)
        assert len(found) == len(chat)
        # The reply is read with the question it answers, so it scores above its plain
        # cosine and comes next to that question.
        plain = {c.episode_id: c.score for c in request.channel("dense", 10)}
        scores = {c.episode_id: c.score for c in found}
        assert scores[ids[2]] > plain[ids[2]]
        assert {c.episode_id for c in found[:2]} == {ids[1], ids[2]}
        # Its score is the cosine of (own + w * previous + w * next), renormalised.
        vectors = memory.store.vectors_for_hashes(
            [e.content_hash for e in added], Scope(added[0].user_id)
        )
        v = [vectors[e.content_hash] for e in added]
        expected = v[2] + CONTEXT_WEIGHT * (v[1] + v[3])
        expected = float(expected @ request.query_vector / np.linalg.norm(expected))
        assert scores[ids[2]] == pytest.approx(expected)


def test_role_channels_are_empty_where_episodes_carry_no_role(open_memory):
    _, request = _request(open_memory, BENCH_PRESETS["full-role"], "What did Caroline research?")
    assert request.channel("role_lexical", 10) == request.channel("role_dense", 10) == []


def _beside_seeds(memory, channel: str):
    """The request, its seed episodes and ``channel``'s proposals, which are never seeds."""
    config = BENCH_PRESETS["full"]
    _, request = _request(memory, config, "What did Caroline research?")
    seeds = [i for i, _ in seed_ranking(request)[: config.seeds]]
    proposed = request.channel(channel, 50)
    assert proposed and not set(seeds) & {c.episode_id for c in proposed}
    return request, memory.store.get_episodes(seeds, USER), proposed


def test_neighbours_are_adjacent_turns_of_the_best_seeds_and_never_seeds(open_memory):
    _, seed_episodes, proposed = _beside_seeds(open_memory, "neighbours")
    for episode in _episodes(open_memory, proposed):
        assert any(
            s.session_id == episode.session_id and abs(s.turn_index - episode.turn_index) == 1
            for s in seed_episodes
        )
    scores = [c.score for c in proposed]
    assert scores == sorted(scores, reverse=True)


def test_neighbours_respect_the_filters_of_the_search(open_memory):
    config = BENCH_PRESETS["full"].with_(seeds=3)
    session_2 = open_memory.store.list_episodes(
        Scope(USER.user_id, None, "session_2"), limit=1, offset=0
    )[0][0]
    before_session_2 = Filters(event_before=session_2.event_time)
    _, request = _request(open_memory, config, "What did Caroline research?", before_session_2)
    found = _episodes(open_memory, request.channel("neighbours", 50))
    assert found and {e.session_id for e in found} == {"session_1"}


def test_replies_are_the_turns_after_seed_hits_that_ask_something(open_memory):
    request, seed_episodes, proposed = _beside_seeds(open_memory, "replies")
    for episode in _episodes(open_memory, proposed):
        (asked,) = [
            s
            for s in seed_episodes
            if s.session_id == episode.session_id and s.turn_index == episode.turn_index - 1
        ]
        assert "?" in asked.content
    neighbours = {c.episode_id for c in request.channel("neighbours", 50)}
    assert {c.episode_id for c in proposed} < neighbours  # a narrower neighbours channel


def test_in_a_chat_replies_come_only_from_the_side_the_question_addresses(tmp_path, embedder):
    chat = [
        {"role": "user", "content": "Which paint colour would suit my kitchen walls?"},
        {"role": "assistant", "content": "A soft sage green would suit most kitchens."},
        {"role": "assistant", "content": "What colour are your kitchen cupboards now?"},
        {"role": "user", "content": "They are bright yellow, my favourite."},
    ]
    config = BENCH_PRESETS["full-replies"].with_(seeds=2)
    with Memory(path=tmp_path / "chat.db", embedder=embedder) as memory:
        memory.add_many(chat, user_id=USER.user_id, session_id="s1")
        _, request = _request(memory, config, "What colour are the kitchen cupboards now?")
        seeds = _episodes(memory, [Candidate(i, s) for i, s in seed_ranking(request)[:2]])
        replies = _episodes(memory, request.channel("replies", 10))
    # Both best hits ask something: the user's question (answered by the assistant, whose
    # words are not the user's) and the assistant's (answered by the user: proposed).
    assert sorted(e.content for e in seeds) == sorted([chat[0]["content"], chat[2]["content"]])
    assert [e.content for e in replies] == [chat[3]["content"]]


def test_question_prior_ranks_a_turn_that_only_asks_below_the_answer(tmp_path, embedder):
    chat = [
        {"speaker": "Joanna", "content": "So what's your favourite video game?"},
        {"speaker": "Nate", "content": "Xenoblade Chronicles is my favourite game by far."},
        {"speaker": "Joanna", "content": "My sister bought a new bike last week."},
    ]
    question = "What is Nate's favourite video game?"
    with Memory(path=tmp_path / "chat.db", embedder=embedder) as memory:
        added = memory.add_many(chat, user_id=USER.user_id, session_id="s1")
        asks, answer = added[0].id, added[1].id
        without = BENCH_PRESETS["hybrid"]
        _, request = _request(memory, without, question)
        plain = [c.episode_id for c in request.channel("lexical", 10)]
        assert plain.index(asks) < plain.index(answer)  # the asking turn shares more words
        first = Retriever(memory.store, memory.embedder, without).search(
            question, USER, Filters(), 3, False
        )
        assert first[0].episode.id == asks
        config = then(without, "question_prior").with_(
            stage_options={"question_prior": {"factor": 0.5}}
        )
        fused = STAGES["question_prior"](request, [Fused(i, 1.0) for i in (asks, answer)])
        assert [(f.episode_id, f.score) for f in fused] == [(answer, 1.0), (asks, 0.6)]
        retriever, request = _request(memory, config, question)
        fused = STAGES["question_prior"](request, [Fused(i, 1.0) for i in (asks, answer)])
        assert [(f.episode_id, f.score) for f in fused] == [(answer, 1.0), (asks, 0.5)]
        hits = retriever.search(question, USER, Filters(), 3, False)
        assert hits[0].episode.id == answer
        # A turn longer than ``words`` that ends with "?" tells something too: untouched.
        longer = without.with_(
            stages=("question_prior",), stage_options={"question_prior": {"words": 5}}
        )
        _, request = _request(memory, longer, question)
        fused = STAGES["question_prior"](request, [Fused(i, 1.0) for i in (asks, answer)])
        assert {f.score for f in fused} == {1.0}
        # In a user–assistant chat the user's questions carry facts: untouched too.
        (gift,) = memory.add(
            "Can you suggest a gift for my sister?", role="user", user_id=USER.user_id
        )
        _, request = _request(memory, config, question)
        fused = STAGES["question_prior"](request, [Fused(gift.id, 1.0), Fused(asks, 1.0)])
        assert [(f.episode_id, f.score) for f in fused] == [(gift.id, 1.0), (asks, 0.5)]
        every = config.with_(stage_options={"question_prior": {"factor": 0.5, "roles": True}})
        _, request = _request(memory, every, question)
        fused = STAGES["question_prior"](request, [Fused(gift.id, 1.0)])
        assert fused[0].score == 0.5


def test_dense_prf_searches_with_the_question_moved_towards_its_best_hits(open_memory):
    _, request = _request(open_memory, BENCH_PRESETS["full"], "What did Melanie paint?")
    moved = request.channel("dense_prf", 20)
    plain = request.channel("dense", 20)
    assert len(moved) == 20 and [c.episode_id for c in moved] != [c.episode_id for c in plain]
    scores = [c.score for c in moved]
    assert scores == sorted(scores, reverse=True)


def test_session_channel_returns_turns_of_the_best_sessions_only(open_memory):
    config = BENCH_PRESETS["full"].with_(sessions=2)
    _, request = _request(open_memory, config, "When did Melanie paint a sunrise?")
    found = _episodes(open_memory, request.channel("session", 50))
    assert found and len({e.session_id for e in found}) <= 2
    assert "D1:12" in [e.metadata["dia_id"] for e in found]  # the answer's session
    # A summary covers every session: the channel leaves it to the others.
    _, request = _request(open_memory, config, "Can you summarise what Melanie painted?")
    assert is_summary_request(request.analysis.text)
    assert request.channel("session", 50) == []


def test_session_channel_can_open_the_other_sides_turns_at_a_share_of_their_score(
    tmp_path, embedder
):
    chat = [
        {"role": "user", "content": "My sister recommended a hotel called the Grand Lisboa."},
        {"role": "assistant", "content": "For Lisbon I recommend the Hotel Avenida Palace."},
        {"role": "user", "content": "Thanks, which hotel has a pool?"},
        {"role": "assistant", "content": "The Avenida Palace has an indoor pool."},
    ]
    question = "Which hotel did my sister recommend?"  # addresses the user's turns
    with Memory(path=tmp_path / "chat.db", embedder=embedder) as memory:
        memory.add_many(chat, user_id=USER.user_id, session_id="s1")
        listed, _ = memory.store.list_episodes(USER, limit=10, offset=0)
        roles = {e.id: e.role for e in listed}

        def session(**options):
            config = BENCH_PRESETS["full"].with_options("session", **options)
            return {
                c.episode_id: c.score
                for c in _request(memory, config, question)[1].channel("session", 10)
            }

        every = session()
        assert set(every) == set(roles)
        for share in (0.25, 0.5):
            scaled = session(other_role=share)
            for episode_id, score in every.items():
                factor = share if roles[episode_id] == "assistant" else 1.0
                assert scaled[episode_id] == pytest.approx(factor * score)
        assert {roles[i] for i in session(other_role=0.0)} == {"user"}
        # A chat without sides, or a question that addresses both, is left as it was.
        _, request = _request(
            memory,
            BENCH_PRESETS["full"].with_options("session", other_role=0.5),
            "Can you summarise what we said about hotels?",
        )
        assert request.channel("session", 10) == []  # a summary: the channel is silent
        with pytest.raises(InvalidInputError, match="other_role"):
            session(other_role=1.5)


def test_session_channel_can_act_in_one_kind_of_chat_only(open_memory, tmp_path, embedder):
    # Between named people (LoCoMo's speakers) a channel for "speakers" chats proposes
    # what the channel for every chat does; in a user–assistant chat it proposes nothing.
    def session(memory, question, **options):
        config = BENCH_PRESETS["full"].with_options("session", **options)
        return _request(memory, config, question)[1].channel("session", 10)

    question = "When did Melanie paint a sunrise?"
    assert session(open_memory, question, chats=("speakers",)) == session(open_memory, question)
    assert session(open_memory, question, chats=("roles",)) == []
    chat = [
        {"role": "user", "content": "My sister recommended a hotel called the Grand Lisboa."},
        {"role": "assistant", "content": "For Lisbon I recommend the Hotel Avenida Palace."},
    ]
    with Memory(path=tmp_path / "chat.db", embedder=embedder) as memory:
        memory.add_many(chat, user_id=USER.user_id, session_id="s1")
        question = "Which hotel did my sister recommend?"
        assert session(memory, question, chats=("roles",)) == session(memory, question) != []
        assert session(memory, question, chats=("speakers",)) == []
        with pytest.raises(InvalidInputError, match="chats"):
            session(memory, question, chats=("people",))


def test_prf_expands_the_query_with_terms_from_the_best_lexical_hits(open_memory):
    _, request = _request(open_memory, BENCH_PRESETS["full"], "What did Melanie paint?")
    expanded = request.channel("prf", 50)
    lexical = request.channel("lexical", 50)
    assert expanded and {c.episode_id for c in expanded} != {c.episode_id for c in lexical}


def test_prf_over_the_rankings_reorders_them_without_searching_the_scope_again(
    open_memory, monkeypatch
):
    question = "What did Melanie paint?"
    over_scope = BENCH_PRESETS["full"].with_(pool=2, candidates=10)
    over_rankings = over_scope.with_options("prf", over="rankings")
    _, whole = _request(open_memory, over_scope, question)
    _, request = _request(open_memory, over_rankings, question)
    pooled = {c.episode_id for name in ("lexical", "dense") for c in _pools(request, name, 10)}
    searches = []
    monkeypatch.setattr(open_memory.store, "lexical_search", lambda *a: searches.append(a) or [])
    reordered = request.channel("prf", 10)
    assert searches == []
    # The same expanded query, ranked among the pools' episodes: the whole scope's
    # ranking with every episode outside them left out.
    monkeypatch.undo()
    everything = whole.channel("prf", 10_000)
    expected = [c.episode_id for c in everything if c.episode_id in pooled][:10]
    assert [c.episode_id for c in reordered] == expected
    assert {c.episode_id for c in everything[:10]} - pooled  # it did leave some out
    with pytest.raises(InvalidInputError, match="prf over"):
        _request(open_memory, over_scope.with_options("prf", over="all"), question)[1].channel(
            "prf", 10
        )


def _pools(request, name: str, limit: int):
    request.channel(name, limit)
    return request.memo[("pool", name)]


def test_entity_channel_matches_non_speaker_names_only(open_memory):
    _, request = _request(
        open_memory, BENCH_PRESETS["full"], "When did Caroline go to the LGBTQ support group?"
    )
    found = _episodes(open_memory, request.channel("entity", 50))
    assert found and all("lgbtq" in e.content.lower() for e in found)
    _, request = _request(open_memory, BENCH_PRESETS["full"], "What did Caroline research?")
    assert request.channel("entity", 50) == []


def test_decomposed_questions_run_each_subquery_through_dense(open_memory):
    config = BENCH_PRESETS["hybrid"].with_(query=("decompose",))
    _, request = _request(open_memory, config, "What do Caroline and Melanie both paint?")
    request.channel("dense", 10)
    assert [k for k in request.memo if k[0] == "vector"] == [
        ("vector", "What do Caroline paint?"),
        ("vector", "What do Melanie paint?"),
    ]


def _recall(memory, preset, qa, k=10):
    retriever = Retriever(memory.store, memory.embedder, BENCH_PRESETS[preset])
    found = total = 0
    for item in qa:
        hits = retriever.search(item["question"], USER, Filters(), k, False)
        found += len(set(item["evidence"]) & {h.episode.metadata["dia_id"] for h in hits})
        total += len(item["evidence"])
    return found / total


def test_the_full_preset_finds_more_evidence_than_hybrid_on_the_slice(conversation, open_memory):
    _, qa = conversation
    hybrid = _recall(open_memory, "hybrid", qa)
    full = _recall(open_memory, "full", qa)
    assert full >= hybrid
    assert _recall(open_memory, "full", qa, 50) >= 0.9


# -- learned fusion ----------------------------------------------------------------------------
def test_logistic_fusion_scores_with_its_coefficients_and_round_trips():
    model = LogisticFusion(
        channels=("lexical", "dense"),
        mean=(0.0, 0.0, 0.0, 0.0),
        scale=(1.0, 1.0, 1.0, 1.0),
        coef=(0.0, 0.0, 1.0, 0.0),  # only the dense reciprocal rank counts
        intercept=0.0,
    )
    lists = {
        "lexical": [Candidate("a", 9.0), Candidate("b", 3.0)],
        "dense": [Candidate("b", 0.8), Candidate("a", 0.5)],
    }
    fused = learned_fusion(lists, model)
    assert [f.episode_id for f in fused] == ["b", "a"]
    assert fused[0].channels["lexical"].rank == 2
    assert LogisticFusion.from_dict(json.loads(json.dumps(model.to_dict()))) == model


def test_the_bundled_fusion_model_loads_and_an_unknown_fusion_is_refused(open_memory):
    model = load_fusion_model(BENCH_PRESETS["full"].fusion_model)
    assert len(model.coef) == 2 * len(model.channels)
    with pytest.raises(InvalidInputError):
        Retriever(open_memory.store, open_memory.embedder, SearchConfig(fusion="magic"))
    with pytest.raises(InvalidInputError):
        Retriever(
            open_memory.store,
            open_memory.embedder,
            SearchConfig(fusion="learned", fusion_model="no-such-model.json"),
        )


# -- the LLM-only query stages: HyDE, decomposition by an LLM ------------------------------------
@dataclass
class FakeLLM:
    """An OpenAI-compatible endpoint on loopback that answers every call with ``reply``
    and records the prompts it was asked."""

    reply: str = ""
    asked: list[str] = field(default_factory=list)


@pytest.fixture
def llm(monkeypatch) -> Iterator[FakeLLM]:
    from anamnesis.bench import qa

    fake = FakeLLM()

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:  # noqa: N802
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            fake.asked.append(body["messages"][-1]["content"])
            data = json.dumps({"choices": [{"message": {"content": fake.reply}}]}).encode()
            self.send_response(200)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    monkeypatch.setenv(qa.BASE_URL_ENV, f"http://127.0.0.1:{server.server_address[1]}/v1")
    monkeypatch.setenv(qa.MODEL_ENV, "fake-model")
    try:
        yield fake
    finally:
        server.shutdown()
        server.server_close()


@pytest.mark.parametrize(
    "config", [SearchConfig(channels=("hyde",)), SearchConfig(query=("decompose-llm",))]
)
def test_llm_stages_need_a_configured_llm(open_memory, monkeypatch, config):
    from anamnesis.bench import qa

    monkeypatch.delenv(qa.BASE_URL_ENV, raising=False)
    with pytest.raises(InvalidInputError, match="ANAMNESIS_LLM_BASE_URL"):
        Retriever(open_memory.store, open_memory.embedder, config)


def test_an_unknown_query_feature_is_refused(open_memory):
    with pytest.raises(InvalidInputError, match="query feature.*decompse"):
        Retriever(open_memory.store, open_memory.embedder, SearchConfig(query=("decompse",)))


def test_hyde_searches_with_the_llms_hypothetical_answer(open_memory, llm):
    llm.reply = "I've been looking into adoption agencies, it's a big step for me."
    config = SearchConfig(channels=("hyde",))
    _, request = _request(open_memory, config, "What did Caroline research?")
    top = _episodes(open_memory, request.channel("hyde", 3))
    assert len(llm.asked) == 1 and "What did Caroline research?" in llm.asked[0]
    assert "D2:8" in [e.metadata["dia_id"] for e in top]


def test_llm_subqueries_are_the_lines_of_its_reply():
    question = "What do Caroline and Melanie paint?"
    reply = "1. What does Caroline paint?\n\n- What does Melanie paint?\n2) " + question
    assert parse_subqueries(reply, question, 4) == [
        "What does Caroline paint?",
        "What does Melanie paint?",
    ]
    assert parse_subqueries(question, question, 4) == []  # one question: nothing to add
    assert parse_subqueries("a?\nb?\nc?", question, 2) == ["a?", "b?"]


def test_llm_subqueries_run_through_the_channels_after_the_rules(open_memory, llm):
    llm.reply = "What did Caroline research?\nWhich agencies did Caroline look into?"
    config = BENCH_PRESETS["hybrid"].with_(query=("decompose", "decompose-llm"))
    question = "What did Caroline research, and what do Caroline and Melanie paint?"
    _, request = _request(open_memory, config, question)
    assert query_texts(request) == [
        question,
        "What did Caroline research, and what do Caroline paint?",
        "What did Caroline research, and what do Melanie paint?",
        "What did Caroline research?",
        "Which agencies did Caroline look into?",
    ]
    with_llm = _episodes(open_memory, request.channel("lexical", 10))
    request.channel("dense", 10)
    assert len(llm.asked) == 1  # one call per search, shared by the channels
    assert question in llm.asked[0]
    assert ("vector", "Which agencies did Caroline look into?") in request.memo
    # The LLM's sub-question lifts the adoption agencies turn (D2:8) above where the
    # rules' sub-queries alone put it.
    _, rules_only = _request(open_memory, config.with_(query=("decompose",)), question)
    without = _episodes(open_memory, rules_only.channel("lexical", 10))
    rank = [e.metadata["dia_id"] for e in with_llm].index("D2:8")
    assert rank < [e.metadata["dia_id"] for e in without].index("D2:8")
