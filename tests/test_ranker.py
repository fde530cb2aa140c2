"""The learned ranker (``learned_rerank``): its features of each fused candidate, the
logistic model that orders them, and the ``full-ranker`` preset, with the real MiniLM."""

from __future__ import annotations

import json

import numpy as np
import pytest

from anamnesis import Memory
from anamnesis.bench.fitting import newton_logistic
from anamnesis.bench.presets import BENCH_PRESETS
from anamnesis.errors import InvalidInputError
from anamnesis.retrieve.fusion import Fused
from anamnesis.retrieve.pipeline import Retriever
from anamnesis.retrieve.ranker import (
    EDGE_CHARS,
    FEATURES,
    NO_NEIGHBOUR_Z,
    EdgeView,
    RankerModel,
    candidate_features,
    learned_rerank,
    load_ranker,
    ranker_to_dict,
)
from anamnesis.store.base import Filters
from anamnesis.types import Scope

USER = Scope("ranker")
CHAT = [
    {"speaker": "Joanna", "content": "So what's your favourite video game?"},
    {"speaker": "Nate", "content": "Xenoblade Chronicles is my favourite video game by far."},
    {"speaker": "Joanna", "content": "My sister bought a new bike last week."},
    {"speaker": "Nate", "content": "I took my turtles to the lake yesterday, they loved it."},
]
QUESTION = "What is Nate's favourite video game?"


@pytest.fixture
def chat(tmp_path, embedder):
    with Memory(path=tmp_path / "chat.db", embedder=embedder) as memory:
        added = memory.add_many(CHAT, user_id=USER.user_id, session_id="s1")
        yield memory, [e.id for e in added]


def _request(memory, config, question=QUESTION):
    retriever = Retriever(memory.store, memory.embedder, config)
    return retriever, retriever.request(question, USER, Filters())


def _weighing(**weights: float) -> RankerModel:
    """A model that weighs only the named features (taken as they are)."""
    return RankerModel(
        features=FEATURES,
        mean=(0.0,) * len(FEATURES),
        scale=(1.0,) * len(FEATURES),
        coef=tuple(weights.get(name, 0.0) for name in FEATURES),
        intercept=0.0,
    )


def _model(tmp_path, **weights: float) -> str:
    """A ranker file whose models (both chat kinds) weigh only the named features."""
    model = _weighing(**weights)
    path = tmp_path / "model.json"
    path.write_text(json.dumps(ranker_to_dict({"speakers": model, "roles": model})))
    return str(path)


def test_features_describe_each_candidate(chat):
    memory, (asks, answer, bike, turtles) = chat
    retriever, request = _request(memory, BENCH_PRESETS["full-priors"])
    fused = retriever.rank(request)
    x = candidate_features(request, fused)
    assert x.shape == (len(fused), len(FEATURES)) and np.isfinite(x).all()
    row = {f.episode_id: dict(zip(FEATURES, x[i], strict=True)) for i, f in enumerate(fused)}
    # The question names Nate: his turns are marked, Joanna's are not.
    assert row[answer]["speaker_named"] == row[turtles]["speaker_named"] == 1.0
    assert row[asks]["speaker_named"] == row[bike]["speaker_named"] == 0.0
    # The question's content words: "nate", "favourite", "video", "game".
    assert row[answer]["coverage"] == 0.75 and row[bike]["coverage"] == 0.0
    assert row[asks]["asks"] == 1.0 and row[answer]["asks"] == 0.0
    # The best candidate has fused rank 1 and the best score.
    assert x[0, FEATURES.index("log_rank")] == 0.0 and x[0, FEATURES.index("score_ratio")] == 1.0
    assert row[turtles]["mentions_time"] == 1.0 and row[bike]["mentions_time"] == 1.0
    assert row[answer]["mentions_time"] == 0.0
    assert {r["has_role"] for r in row.values()} == {0.0}
    # The second view (the static edge model) also puts the answer above the bike turn,
    # by its vector and by its words.
    assert row[answer]["edge_cosine_z"] > row[bike]["edge_cosine_z"]
    assert row[answer]["soft_match_z"] > row[bike]["soft_match_z"]


def test_neighbour_features_read_the_candidates_beside_each_turn(chat):
    memory, (asks, answer, bike, turtles) = chat
    _, request = _request(memory, BENCH_PRESETS["full-priors"])
    # The chat's turns 0..3 are asks, answer, bike, turtles; bike is not a candidate.
    fused = [Fused(asks, 1.0), Fused(turtles, 0.5), Fused(answer, 0.25)]
    x = candidate_features(request, fused)
    row = {f.episode_id: dict(zip(FEATURES, x[i], strict=True)) for i, f in enumerate(fused)}
    cosine = {i: row[i]["cosine_z"] for i in row}
    # The answer sits between the question (score 1) and the bike turn (no candidate).
    assert row[answer]["neighbour_score"] == 1.0
    assert row[answer]["neighbour_cosine_z"] == cosine[asks]
    # The question's neighbour is the answer; the turtles turn is two turns from it.
    assert row[asks]["neighbour_score"] == 0.25 and row[asks]["neighbour_score_2"] == 0.25
    assert row[answer]["neighbour_score_2"] == 1.0
    assert row[turtles]["neighbour_score"] == 0.0 and row[turtles]["neighbour_score_2"] == 0.25
    assert row[turtles]["neighbour_cosine_z"] == NO_NEIGHBOUR_Z


