"""Temporal retrieval: the temporal channel, event-time stages, as_of, and explanations."""

from __future__ import annotations

import time
from datetime import UTC, datetime

import pytest

from anamnesis import Memory, Scope, SearchConfig
from anamnesis.bench.presets import BENCH_PRESETS

MAY_8 = "2023-05-08T13:00:00+00:00"
TEMPORAL_ONLY = SearchConfig(channels=("temporal",), weights={"temporal": 1.0})


@pytest.fixture
def temporal_memory(db_path, embedder):
    with Memory(path=db_path, embedder=embedder, config=BENCH_PRESETS["temporal"]) as mem:
        yield mem


def _diary(memory: Memory, user_id: str = "ana") -> None:
    memory.add("I went to the support group yesterday", event_time=MAY_8, user_id=user_id)
    memory.add("My cat knocked over a vase", event_time="2023-06-20T10:00:00Z", user_id=user_id)
    memory.add("Planning a trip to Portugal", event_time="2023-04-02T10:00:00Z", user_id=user_id)


def test_the_temporal_channel_finds_an_episode_by_date_when_words_differ(db_path, embedder):
    with Memory(path=db_path, embedder=embedder, config=TEMPORAL_ONLY) as memory:
        _diary(memory)
        hits = memory.search("What did I do on 7 May 2023?", user_id="ana", explain=True)
        assert [h.episode.content for h in hits] == ["I went to the support group yesterday"]
        assert set(hits[0].channels) == {"temporal"}
        assert memory.search("What did I do?", user_id="ana") == []  # no time named


def test_relative_question_times_resolve_against_now(db_path, embedder):
    with Memory(path=db_path, embedder=embedder, config=TEMPORAL_ONLY) as memory:
        _diary(memory)
        hits = memory.search("what happened two weeks ago?", user_id="ana", now="2023-07-04")
        assert [h.episode.content for h in hits] == ["My cat knocked over a vase"]


def test_the_temporal_channel_stays_in_scope(db_path, embedder):
    with Memory(path=db_path, embedder=embedder, config=TEMPORAL_ONLY) as memory:
        _diary(memory, "bob")
        memory.add("Quiet day at home", event_time=MAY_8, user_id="ana", agent_id="a1")
        assert memory.search("What did I do on 7 May 2023?", user_id="ana", agent_id="a2") == []
        hits = memory.search("What did I do on 7 May 2023?", user_id="ana")
        assert [h.episode.content for h in hits] == ["Quiet day at home"]


def test_a_candidate_dated_in_the_named_time_outranks_an_identical_one(temporal_memory):
    for when in ("2023-05-07T10:00:00Z", "2023-06-20T10:00:00Z", "2023-08-02T10:00:00Z"):
        temporal_memory.add("Went hiking with Sam up the ridge", event_time=when, user_id="ana")
    hits = temporal_memory.search(
        "Who did I go hiking with in June?", user_id="ana", now="2023-09-01", explain=True
    )
    assert hits[0].episode.event_time == datetime(2023, 6, 20, 10, tzinfo=UTC)
    assert "temporal" in hits[0].channels
    assert hits[0].analysis["time"]["ranges"][0]["expression"] == "in June"


def _day_after(memory: Memory) -> tuple[str, str]:
    """Two turns said on 5 December: one about that day, one about the day before."""
    said = "2023-12-05T20:00:00Z"
    (today,) = memory.add(
        "Cooked a big pasta dinner for my friends", event_time=said, user_id="ana"
    )
    (before,) = memory.add(
        "I attended a Weight Watchers meeting yesterday", event_time=said, user_id="ana"
    )
    return today.id, before.id


def test_the_temporal_channel_puts_the_named_day_itself_first(db_path, embedder):
    # Both turns fall in the search window of "December 4" (a day either side); only
    # one speaks of that day. Without the exact-first order, similarity would decide.
    with Memory(path=db_path, embedder=embedder, config=TEMPORAL_ONLY) as memory:
        today, before = _day_after(memory)
        hits = memory.search("What dinner did I have on December 4, 2023?", user_id="ana")
        assert [h.episode.id for h in hits] == [before, today]


def test_time_match_boosts_the_named_time_itself_by_the_exact_factor(db_path, embedder):
    question = "What dinner did I cook on December 4, 2023?"
    plain = BENCH_PRESETS["hybrid"].with_(stages=("time_match",))
    exact = plain.with_(stage_options={"time_match": {"exact": 3.0}})
    with Memory(path=db_path, embedder=embedder, config=plain) as memory:
        today, before = _day_after(memory)
        # Both turns are in the window and get the same boost: the words decide.
        assert memory.search(question, user_id="ana")[0].episode.id == today
    with Memory(path=db_path, embedder=embedder, config=exact) as memory:
        hits = memory.search(question, user_id="ana")
        assert [h.episode.id for h in hits] == [before, today]


