"""The archive: episodes leave the hot indexes, stay findable with include_archive, and
come back exactly; the move is write-ahead; scope holds.

Real SQLite files in ``tmp_path`` and the static edge embedder; the store-level round
trip on both backends is in ``tests/store/test_contract.py``.
"""

from __future__ import annotations

import json
import sqlite3
from contextlib import closing

import numpy as np
import pytest
from click.testing import CliRunner

from anamnesis import Memory, NotFoundError
from anamnesis.cli import main
from anamnesis.embed import get_embedder
from anamnesis.store.shared import forget as forget_sql
from anamnesis.store.sqlite import SQLiteStore
from anamnesis.types import Scope

EDGE = get_embedder("edge")


@pytest.fixture
def memory(tmp_path):
    with Memory(path=tmp_path / "m.db", embedder=EDGE, warm=False) as memory:
        yield memory


def snapshot(memory: Memory, episode_id: str, user_id: str = "ana") -> tuple:
    """Everything stored about one hot episode: the row, versions, vector, times."""
    scope = Scope(user_id)
    (episode,) = memory.store.get_episodes([episode_id], scope)
    vectors = {e.id: v for e, v in memory.store.iter_episodes()}
    times = memory.store.episode_times([episode_id], scope)[episode_id]
    return episode, memory.history(episode_id, user_id=user_id), vectors[episode_id], times


def test_archive_search_and_restore_round_trip_exactly(memory) -> None:
    old = memory.add(
        [
            {"content": "We adopted a grey cat called Miso last week", "speaker": "Ana"},
            {"content": "The vet said Miso is healthy", "metadata": {"café": "☕", "n": 1}},
        ],
        user_id="ana",
        session_id="pets",
        event_time="2023-05-08T10:00:00Z",
    )
    memory.add("I bought a new bicycle for commuting", user_id="ana", session_id="other")
    memory.update(old[1].id, content="The vet said Miso is very healthy", user_id="ana")
    memory.consolidate(user_id="ana")
    before = {e.id: snapshot(memory, e.id) for e in old}
    facts_before = memory.facts(user_id="ana", include_superseded=True)

    assert sorted(memory.archive(user_id="ana", session_id="pets")) == sorted(e.id for e in old)
    with pytest.raises(NotFoundError):
        memory.get(old[0].id, user_id="ana")
    assert memory.get_all(user_id="ana").total == 1
    hot = memory.search("what is the cat called?", user_id="ana")
    assert all(h.episode.id not in before for h in hot)
    found = memory.search("what is the cat called?", user_id="ana", include_archive=True)
    assert found[0].episode.id == old[0].id and "archive" in found[0].channels
    assert found[0].episode == before[old[0].id][0]
    assert memory.facts(user_id="ana", include_superseded=True) == facts_before

    assert sorted(memory.restore(user_id="ana", session_id="pets")) == sorted(before)
    for episode_id, (episode, history, vector, times) in before.items():
        again = snapshot(memory, episode_id)
        assert again[0] == episode and again[1] == history and again[3] == times
        np.testing.assert_array_equal(again[2], vector)
    assert memory.search("what is the cat called?", user_id="ana")[0].episode.id == old[0].id
    assert memory.restore(user_id="ana") == []


def test_archive_and_restore_stay_in_scope(memory) -> None:
    (bobs,) = memory.add("bob's note about the garden", user_id="bob")
    (anas,) = memory.add("ana's note about the garden", user_id="ana")
    assert memory.archive([bobs.id], user_id="ana") == []
    assert memory.archive([anas.id, bobs.id], user_id="ana") == [anas.id]
    assert memory.search("garden", user_id="bob", include_archive=True)[0].episode.id == bobs.id
    hits = memory.search("garden", user_id="bob", include_archive=True)
    assert anas.id not in {h.episode.id for h in hits}
    assert memory.restore([anas.id], user_id="bob") == []
    assert memory.restore([anas.id], user_id="ana") == [anas.id]


def test_archive_is_write_ahead_and_a_cut_move_is_finished_later(memory, monkeypatch) -> None:
    first, second = memory.add(["the harbour was quiet", "the tide was high"], user_id="ana")

    def killed(self, scope, batch=None):  # the process dies after the copy is committed
        raise KeyboardInterrupt

    with monkeypatch.context() as patch:
        patch.setattr(SQLiteStore, "_leave_hot_indexes", killed)
        with pytest.raises(KeyboardInterrupt):
            memory.archive(user_id="ana")
    # The copy is committed and the hot rows are intact: nothing is lost or doubled.
    assert memory.get_all(user_id="ana").total == 2
    hits = memory.search("harbour tide", user_id="ana", include_archive=True)
    assert sorted(h.episode.id for h in hits) == sorted([first.id, second.id])
    memory.update(second.id, content="the tide was low", user_id="ana")  # copy now stale
    assert memory.archive([first.id], user_id="ana") == [first.id]
    assert [e.content for e in memory.get_all(user_id="ana").items] == ["the tide was low"]
    assert memory.restore(user_id="ana") == [first.id]
    assert memory.get_all(user_id="ana").total == 2