def test_the_model_orders_the_best_candidates(chat, tmp_path):
    memory, (asks, answer, bike, turtles) = chat
    config = BENCH_PRESETS["full-priors"].with_(
        stage_options={"learned_rerank": {"model": _model(tmp_path, asks=-5.0, coverage=5.0)}}
    )
    _, request = _request(memory, config)
    fused = [Fused(i, 1.0) for i in (bike, asks, turtles, answer)]
    ranked = learned_rerank(request, fused)
    # The answer has all the question's words but the name; the asking turn, as many,
    # but it only asks; the other two (tied, in their fused order) have none.
    assert [f.episode_id for f in ranked] == [answer, bike, turtles, asks]
    scores = [f.score for f in ranked]
    assert scores == sorted(scores, reverse=True) and all(0.0 < s < 1.0 for s in scores)


def test_candidates_past_the_depth_keep_their_order_below(chat, tmp_path):
    memory, (asks, answer, bike, turtles) = chat
    options = {"model": _model(tmp_path, coverage=5.0), "depth": 2}
    config = BENCH_PRESETS["full-priors"].with_(stage_options={"learned_rerank": options})
    _, request = _request(memory, config)
    fused = [Fused(bike, 0.9), Fused(answer, 0.8), Fused(turtles, 0.7), Fused(asks, 0.6)]
    ranked = learned_rerank(request, fused)
    assert [f.episode_id for f in ranked] == [answer, bike, turtles, asks]
    assert ranked[1].score > ranked[2].score > ranked[3].score > 0.0


def test_full_ranker_searches_with_the_bundled_model(tmp_path, embedder):
    for model in load_ranker().values():
        assert model.features == FEATURES and "first halves" in model.trained_on
    with Memory(
        path=tmp_path / "m.db", embedder=embedder, config=BENCH_PRESETS["full-ranker"]
    ) as memory:
        added = memory.add_many(CHAT, user_id=USER.user_id, session_id="s1")
        hits = memory.search(QUESTION, user_id=USER.user_id, limit=2)
    assert hits[0].episode.id == added[1].id


def test_a_model_of_other_features_is_refused(tmp_path):
    path = tmp_path / "old.json"
    old = {"features": ["a"], "mean": [0.0], "scale": [1.0], "coef": [1.0], "intercept": 0.0}
    path.write_text(json.dumps({"models": {"speakers": old, "roles": old}}), encoding="utf-8")
    with pytest.raises(InvalidInputError, match="other features"):
        load_ranker(str(path))
    with pytest.raises(InvalidInputError, match="cannot load ranker model"):
        load_ranker(str(tmp_path / "missing.json"))


def test_bad_ranker_options_are_refused_when_the_retriever_is_built(chat, tmp_path):
    memory, _ = chat
    bad = [{"depth": 0}, {"depth": "ten"}, {"depth": True}, {"chats": ()}, {"chats": 3}]
    bad.append({"chats": ("teams",)})
    bad.append({"model": str(tmp_path / "missing.json")})
    for options in bad:
        config = BENCH_PRESETS["full-ranker"].with_(stage_options={"learned_rerank": options})
        with pytest.raises(InvalidInputError, match="learned_rerank|ranker model"):
            Retriever(memory.store, memory.embedder, config)


def test_each_kind_of_chat_has_its_model_and_can_be_left_alone(tmp_path, embedder):
    chat = [
        {"role": "user", "content": "So what's your favourite video game?"},
        {"role": "assistant", "content": "I have no favourite video game, I am an assistant."},
        {"role": "user", "content": "Mine is Xenoblade Chronicles, my favourite game by far."},
    ]
    with Memory(path=tmp_path / "roles.db", embedder=embedder) as memory:
        added = memory.add_many(chat, user_id=USER.user_id, session_id="s1")
        asks, _, answer = (e.id for e in added)
        # The model of user-assistant chats reads the asking turn; the other one is inert.
        models = {"speakers": _weighing(), "roles": _weighing(asks=-5.0)}
        path = tmp_path / "kinds.json"
        path.write_text(json.dumps(ranker_to_dict(models)))
        _, request = _request(memory, _ranker(str(path)))
        fused = [Fused(asks, 0.9), Fused(answer, 0.8)]
        assert [f.episode_id for f in learned_rerank(request, fused)] == [answer, asks]
        fused = [Fused(asks, 0.9), Fused(answer, 0.8)]
        _, request = _request(memory, _ranker(str(path), chats=("speakers",)))
        kept = learned_rerank(request, fused)
        assert [(f.episode_id, f.score) for f in kept] == [(asks, 0.9), (answer, 0.8)]
        with pytest.raises(InvalidInputError, match="chats"):
            _request(memory, _ranker(str(path), chats=("everyone",)))


