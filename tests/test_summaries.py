"""Session summaries on a real LoCoMo slice (conversation 26, sessions 1-4), the real
MiniLM embedder and a real SQLite store: built by consolidate with provenance and the
session's time span, rebuilt only for sessions that changed, following their sources
through update and forget (a forgotten turn's words leave the summary and the file),
confined to their scope, and whole after a consolidation killed midway."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from failures import cut_power_on_write
from locomo_slice import load_slice

from anamnesis import Memory
from anamnesis.bench.presets import BENCH_PRESETS
from anamnesis.consolidate import build
from anamnesis.retrieve.resources import StageResources
from anamnesis.retrieve.summaries import item_index, matching_items
from anamnesis.store.base import Filters
from anamnesis.types import Scope

USER = "locomo"


def _snapshot(memory: Memory, user: str = USER) -> dict[str, tuple]:
    """What a rebuild must reproduce: each item's text, provenance and span."""
    return {
        row.id: (row.text, row.provenance, row.start_time, row.end_time, row.fingerprint)
        for row, _ in memory.store.find_derived(Scope(user))
    }


def _from_scratch(memory: Memory, user: str = USER) -> dict[str, tuple]:
    """Drop every derived item of ``user`` and build them all again."""
    stored = memory.store.find_derived(Scope(user))
    memory.store.write_derived(Scope(user), [], [], drop=[row.id for row, _ in stored])
    memory.consolidate(user_id=user)
    return _snapshot(memory, user)


@pytest.fixture
def slice_memory(memory: Memory) -> Memory:
    load_slice(memory, USER)
    return memory


def test_summaries_carry_provenance_and_the_sessions_time_span(slice_memory: Memory) -> None:
    report = slice_memory.consolidate(user_id=USER)
    assert report.summaries == 4
    summaries = slice_memory.derived.summaries(user_id=USER)
    assert [s.session_id for s in summaries] == [f"session_{n}" for n in range(1, 5)]
    for summary in summaries:
        turns = slice_memory.get_all(user_id=USER, session_id=summary.session_id, limit=100).items
        assert summary.started_at == min(t.event_time for t in turns)
        assert summary.ended_at == max(t.event_time for t in turns)
        assert 1 <= len(summary.lines) <= 6
        by_id = {t.id: t for t in turns}
        assert set(summary.provenance) == {line.episode_id for line in summary.lines}
        for line in summary.lines:
            assert line.text in by_id[line.episode_id].content  # extractive: verbatim
            assert line.text in summary.text
    # The turn that states a fact is kept, and says why.
    facts = slice_memory.facts(user_id=USER, include_superseded=True, limit=1000)
    sources = {e for f in facts for e in f.provenance}
    kept = {line.episode_id for s in summaries for line in s.lines if "fact" in line.reasons}
    assert kept and kept <= sources


def test_only_sessions_that_changed_are_rebuilt(slice_memory: Memory) -> None:
    slice_memory.consolidate(user_id=USER)
    before = {s.session_id: s for s in slice_memory.derived.summaries(user_id=USER)}
    again = slice_memory.consolidate(user_id=USER)
    assert (again.summaries, again.profiles) == (0, 0)
    slice_memory.add(
        {
            "speaker": "Melanie",
            "content": "We finally booked the camping trip to Yosemite for 12 June!",
        },
        user_id=USER,
        session_id="session_3",
        event_time=before["session_3"].ended_at,
    )
    report = slice_memory.consolidate(user_id=USER)
    assert report.summaries == 1
    after = {s.session_id: s for s in slice_memory.derived.summaries(user_id=USER)}
    for session in ("session_1", "session_2", "session_4"):
        assert after[session].built_at == before[session].built_at
    assert after["session_3"].built_at > before["session_3"].built_at
    assert "Yosemite" in after["session_3"].text


def test_an_update_regenerates_the_summary(slice_memory: Memory) -> None:
    slice_memory.consolidate(user_id=USER)
    summary = slice_memory.derived.summaries(user_id=USER, session_id="session_1")[0]
    line = summary.lines[0]
    slice_memory.update(
        line.episode_id, content="I adopted a greyhound called Biscuit in 2021.", user_id=USER
    )
    assert slice_memory.consolidate(user_id=USER).summaries == 1
    rebuilt = slice_memory.derived.summaries(user_id=USER, session_id="session_1")[0]
    assert line.text not in rebuilt.text
    assert "Biscuit" in rebuilt.text