def test_a_relative_time_gets_no_exact_boost_unless_asked(db_path, embedder):
    question = "What dinner did I cook yesterday?"  # asked on 5 December: the 4th
    exact = BENCH_PRESETS["hybrid"].with_(
        stages=("time_match",), stage_options={"time_match": {"exact": 3.0}}
    )
    relative = exact.with_(stage_options={"time_match": {"exact": 3.0, "relative": True}})
    with Memory(path=db_path, embedder=embedder, config=exact) as memory:
        today, before = _day_after(memory)
        hits = memory.search(question, user_id="ana", now="2023-12-05T21:00:00Z")
        assert hits[0].episode.id == today
    with Memory(path=db_path, embedder=embedder, config=relative) as memory:
        hits = memory.search(question, user_id="ana", now="2023-12-05T21:00:00Z")
        assert hits[0].episode.id == before


def test_the_dated_stage_prefers_turns_that_date_the_event_for_when_questions(db_path, embedder):
    config = BENCH_PRESETS["hybrid"].with_(stages=("dated",))
    with Memory(path=db_path, embedder=embedder, config=config) as memory:
        memory.add(
            ["I love the support group", "I went to the support group yesterday"],
            event_time=MAY_8,
            user_id="ana",
        )
        hits = memory.search("When did I go to the support group?", user_id="ana")
        assert hits[0].episode.content == "I went to the support group yesterday"


def test_as_of_hides_episodes_recorded_later_and_their_context(memory):
    (early,) = memory.add("I adopted a dog named Rex", user_id="ana", session_id="s1")
    time.sleep(0.01)
    as_of = datetime.now(UTC)
    time.sleep(0.01)
    memory.add("Rex the dog went to obedience school", user_id="ana", session_id="s1")
    now_hits = memory.search("dog Rex", user_id="ana")
    assert len(now_hits) == 2
    then_hits = memory.search("dog Rex", user_id="ana", as_of=as_of)
    assert [h.episode.id for h in then_hits] == [early.id]
    assert then_hits[0].context == ()


def test_analyse_and_explain_expose_the_reading_of_the_question(memory):
    analysis = memory.analyse("What was my previous job before last June?", now="2023-09-01")
    view = analysis.to_dict()
    assert view["time"]["history"] is True
    assert "before" in view["time"]["asks"]
    assert view["time"]["ranges"][0]["resolved"][0] == "2023-06-01T00:00:00+00:00"
    memory.add("I worked as a baker", user_id="u")
    (hit,) = memory.search("my job", user_id="u", explain=True, now="2023-09-01")
    assert hit.analysis["now"] == "2023-09-01T00:00:00+00:00"
    assert memory.search("my job", user_id="u")[0].analysis == {}


def test_chronological_orders_only_the_returned_hits_oldest_first(db_path, embedder):
    config = BENCH_PRESETS["hybrid"].with_(stages=("chronological",))
    with Memory(path=db_path, embedder=embedder, config=config) as memory:
        for day, step in [
            ("03", "deployed the app"),
            ("01", "wrote the app"),
            ("02", "tested the app"),
        ]:
            memory.add(f"I {step}", event_time=f"2024-03-{day}T10:00:00Z", user_id="u")
        ordered = memory.search("In what order did I work on the app?", user_id="u", limit=3)
        assert [h.episode.content for h in ordered] == [
            "I wrote the app",
            "I tested the app",
            "I deployed the app",
        ]
        plain = memory.search("What did I do with the app?", user_id="u", limit=3)
        assert [h.score for h in plain] == sorted((h.score for h in plain), reverse=True)


def test_spread_lets_order_questions_cover_more_days(db_path, embedder):
    day_one = ["I worked on the app login", "I worked on the app menu", "I worked on the app icons"]
    with Memory(path=db_path, embedder=embedder, config=BENCH_PRESETS["hybrid"]) as memory:
        memory.add(day_one, event_time="2024-03-01T10:00:00Z", user_id="u")
        memory.add("Later the app database", event_time="2024-03-05T10:00:00Z", user_id="u")
        question = "In what order did I work on the app?"
        plain = memory.search(question, user_id="u", limit=4)
        assert len({h.episode.event_time.date() for h in plain[:3]}) == 1
    config = BENCH_PRESETS["hybrid"].with_(stages=("spread",))
    with Memory(path=db_path, embedder=embedder, config=config) as memory:
        spread = memory.search(question, user_id="u", limit=4)
        assert len({h.episode.event_time.date() for h in spread[:3]}) == 2
        assert [h.episode.id for h in memory.search("What did I work on?", user_id="u")][:1] == [
            plain[0].episode.id
        ]
    # With when="list", list questions ("What parts…") are spread as well.
    config = BENCH_PRESETS["hybrid"].with_(
        stages=("spread",), stage_options={"spread": {"when": "list"}}
    )
    with Memory(path=db_path, embedder=embedder, config=config) as memory:
        listed = memory.search("What parts of the app did I work on?", user_id="u", limit=4)
        assert len({h.episode.event_time.date() for h in listed[:3]}) == 2


def test_an_import_recomputes_time_mentions(tmp_path, embedder):
    import io

    with Memory(path=tmp_path / "a.db", embedder=embedder) as source:
        (episode,) = source.add("We met yesterday", event_time=MAY_8, user_id="ana")
        dump = io.StringIO()
        source.export_jsonl(dump)
    with Memory(path=tmp_path / "b.db", embedder=embedder) as target:
        target.import_jsonl(dump.getvalue().splitlines())
        times = target.store.episode_times([episode.id], Scope("ana"))
        (mention,) = times[episode.id].mentions
        assert mention.start == datetime(2023, 5, 7, tzinfo=UTC)