def test_notes_keep_the_fused_order(tmp_path, embedder):
    # Notes stored without a session are no kind of chat the models were fitted on.
    with Memory(path=tmp_path / "notes.db", embedder=embedder) as memory:
        added = memory.add_many([m["content"] for m in CHAT], user_id=USER.user_id)
        asks, answer = added[0].id, added[1].id
        _, request = _request(memory, _ranker(_model(tmp_path, asks=-5.0)))
        kept = learned_rerank(request, [Fused(asks, 0.9), Fused(answer, 0.8)])
        assert [(f.episode_id, f.score) for f in kept] == [(asks, 0.9), (answer, 0.8)]
        # The same turns as a chat between named people are reordered.
        chat = memory.add_many(CHAT, user_id="chat", session_id="s1")
        retriever = Retriever(memory.store, memory.embedder, _ranker(_model(tmp_path, asks=-5.0)))
        request = retriever.request(QUESTION, Scope("chat"), Filters())
        fused = [Fused(chat[0].id, 0.9), Fused(chat[1].id, 0.8)]
        assert [f.episode_id for f in learned_rerank(request, fused)] == [chat[1].id, chat[0].id]


def _ranker(model: str, **options: object):
    return BENCH_PRESETS["full-ranker"].with_(
        stage_options={"learned_rerank": {"model": model, **options}}
    )


def test_the_fit_learns_which_feature_marks_evidence():
    rng = np.random.default_rng(0)
    informative, noise = rng.normal(size=400), rng.normal(size=400)
    labels = (informative + 0.3 * rng.normal(size=400) > 1.0).astype(float)
    z = np.c_[informative, noise, np.ones(400)]
    w = newton_logistic(z, labels, l2=1.0)
    assert w[0] > 2.0 and abs(w[1]) < 0.5 and w[2] < 0.0  # evidence is the rarer class


def test_warming_up_loads_the_rankers_edge_model(tmp_path, embedder):
    with Memory(path=tmp_path / "cold.db", embedder=embedder, warm=False) as memory:
        plain = Retriever(memory.store, memory.embedder, BENCH_PRESETS["full-priors"])
        plain.warm_up()
        assert EdgeView not in plain.resources  # no ranker, nothing to load
        ranking = Retriever(memory.store, memory.embedder, BENCH_PRESETS["full-ranker"])
        ranking.warm_up()
        assert EdgeView in ranking.resources


def test_the_edge_view_keeps_the_vectors_of_recent_candidates():
    view = EdgeView(capacity=2)
    question = "What is Nate's favourite video game?"
    texts = [turn["content"] for turn in CHAT[:3]]
    first = view.cosines(question, texts)
    assert len(view) == 2  # the oldest text's vector made room
    assert np.allclose(view.cosines(question, texts), first)  # cached or not, the same
    # Only each text's first EDGE_CHARS characters count.
    long = " ".join([texts[1]] * (EDGE_CHARS // len(texts[1]) + 1))
    assert len(long) > EDGE_CHARS
    assert np.allclose(view.cosines(question, [long + " tail"]), view.cosines(question, [long]))
    assert first[2] == min(first)  # the bike is farthest from the video game
    assert view.cosines(question, []).shape == (0,)


def test_the_edge_view_matches_the_questions_words_by_sense():
    view = EdgeView()
    question = "Which puppy did Maria adopt?"
    kin = "Maria adopted a little dog from the shelter."  # no word of the question but her name
    other = "Maria repainted the kitchen."
    scores = view.soft_matches(question, [kin, other, "", question])
    # Each question token counts by its closest token in the turn: "dog" and
    # "adopted" come near "puppy" and "adopt", the kitchen does not.
    assert scores[0] > scores[1]
    assert scores[2] == 0.0  # a turn without tokens matches nothing
    assert scores[3] == max(scores) and scores[3] == pytest.approx(1.0, abs=1e-5)
    # A word weighs more the fewer candidates hold it: of a turn with "Maria" and one
    # with "dog" (one token each), the turn holding the rarer word wins.
    maria, dog = "Maria said hello.", "A dog said hello."
    asked = "Which dog did Maria adopt?"
    assert np.argmax(view.soft_matches(asked, [maria] + [dog] * 5)) == 0
    assert np.argmax(view.soft_matches(asked, [maria] * 5 + [dog])) == 5
    assert view.soft_matches(question, []).shape == (0,)
    assert not view.soft_matches("", [kin, other]).any()