def test_forget_drops_the_words_from_summaries_and_the_file(slice_memory: Memory) -> None:
    slice_memory.consolidate(user_id=USER)
    summary = slice_memory.derived.summaries(user_id=USER, session_id="session_2")[0]
    line = summary.lines[0]
    report = slice_memory.forget(line.episode_id, user_id=USER)
    assert report.counts.derived >= 1
    remaining = slice_memory.derived.summaries(user_id=USER)
    assert all(line.text not in s.text for s in remaining)
    assert all(
        line.episode_id not in p.provenance for p in slice_memory.derived.profiles(user_id=USER)
    )
    store_path = Path(slice_memory.store.path)  # type: ignore[attr-defined]
    needle = line.text.encode()
    for path in store_path.parent.glob(store_path.name + "*"):
        assert needle not in path.read_bytes(), path.name
    slice_memory.consolidate(user_id=USER)
    rebuilt = slice_memory.derived.summaries(user_id=USER, session_id="session_2")[0]
    assert line.episode_id not in rebuilt.provenance and line.text not in rebuilt.text


def test_summaries_stay_in_their_scope(slice_memory: Memory) -> None:
    slice_memory.add(
        "I keep bees on the roof of our flat in Leeds since 2019.", user_id="bob", session_id="b1"
    )
    slice_memory.consolidate(user_id=USER)
    slice_memory.consolidate(user_id="bob")
    bob = slice_memory.derived.summaries(user_id="bob")
    assert [s.session_id for s in bob] == ["b1"] and "bees" in bob[0].text
    mine = slice_memory.derived.summaries(user_id=USER)
    assert all("bees" not in s.text for s in mine)
    memory_for_bob = Memory(
        path=slice_memory.store.path,  # type: ignore[attr-defined]
        embedder=slice_memory.embedder,
        config=BENCH_PRESETS["default-summaries"],
    )
    with memory_for_bob:
        hits = memory_for_bob.search(
            "What did Caroline research for adoption?", user_id="bob", explain=True
        )
        assert {h.episode.user_id for h in hits} <= {"bob"}
        ids = [row.id for row, _ in slice_memory.store.find_derived(Scope(USER))]
        assert slice_memory.store.derived_episodes(ids, Scope("bob"), Filters()) == {}


def test_the_summaries_channel_proposes_the_episodes_behind_a_summary(slice_memory: Memory) -> None:
    slice_memory.consolidate(user_id=USER)
    searcher = Memory(
        path=slice_memory.store.path,  # type: ignore[attr-defined]
        embedder=slice_memory.embedder,
        config=BENCH_PRESETS["default-summaries"],
    )
    with searcher:
        hits = searcher.search(
            "Which adoption agencies was Caroline looking into?", user_id=USER, explain=True
        )
    from_summaries = [h for h in hits if "summaries" in h.channels]
    assert from_summaries
    behind = {e for s in slice_memory.derived.summaries(user_id=USER) for e in s.provenance}
    behind |= {e for p in slice_memory.derived.profiles(user_id=USER) for e in p.provenance}
    assert {h.episode.id for h in from_summaries} <= behind


def test_the_channel_keeps_its_index_of_items_until_one_changes(slice_memory: Memory) -> None:
    # Matching reads every item of the scope; the index of them is kept between
    # searches, and a write or delete of an item, by this process or another, is seen
    # by the next search.
    slice_memory.consolidate(user_id=USER)
    store, scope, resources = slice_memory.store, Scope(USER), StageResources()
    assert item_index(store, scope, None, resources) is item_index(store, scope, None, resources)
    question = "Which adoption agencies was Caroline looking into?"
    vector = slice_memory.embedder.embed_query(question)
    ranked = matching_items(store, scope, ["adoption", "agencies"], vector, None, resources)
    best = ranked[0][0]
    other = Memory(path=store.path, embedder=slice_memory.embedder)  # type: ignore[attr-defined]
    with other:
        other.store.write_derived(scope, [], [], drop=[best])
    after = matching_items(store, scope, ["adoption", "agencies"], vector, None, resources)
    assert [i for i, _ in after] == [i for i, _ in ranked if i != best]