def test_a_large_archive_and_restore_move_in_batches_each_whole_and_a_cut_one_is_finished_later(
    memory, monkeypatch
) -> None:
    added = memory.add([f"note number {i}" for i in range(5)], user_id="ana")
    before = {e.id: snapshot(memory, e.id) for e in added}
    monkeypatch.setattr(forget_sql, "EPISODE_BATCH", 2)
    leave = SQLiteStore._leave_hot_indexes
    calls = []

    def killed_in_second_batch(self, scope, batch=None):
        calls.append(batch)
        if len(calls) == 2:  # the process dies after the second batch's copy
            raise KeyboardInterrupt
        return leave(self, scope, batch)

    with monkeypatch.context() as patch:
        patch.setattr(SQLiteStore, "_leave_hot_indexes", killed_in_second_batch)
        with pytest.raises(KeyboardInterrupt):
            memory.archive(user_id="ana")
    # The first batch moved whole; the rest is hot and intact, the second batch's
    # copies committed beside it.
    assert [len(batch.episode_ids) for batch in calls] == [2, 2]
    assert memory.get_all(user_id="ana").total == 3
    with closing(sqlite3.connect(memory.store.path)) as conn:
        assert conn.execute("SELECT COUNT(*) FROM archived_episodes").fetchone() == (4,)
    assert sorted(memory.archive(user_id="ana")) == sorted(e.id for e in added[2:])
    assert memory.get_all(user_id="ana").total == 0

    # Restoring moves back in batches too, each in one transaction: a kill inside the
    # second rolls it back whole, and the next restore brings back the rest.
    reinsert, rows = SQLiteStore._reinsert, []

    def killed_in_second_restore(conn, row):
        rows.append(row[0])
        if len(rows) == 4:
            raise KeyboardInterrupt
        reinsert(conn, row)

    with monkeypatch.context() as patch:
        patch.setattr(SQLiteStore, "_reinsert", staticmethod(killed_in_second_restore))
        with pytest.raises(KeyboardInterrupt):
            memory.restore(user_id="ana")
    assert memory.get_all(user_id="ana").total == 2
    assert len(memory.restore(user_id="ana")) == 3
    for episode_id, (episode, history, vector, times) in before.items():
        again = snapshot(memory, episode_id)
        assert again[0] == episode and again[1] == history and again[3] == times
        np.testing.assert_array_equal(again[2], vector)


def test_forget_reaches_archived_episodes(memory) -> None:
    (episode,) = memory.add("my pin is 4921", user_id="ana", session_id="s")
    memory.archive(user_id="ana")
    report = memory.forget(user_id="ana", containing="4921")
    assert report.episode_ids == (episode.id,)
    assert (report.counts.archived, report.counts.episodes, report.counts.sessions) == (1, 0, 1)
    assert memory.restore(user_id="ana") == []


def test_cli_archive_search_restore(tmp_path) -> None:
    path = tmp_path / "m.db"
    with Memory(path=path, embedder=EDGE, warm=False) as memory:
        (episode,) = memory.add("the lighthouse keeper waved", user_id="ana")
    base = ["--path", str(path), "--embedder", "edge"]
    runner = CliRunner()
    moved = runner.invoke(main, [*base, "archive", "--user", "ana", episode.id])
    assert moved.exit_code == 0, moved.output
    assert json.loads(moved.output) == {"archived": [episode.id]}
    search = [*base, "search", "lighthouse", "--user", "ana", "--json"]
    assert json.loads(runner.invoke(main, search).output) == []
    found = runner.invoke(main, [*search, "--include-archive"])
    assert [h["episode"]["id"] for h in json.loads(found.output)] == [episode.id]
    back = runner.invoke(main, [*base, "restore", "--user", "ana"])
    assert json.loads(back.output) == {"restored": [episode.id]}
    assert runner.invoke(main, [*base, "archive"]).exit_code == 2  # whole scope: name a user


def test_export_includes_archived_episodes_with_their_versions(memory, tmp_path) -> None:
    import io

    (episode,) = memory.add("the first draft", user_id="ana")
    memory.update(episode.id, content="the final text", user_id="ana")
    memory.archive(user_id="ana")
    out = io.StringIO()
    assert memory.export_jsonl(out) == 1
    with Memory(path=tmp_path / "copy.db", embedder=EDGE, warm=False) as copy:
        copy.import_jsonl(out.getvalue().splitlines())
        assert copy.get(episode.id, user_id="ana").content == "the final text"
        assert [v.content for v in copy.history(episode.id, user_id="ana")] == [
            "the first draft",
            "the final text",
        ]
