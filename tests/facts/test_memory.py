"""Facts through Memory: consolidation, supersession, history, search, scope, deletes.

Real SQLite stores and the real MiniLM embedder (session fixture); the rule extractor.
"""

from __future__ import annotations

import io
from datetime import UTC, datetime

import pytest

from anamnesis import Memory
from anamnesis.bench.presets import BENCH_PRESETS
from anamnesis.errors import ConsolidationError, InvalidInputError
from anamnesis.retrieve.stages import FACT_BOOST
from anamnesis.store.base import Filters
from anamnesis.types import Scope

MOVES = [
    {"role": "user", "content": "I live in Boston, near the harbour.", "event_time": "2022-01-10"},
    {"role": "assistant", "content": "Boston is lovely in spring.", "event_time": "2022-01-10"},
    {
        "role": "user",
        "content": "Big news: I moved to Denver for work!",
        "event_time": "2023-06-02",
    },
    {"role": "user", "content": "I just moved to Lisbon, finally!", "event_time": "2024-03-15"},
]
JOBS = [
    {"role": "user", "content": "I work at Acme as a tester.", "event_time": "2020-02-01"},
    {"role": "user", "content": "I started a new job at Initech.", "event_time": "2021-05-01"},
    {"role": "user", "content": "I got a new job at Stripe last week.", "event_time": "2023-09-08"},
    {"role": "user", "content": "I love hiking in the mountains.", "event_time": "2023-09-09"},
]


@pytest.fixture
def facts_memory(tmp_path, embedder):
    """A memory whose search adds the facts channel."""
    with Memory(path=tmp_path / "m.db", embedder=embedder, config=BENCH_PRESETS["facts"]) as memory:
        yield memory


def objects(facts):
    return [f.object for f in facts]


def test_add_stores_no_facts_until_consolidate(memory):
    memory.add(MOVES)
    assert memory.facts(include_superseded=True) == []
    report = memory.consolidate()
    assert report.episodes == 4 and report.extractor == "rules"
    assert memory.consolidate().episodes == 0  # every episode has been read
    assert memory.capabilities["llm"] is None


def test_a_new_value_supersedes_the_old_which_is_never_deleted(memory):
    memory.add(MOVES)
    report = memory.consolidate()
    assert (report.added, report.superseded) == (3, 2)
    assert objects(memory.facts(predicate="lives_in")) == ["Lisbon"]
    everything = memory.facts(predicate="lives_in", include_superseded=True)
    assert objects(everything) == ["Lisbon", "Denver", "Boston"]
    boston = everything[-1]
    assert boston.valid_to == datetime(2023, 6, 2, tzinfo=UTC)
    assert boston.superseded_by == everything[1].id


def test_history_follows_the_supersession_chain_oldest_first(memory):
    memory.add(JOBS)
    memory.consolidate()
    chain = memory.fact_history(predicate="works_at")
    assert objects(chain) == ["Acme", "Initech", "Stripe"]
    assert [f.supersedes for f in chain[1:]] == [f.id for f in chain[:-1]]
    assert chain[-1].is_current and not any(f.is_current for f in chain[:-1])
    # "last week", said on Friday 8 September, dates the Stripe job to the week before.
    assert chain[-1].valid_from == datetime(2023, 8, 28, tzinfo=UTC)


def test_older_news_consolidated_later_slots_into_the_past(memory):
    memory.add(MOVES[2])  # Denver, 2023
    memory.consolidate()
    memory.add(MOVES[0])  # Boston, 2022, told afterwards
    memory.consolidate()
    assert objects(memory.facts(predicate="lives_in")) == ["Denver"]
    assert objects(memory.fact_history(predicate="lives_in")) == ["Boston", "Denver"]


def test_restating_a_value_adds_provenance_not_a_fact(memory):
    first = memory.add("I live in Porto.", role="user", event_time="2023-01-01")
    again = memory.add("As I said, I live in Porto.", role="user", event_time="2023-02-01")
    report = memory.consolidate()
    assert (report.added, report.confirmed) == (1, 1)
    [porto] = memory.facts()
    assert porto.provenance == (first[0].id, again[0].id)