def test_the_channel_reads_only_the_kinds_it_is_given(slice_memory: Memory) -> None:
    slice_memory.consolidate(user_id=USER)
    behind_summaries = {
        e for s in slice_memory.derived.summaries(user_id=USER) for e in s.provenance
    }
    question = "Which adoption agencies was Caroline looking into?"
    for preset, kind in (("default-summaries-only", "summary"), ("default-profiles", "profile")):
        searcher = Memory(
            path=slice_memory.store.path,  # type: ignore[attr-defined]
            embedder=slice_memory.embedder,
            config=BENCH_PRESETS[preset],
        )
        with searcher:
            hits = searcher.search(question, user_id=USER, explain=True, limit=50)
        proposed = {h.episode.id for h in hits if "summaries" in h.channels}
        assert proposed, preset
        if kind == "summary":
            assert proposed <= behind_summaries
        else:  # a profile proposes its facts' turns, not a summary's sentences'
            behind_profiles = {
                e for p in slice_memory.derived.profiles(user_id=USER) for e in p.provenance
            }
            assert proposed <= behind_profiles


def test_an_extractive_summary_proposes_every_turn_it_kept() -> None:
    from anamnesis.consolidate.salience import MAX_LINES
    from anamnesis.retrieve.summaries import ITEM_EPISODES

    assert ITEM_EPISODES >= MAX_LINES  # the cap on an item's episodes is for the long ones


def test_a_failure_between_batches_leaves_whole_items_and_resumes(
    slice_memory: Memory, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(build, "BATCH_SIZE", 1)
    store = slice_memory.store
    real_write = cut_power_on_write(monkeypatch, store)
    with pytest.raises(RuntimeError, match="power cut"):
        slice_memory.consolidate(user_id=USER)
    partial = _snapshot(slice_memory)
    assert len(partial) == 2  # two whole summaries, nothing half-written
    prints = {p.session_id: p.fingerprint for p in store.session_prints(Scope(USER))}
    for row, _ in store.find_derived(Scope(USER)):
        assert row.fingerprint == prints[row.session_id] and row.provenance
    monkeypatch.setattr(store, "write_derived", real_write)
    report = slice_memory.consolidate(user_id=USER)
    assert report.summaries == 2  # only what was still due
    assert _snapshot(slice_memory) == _from_scratch(slice_memory)


CHILD = textwrap.dedent(
    """
    import sys, time
    from anamnesis import Memory
    from anamnesis.consolidate import build
    from anamnesis.embed import get_embedder

    build.BATCH_SIZE = 1
    memory = Memory(path=sys.argv[1], embedder=get_embedder("minilm"))
    write = memory.store.write_derived
    done = {"n": 0}

    def slow_write(*args, **kwargs):
        write(*args, **kwargs)
        done["n"] += 1
        if done["n"] == 2:
            print("written", flush=True)
            time.sleep(600)

    memory.store.write_derived = slow_write
    memory.consolidate(user_id=sys.argv[2])
    """
)


def test_a_consolidation_killed_midway_leaves_a_consistent_store_and_resumes(
    slice_memory: Memory, tmp_path: Path
) -> None:
    path = slice_memory.store.path  # type: ignore[attr-defined]
    slice_memory.close()
    child = subprocess.Popen(
        [sys.executable, "-c", CHILD, str(path), USER],
        stdout=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)},
    )
    try:
        assert child.stdout is not None
        assert child.stdout.readline().strip() == "written"
        os.kill(child.pid, signal.SIGKILL)
    finally:
        child.wait(timeout=60)
    assert child.returncode == -signal.SIGKILL
    with Memory(path=path, embedder=slice_memory.embedder) as reopened:
        assert reopened.check() == []
        partial = _snapshot(reopened)
        assert len(partial) == 2
        prints = {p.session_id: p.fingerprint for p in reopened.store.session_prints(Scope(USER))}
        for row, _ in reopened.store.find_derived(Scope(USER)):
            assert row.fingerprint == prints[row.session_id]
        report = reopened.consolidate(user_id=USER)
        assert (report.summaries, report.profiles) == (2, 2)
        assert _snapshot(reopened) == _from_scratch(reopened)