def test_as_of_hides_facts_recorded_later(memory):
    before = datetime.now(UTC)
    memory.add(MOVES)
    memory.consolidate()
    assert memory.facts(as_of=before) == []
    assert objects(memory.facts(as_of=datetime.now(UTC), predicate="lives_in")) == ["Lisbon"]


def test_the_users_name_is_an_alias_of_user(memory):
    memory.add(
        [
            {"role": "user", "content": "My name is Ana.", "event_time": "2023-01-01"},
            {"role": "user", "content": "I live in Porto.", "event_time": "2023-01-02"},
        ]
    )
    memory.consolidate()
    assert objects(memory.facts(subject="Ana", predicate="lives_in")) == ["Porto"]
    assert objects(memory.facts(subject="user", predicate="name")) == ["Ana"]


def test_facts_are_isolated_by_user_and_agent(memory):
    memory.add("I live in Oslo.", user_id="alice", role="user")
    memory.add("I live in Rome.", user_id="bob", role="user")
    memory.add("I live in Kyiv.", user_id="bob", agent_id="helper", role="user")
    memory.consolidate(user_id="alice")
    assert memory.facts(user_id="bob") == []  # Bob's episodes are not read yet
    memory.consolidate(user_id="bob")
    assert objects(memory.facts(user_id="alice")) == ["Oslo"]
    assert sorted(objects(memory.facts(user_id="bob"))) == ["Kyiv", "Rome"]
    assert objects(memory.facts(user_id="bob", agent_id="helper")) == ["Kyiv"]
    hits = memory.search("Oslo", user_id="bob")
    assert all(h.episode.user_id == "bob" for h in hits)


def test_current_state_questions_get_the_newest_value_first(facts_memory):
    facts_memory.add(MOVES)
    facts_memory.consolidate()
    hits = facts_memory.search("Where do I live now?", explain=True)
    from_facts = sorted(
        (h for h in hits if "facts" in h.channels), key=lambda h: h.channels["facts"].rank
    )
    assert "Lisbon" in from_facts[0].episode.content
    assert [f.object for f in from_facts[0].facts] == ["Lisbon"]


def test_history_questions_get_the_whole_chain_in_order(facts_memory):
    facts_memory.add(JOBS)
    facts_memory.consolidate()
    hits = facts_memory.search("What companies did I work at before?", explain=True)
    from_facts = sorted(
        (h for h in hits if "facts" in h.channels), key=lambda h: h.channels["facts"].rank
    )
    companies = [f.object for h in from_facts for f in h.facts if f.predicate == "works_at"]
    assert companies == ["Acme", "Initech", "Stripe"]


def test_the_fact_boost_lifts_episodes_stating_a_standing_matching_value(tmp_path, embedder):
    def scores(config, question):
        with Memory(path=tmp_path / "m.db", embedder=embedder, config=config) as memory:
            return {h.episode.content: h for h in memory.search(question, limit=10)}

    with Memory(path=tmp_path / "m.db", embedder=embedder) as memory:
        memory.add(MOVES)
        memory.consolidate()
    plain = scores(BENCH_PRESETS["hybrid"], "Where do I live now?")
    boosted = scores(BENCH_PRESETS["facts-rerank"], "Where do I live now?")
    assert boosted.keys() == plain.keys()  # the stage adds no candidates
    lisbon, boston = MOVES[3]["content"], MOVES[0]["content"]
    # The standing value's episode is boosted and carries its fact; the replaced
    # value's is not boosted (a current-state question).
    assert boosted[lisbon].score == pytest.approx(plain[lisbon].score * FACT_BOOST)
    assert [f.object for f in boosted[lisbon].facts] == ["Lisbon"]
    assert boosted[boston].score == pytest.approx(plain[boston].score)
    # A history question boosts every value of the chain.
    history = scores(BENCH_PRESETS["facts-rerank"], "Where did I live before?")
    before = scores(BENCH_PRESETS["hybrid"], "Where did I live before?")
    assert history[boston].score == pytest.approx(before[boston].score * FACT_BOOST)


def test_the_facts_channel_honours_recorded_before(facts_memory):
    facts_memory.add(MOVES)
    facts_memory.consolidate()
    retriever = facts_memory._retriever
    past = Filters(recorded_before=datetime(2000, 1, 1, tzinfo=UTC))
    request = retriever.request("Where do I live?", Scope("default"), past)
    assert retriever.candidates(request)["facts"] == []


def test_deletes_remove_facts_with_their_last_source(memory):
    episodes = memory.add(MOVES)
    memory.consolidate()
    counts = memory.delete(episodes[3].id)  # Lisbon
    assert counts.facts == 1
    assert objects(memory.facts(predicate="lives_in")) == ["Denver"]  # current again
    counts = memory.delete_all(user_id="default")
    assert counts.facts == 2
    assert memory.facts(include_superseded=True) == []


def test_export_import_round_trips_facts(memory, tmp_path, embedder):
    memory.add(JOBS)
    memory.consolidate()
    out = io.StringIO()
    memory.export_jsonl(out)
    with Memory(path=tmp_path / "copy.db", embedder=embedder) as copy:
        copy.import_jsonl(out.getvalue().splitlines())
        assert copy.facts(include_superseded=True) == memory.facts(include_superseded=True)
        assert copy.consolidate().episodes == 0  # the consolidation marks came along
        copy.import_jsonl(out.getvalue().splitlines())  # importing twice adds nothing
        assert copy.facts(include_superseded=True) == memory.facts(include_superseded=True)


def test_reindex_re_embeds_facts(memory):
    memory.add(JOBS)
    memory.consolidate()
    before = {f.id: v for f, v in memory.store.iter_facts()}
    memory.store.replace_fact_vectors({i: v * 0 for i, v in before.items()})
    memory.reindex()
    after = {f.id: v for f, v in memory.store.iter_facts()}
    assert all(abs(float(after[i] @ before[i]) - 1.0) < 1e-4 for i in before)


# -- background consolidation -------------------------------------------------------------------
def test_background_consolidation_extracts_facts_of_the_scopes_written_to(memory):
    memory.add(MOVES[:1])  # before the worker starts: its first cycle reads it too
    worker = memory.start_consolidation(interval=3600)
    assert memory.capabilities["consolidation"] == "running"
    memory.add(JOBS, user_id="bob")
    assert worker.drain(timeout=60)
    assert objects(memory.facts(predicate="lives_in")) == ["Boston"]
    assert "Stripe" in objects(memory.facts(user_id="bob"))
    memory.add(MOVES[2:3])
    assert worker.drain(timeout=60)
    assert objects(memory.facts(predicate="lives_in")) == ["Denver"]
    worker.stop()
    assert memory.capabilities["consolidation"] == "stopped"


def test_a_failing_background_consolidation_warns_and_raises_on_stop(memory, monkeypatch):
    def broken(*args, **kwargs):
        raise RuntimeError("extractor crashed")

    monkeypatch.setattr(type(memory), "consolidate", broken)
    memory.add(MOVES[:1])
    worker = memory.start_consolidation(interval=3600)
    with pytest.warns(RuntimeWarning, match="extractor crashed"):
        with pytest.raises(ConsolidationError, match="extractor crashed"):
            worker.drain(timeout=60)
    assert memory.capabilities["consolidation"].startswith("failed: ")
    with pytest.raises(ConsolidationError):
        worker.stop()
    assert memory.facts() == []  # nothing half-written; the episodes are intact
    assert memory.stats()["episodes"] == 1


def test_start_consolidation_refuses_bad_intervals_and_a_second_worker(memory):
    with pytest.raises(InvalidInputError):
        memory.start_consolidation(interval=0)
    memory.start_consolidation(interval=3600)
    with pytest.raises(InvalidInputError):
        memory.start_consolidation(interval=3600)
