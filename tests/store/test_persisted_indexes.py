"""A SQLite store keeps its dense matrix and its lexical postings in files beside it, so
a fresh process searches at once instead of reading every row: the files are mapped
without reading the store's rows, used only when they match the store, caught up when
rows were appended, rebuilt when ahead, foreign or damaged, private to their owner,
and gone as soon as an erasure commits (no erased vector or word survives in them)."""

from __future__ import annotations

import os
import shutil
import stat
import threading
import warnings
from datetime import timedelta

import numpy as np
import pytest
from store_fixtures import DIM, T0, make_episode, unit_vectors

from anamnesis.store.base import Filters, Selection
from anamnesis.store.index import dense as dense_index
from anamnesis.store.index.dense import AnnSettings
from anamnesis.store.sqlite import SQLiteStore, dense_file, health, lexical_file
from anamnesis.store.sqlite import lexical as sqlite_lexical
from anamnesis.store.sqlite import reads as sqlite_reads
from anamnesis.types import Scope

ALICE = Scope("alice")
NO_FILTERS = Filters()
ROWS = 600
#: No approximate graph: these tests are about the matrix and the postings.
NO_GRAPH = AnnSettings(threshold=10**9)
#: The saved columns of the dense index's rows: the filters', then the rows' places.
FILTER_COLUMNS = ("roles", "speakers", "modalities", "event_times", "recorded")
PLACE_COLUMNS = ("episode_ids", "turn_indexes")
WORDS = ["harbour", "violin", "pepper", "glacier", "lantern", "orchid", "tram", "cobalt"]


@pytest.fixture(autouse=True)
def small_stores_persist(monkeypatch):
    monkeypatch.setattr(dense_file, "MIN_ROWS", 100)
    monkeypatch.setattr(lexical_file, "MIN_ROWS", 100)
    monkeypatch.setattr(dense_file, "RESAVE_ROWS", 50)
    monkeypatch.setattr(lexical_file, "RESAVE_ROWS", 50)


@pytest.fixture
def path(tmp_path):
    return tmp_path / "memory.db"


def _open(path) -> SQLiteStore:
    return SQLiteStore(path, dim=DIM, ann=NO_GRAPH)


def _text(i: int) -> str:
    return f"turn {i} about the {WORDS[i % len(WORDS)]} and the {WORDS[(i * 3) % len(WORDS)]}"


def _fill(store: SQLiteStore, rows: int = ROWS, seed: int = 0, start: int = 0) -> list:
    episodes = [make_episode(_text(start + i), scope=ALICE) for i in range(rows)]
    store.insert_episodes(episodes, unit_vectors(rows, seed=seed))
    return episodes


def _saved(path, kind: str) -> list:
    return sorted(path.parent.glob(f"{path.name}.{kind}.*"))


def _refuse_sql_rows(monkeypatch) -> None:
    """Fail if the store reads its vectors or builds its postings from SQLite."""

    def refuse(*args, **kwargs):
        raise AssertionError("read from the store's rows")

    monkeypatch.setattr(sqlite_lexical, "read_postings", refuse)
    original = sqlite_reads.SQLiteReads._load_dense

    def load(self):
        # Collected, then checked: sqlite3 swallows an exception raised in a trace.
        statements: list[str] = []
        if not self._dense_loaded:
            self._conn.set_trace_callback(statements.append)
        try:
            original(self)
        finally:
            self._conn.set_trace_callback(None)
        for statement in statements:
            _no_vector_scan(statement)

    monkeypatch.setattr(sqlite_reads.SQLiteReads, "_load_dense", load)


def _no_vector_scan(statement: str) -> None:
    assert "v.embedding" not in statement or "> 0" not in statement, statement


def _search_both(store: SQLiteStore, i: int) -> tuple[list, list]:
    vector = unit_vectors(ROWS, seed=0)[i]
    dense = store.dense_search(vector, ALICE, NO_FILTERS, 5)
    lexical = store.lexical_search([WORDS[i % len(WORDS)]], ALICE, NO_FILTERS, 5)
    return dense, lexical


def test_both_indexes_are_saved_beside_the_store_private_to_their_owner(path):
    store = _open(path)
    _fill(store)
    store.warm_up()
    files = _saved(path, "dense") + _saved(path, "lexical")
    assert dense_file.index_files.state_path(path, "dense") in files
    assert dense_file.index_files.state_path(path, "lexical") in files
    for file in files:
        assert file.parent == path.parent
        assert stat.S_IMODE(file.stat().st_mode) == 0o600
    store.close()


def test_a_copy_is_written_by_one_writer_while_the_others_leave_it_to_them(path):
    # Two writers of one copy (a warm-up thread and a closing Memory, two processes
    # opening the store) would remove each other's half-written files.
    store = _open(path)
    _fill(store)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with dense_file.index_files.sole_writer(path, "dense") as first:
            assert first
            with dense_file.index_files.sole_writer(path, "dense") as second:
                assert not second
            store.warm_up()  # another writer holds the copy: nothing written, no warning
            assert _saved(path, "dense") == []
        store.warm_up()
    assert dense_file.index_files.state_path(path, "dense") in _saved(path, "dense")
    lock = path.with_name(path.name + ".dense-lock")
    assert lock.stat().st_size == 0
    assert stat.S_IMODE(lock.stat().st_mode) == 0o600
    store.close()


def test_opening_leaves_alone_the_files_another_writer_has_not_named_yet(path):
    # A store opened while another thread or process writes its first copy finds
    # parts no state names yet: they are that writer's, half-written, and stay.
    store = _open(path)
    _fill(store)
    store.close()
    half = dense_file.index_files.part_path(path, "dense", "0123456789ab", "npy")
    half.write_bytes(b"half written")
    with dense_file.index_files.sole_writer(path, "dense") as writing:
        assert writing
        reopened = _open(path)
        reopened.dense_search(unit_vectors(1, seed=3)[0], ALICE, NO_FILTERS, 3)
        reopened.close()
        assert half.exists()
    # With no writer at work, such parts are a crash's leftovers: removed at open.
    again = _open(path)
    again.dense_search(unit_vectors(1, seed=3)[0], ALICE, NO_FILTERS, 3)
    assert not half.exists()
    again.close()


def test_the_rows_from_which_both_are_saved_can_be_set_from_the_environment(path, monkeypatch):
    from anamnesis.errors import InvalidInputError
    from anamnesis.store.sqlite.index_files import THRESHOLD_ENV

    monkeypatch.setenv(THRESHOLD_ENV, str(ROWS + 1))
    store = _open(path)
    _fill(store)
    store.warm_up()
    assert _saved(path, "dense") == _saved(path, "lexical") == []  # below it: not saved
    store.close()
    monkeypatch.setenv(THRESHOLD_ENV, "1")
    store = _open(path)
    store.warm_up()
    assert _saved(path, "dense") and _saved(path, "lexical")
    store.close()
    monkeypatch.setenv(THRESHOLD_ENV, "few")
    with pytest.raises(InvalidInputError, match=THRESHOLD_ENV):
        _open(path)


def test_a_fresh_store_maps_both_without_reading_the_rows(path, monkeypatch):
    store = _open(path)
    _fill(store)
    store.warm_up()
    before = _search_both(store, 7)
    store.close()

    _refuse_sql_rows(monkeypatch)
    reopened = _open(path)
    assert "not loaded yet: FTS5 answers meanwhile" in reopened.lexical_backend
    after = _search_both(reopened, 7)
    assert reopened._dense.mapped
    assert reopened._lexical.ready
    assert after == before
    assert "mapped from beside the store" in reopened.lexical_backend
    assert "mapped from beside the store" in reopened.vector_backend
    reopened.close()


def _filtered(store: SQLiteStore) -> list:
    vector = unit_vectors(ROWS, seed=0)[3]
    return [
        [c.episode_id for c in store.dense_search(vector, ALICE, filters, 8)]
        for filters in (
            Filters(role="assistant"),
            Filters(not_role="assistant"),
            Filters(speaker="Ann"),
            Filters(event_before=T0 + timedelta(hours=300)),
            Filters(recorded_before=T0 + timedelta(hours=200), modality="text"),
        )
    ]


def _fill_with_columns(store: SQLiteStore) -> None:
    episodes = [
        make_episode(
            _text(i),
            scope=ALICE,
            role="assistant" if i % 3 else "user",
            speaker="Ann" if i % 5 == 0 else None,
            event_time=T0 + timedelta(hours=i),
            recorded_at=T0 + timedelta(hours=i),
        )
        for i in range(ROWS)
    ]
    store.insert_episodes(episodes, unit_vectors(ROWS, seed=0))


def _refuse_column_reads(monkeypatch) -> None:
    def refuse(self):
        if self._dense.columns_loaded != self._dense.size:
            raise AssertionError("read the filter columns from the store's rows")

    monkeypatch.setattr(sqlite_reads.SQLiteReads, "_load_dense_columns", refuse)


def test_filter_columns_are_saved_with_the_matrix_and_not_read_again(path, monkeypatch):
    store = _open(path)
    _fill_with_columns(store)
    store.warm_up()
    before = _filtered(store)
    store.close()
    assert all(before) and len({tuple(ids) for ids in before}) == len(before)

    with monkeypatch.context() as patch:
        _refuse_column_reads(patch)
        reopened = _open(path)
        assert _filtered(reopened) == before
        assert reopened._dense.mapped
        reopened.close()


def test_a_saved_matrix_without_filter_columns_reads_them_once_and_saves_them(path, monkeypatch):
    # Files written before the columns were saved hold none: the first filtered search
    # reads them from the rows, and the next save writes them beside the matrix.
    store = _open(path)
    _fill_with_columns(store)
    with monkeypatch.context() as patch:
        _save_without(patch, FILTER_COLUMNS + PLACE_COLUMNS)
        store.warm_up()
        before = _filtered(store)
        store.close()
    reopened = _open(path)
    reopened.dense_search(unit_vectors(1, seed=5)[0], ALICE, NO_FILTERS, 1)
    assert reopened._dense.mapped and reopened._dense.columns_loaded == 0
    assert _filtered(reopened) == before
    reopened.close()
    with monkeypatch.context() as patch:
        _refuse_column_reads(patch)
        again = _open(path)
        assert _filtered(again) == before
        again.close()


def _save_without(patch, named) -> None:
    """Make the dense index save its matrix without the ``named`` columns, as files
    written before those columns were kept hold none."""
    export = dense_index.DenseIndex.export

    def without(self, grouped=True):
        matrix, columns, tables = export(self, grouped=grouped)
        return (
            matrix,
            {k: v for k, v in columns.items() if k not in named},
            {k: v for k, v in tables.items() if k not in named},
        )

    patch.setattr(dense_index.DenseIndex, "export", without)


def _places_read_in_sql(store: SQLiteStore) -> dict:
    """Every row placed from cold (``_in_scope``), and whether any was read in SQL."""
    rowids = [row[0] for row in store._conn.execute("SELECT rowid FROM episodes")]
    store._row_places = None
    statements: list[str] = []
    store._conn.set_trace_callback(statements.append)
    try:
        placed = store._in_scope(rowids, ALICE)
    finally:
        store._conn.set_trace_callback(None)
    assert len(placed) == ROWS
    return {"placed": placed, "sql": any("e.rowid IN" in s for s in statements)}


def test_a_saved_matrix_without_place_columns_answers_and_reads_them_once(path, monkeypatch):
    # Files saved before the rows' ids and turn indexes were kept: searches place their
    # rows in SQL until the warm-up has read the columns (a batch at a time, searches
    # going on between them), and the next save keeps them.
    monkeypatch.setattr(sqlite_reads, "COLUMN_BATCH", 64)
    store = _open(path)
    _fill_with_columns(store)
    with monkeypatch.context() as patch:
        _save_without(patch, PLACE_COLUMNS)
        store.warm_up()
        before = _filtered(store), _search_both(store, 4)
        store.close()
    (npz,) = [f for f in _saved(path, "dense") if f.suffix == ".npz"]
    assert "episode_ids" not in np.load(npz).files
    reopened = _open(path)
    assert _search_both(reopened, 4) == before[1]
    assert reopened._dense.mapped and reopened._dense.columns_loaded == 0
    in_sql = _places_read_in_sql(reopened)
    assert in_sql["sql"]
    with reopened._lock:
        assert reopened._add_dense_columns()  # the warm-up's first batch
    assert reopened._dense.columns_loaded == 64
    assert len(reopened._dense.places(in_sql["placed"])) == 64
    assert _places_read_in_sql(reopened) == in_sql  # the rest still read in SQL
    reopened.warm_up()
    assert reopened._dense.columns_loaded == reopened._dense.size
    assert _places_read_in_sql(reopened) == {**in_sql, "sql": False}
    assert _filtered(reopened) == before[0]
    reopened.close()
    with monkeypatch.context() as patch:
        _refuse_column_reads(patch)
        again = _open(path)
        assert (_filtered(again), _search_both(again, 4)) == before
        assert again._dense.mapped
        assert _places_read_in_sql(again) == {**in_sql, "sql": False}
        again.close()


def test_sessions_and_agents_of_a_mapped_matrix_are_the_same_scopes(path):
    store = _open(path)
    scopes = [Scope("alice", agent, session) for agent in ("a1", None) for session in "xyz"]
    for n, scope in enumerate(scopes):
        episodes = [make_episode(f"{scope} turn {i}", scope=scope) for i in range(120)]
        store.insert_episodes(episodes, unit_vectors(120, seed=n))
    store.warm_up()
    query = unit_vectors(1, seed=99)[0]
    searched = [Scope("alice", "a1", "y"), Scope("alice", None, "z"), Scope("alice", "a1")]

    def ranked(store: SQLiteStore) -> list:
        return [store.dense_search(query, scope, NO_FILTERS, 7) for scope in searched]

    before = ranked(store)
    store.close()
    reopened = _open(path)
    assert ranked(reopened) == before
    assert reopened._dense.mapped
    late = make_episode("late turn", scope=Scope("alice", "a1", "y"))
    reopened.insert_episodes([late], query[None, :])
    assert reopened.dense_search(query, searched[0], NO_FILTERS, 1)[0].episode_id == late.id
    assert late.id not in [
        c.episode_id for c in reopened.dense_search(query, searched[1], NO_FILTERS, 7)
    ]
    reopened.close()


def test_the_lexical_copy_ranks_as_fts5_does(path):
    store = _open(path)
    _fill(store)
    store.warm_up()
    store.close()
    reopened = _open(path)
    for word in WORDS:
        mapped = reopened.lexical_search([word, "turn"], ALICE, NO_FILTERS, 20)
        assert reopened._lexical.ready
        reference = reopened.fts5_lexical_search([word, "turn"], ALICE, NO_FILTERS, 20)
        assert [c.episode_id for c in mapped] == [c.episode_id for c in reference]
        assert [c.score for c in mapped] == pytest.approx([c.score for c in reference])
    reopened.close()


def test_rows_appended_since_are_caught_up_and_saved_again(path):
    store = _open(path)
    _fill(store)
    store.warm_up()
    store.close()
    # Rows appended by a process that saved nothing (or crashed before saving).
    other = _open(path)
    other._dense_file.persist = other._lexical.file.persist = False
    extra = _fill(other, rows=80, seed=3, start=ROWS)
    other.close()

    store = _open(path)
    target = unit_vectors(80, seed=3)[41]
    assert store.dense_search(target, ALICE, NO_FILTERS, 1)[0].episode_id == extra[41].id
    assert store._dense.mapped and store._dense.size == ROWS + 80
    store.warm_up()
    assert store._lexical.ready
    store.close()
    state = dense_file.index_files.read_state(path, "dense")
    assert state is not None and state["count"] == ROWS + 80
    lexical_state = dense_file.index_files.read_state(path, "lexical")
    assert lexical_state is not None and lexical_state["documents"] == ROWS + 80


def test_files_ahead_of_the_store_are_detected_and_rebuilt(path, tmp_path):
    store = _open(path)
    _fill(store)
    store.close()
    saved = tmp_path / "before.db"
    shutil.copy(path, saved)
    # The files are saved covering rows the store then loses (a crash rolls it back).
    store = _open(path)
    _fill(store, rows=80, seed=3, start=ROWS)
    store.warm_up()
    store.close()
    assert _saved(path, "dense") and _saved(path, "lexical")
    shutil.copy(saved, path)

    store = _open(path)
    lost = unit_vectors(80, seed=3)[5]
    assert store.dense_search(lost, ALICE, NO_FILTERS, 1)[0].score < 0.999
    assert not store._dense.mapped and store._dense.size == ROWS
    store.warm_up()
    assert store._lexical._index is not None and store._lexical._index.documents == ROWS
    store.close()


def test_files_of_another_store_under_the_same_rowids_are_rebuilt(path):
    store = _open(path)
    _fill(store)
    store.warm_up()
    store.close()
    kept = {
        kind: dense_file.index_files.state_path(path, kind).read_text()
        for kind in ("dense", "lexical")
    }
    parts = {file: file.read_bytes() for file in _saved(path, "dense") + _saved(path, "lexical")}
    path.unlink()
    store = _open(path)  # a new store whose rowids coincide, other vectors and words
    store._dense_file.persist = store._lexical.file.persist = False
    episodes = [make_episode(f"other text {i}", scope=ALICE) for i in range(ROWS)]
    store.insert_episodes(episodes, unit_vectors(ROWS, seed=9))
    store.close()
    for file, data in parts.items():
        file.write_bytes(data)
    for kind, text in kept.items():
        dense_file.index_files.state_path(path, kind).write_text(text)

    store = _open(path)
    query = unit_vectors(ROWS, seed=9)[10]
    assert store.dense_search(query, ALICE, NO_FILTERS, 1)[0].episode_id == episodes[10].id
    assert not store._dense.mapped
    assert store.lexical_search(["violin"], ALICE, NO_FILTERS, 5) == []
    store.close()


def test_a_damaged_matrix_is_detected_and_read_from_the_store(path):
    store = _open(path)
    _fill(store)
    store.warm_up()
    store.close()
    (matrix,) = [f for f in _saved(path, "dense") if f.suffix == ".npy"]
    with open(matrix, "rb") as file:
        np.lib.format.read_magic(file)
        np.lib.format.read_array_header_1_0(file)
        header = file.tell()
    data = bytearray(matrix.read_bytes())
    row = header + 100 * 4 * DIM  # a row no sample checks on open
    data[row : row + 4 * DIM] = np.ones(DIM, dtype=np.float32).tobytes()
    matrix.write_bytes(bytes(data))

    store = _open(path)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        store.warm_up()
        assert store._dense_checker is not None
        store._dense_checker.join()  # the check runs on a thread of its own
    assert any("damaged" in str(w.message) for w in caught)
    assert not store._dense.mapped
    for i in (0, 250, 599):
        got = store.dense_search(unit_vectors(ROWS)[i], ALICE, NO_FILTERS, 1)
        assert got[0].score == pytest.approx(1.0)
    store.close()


def test_unreadable_files_are_rebuilt(path):
    store = _open(path)
    _fill(store)
    store.warm_up()
    before = _search_both(store, 3)
    store.close()
    for file in _saved(path, "dense") + _saved(path, "lexical"):
        if not file.name.endswith(".json"):
            file.write_bytes(b"not an index")
    store = _open(path)
    store.warm_up()
    assert _search_both(store, 3) == before
    assert not store._dense.mapped
    store.close()


def test_a_damaged_lexical_copy_is_rebuilt_from_fts5(path):
    store = _open(path)
    _fill(store)
    store.warm_up()
    store.close()
    (tfs,) = [f for f in _saved(path, "lexical") if f.name.endswith(".tfs.npy")]
    data = bytearray(tfs.read_bytes())
    data[-40:] = np.full(10, 7.0, dtype=np.float32).tobytes()
    tfs.write_bytes(bytes(data))

    store = _open(path)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        store.warm_up()
    assert any("damaged" in str(w.message) for w in caught)
    for word in WORDS:
        got = store.lexical_search([word], ALICE, NO_FILTERS, 10)
        reference = store.fts5_lexical_search([word], ALICE, NO_FILTERS, 10)
        assert [c.score for c in got] == pytest.approx([c.score for c in reference])
    store.close()


def test_erasure_leaves_no_copy_before_it_commits(path, monkeypatch):
    store = _open(path)
    _fill(store)
    secret = make_episode("the zanzibarquux password", scope=ALICE)
    secret_vector = unit_vectors(1, seed=42)
    store.insert_episodes([secret], secret_vector)
    store.warm_up()
    store.close()
    store = _open(path)
    _search_both(store, 1)  # both copies in use
    assert store._dense.mapped and store._lexical.ready

    # Even a process killed right after the commit leaves no copy behind.
    def killed(*args):
        raise KeyboardInterrupt

    monkeypatch.setattr(store._lexical, "after_change", killed)
    with pytest.raises(KeyboardInterrupt):
        store.forget(ALICE, Selection(episode_ids=(secret.id,)))
    assert not _saved(path, "dense") and not _saved(path, "lexical")
    monkeypatch.undo()
    found = store.dense_search(secret_vector[0], ALICE, NO_FILTERS, 1)
    assert found and found[0].episode_id != secret.id
    store.close()


def test_a_search_after_an_erasure_leaves_the_rows_out_of_the_matrix_without_a_reload(
    path, monkeypatch
):
    """Not every vector read from the store again, nor the matrix copied: the rows are
    marked removed in the mapping that serves the others (the file's name is gone with
    the erasure), and the copies saved later hold nothing of them."""
    store = _open(path)
    episodes = _fill(store)
    store.warm_up()
    vectors = unit_vectors(ROWS, seed=0)
    before = store.dense_search(vectors[5], ALICE, NO_FILTERS, 5)
    store.close()
    store = _open(path)
    _search_both(store, 1)
    assert store._dense.mapped
    store.forget(ALICE, Selection(episode_ids=(episodes[1].id,)))
    assert not _saved(path, "dense") and not _saved(path, "lexical")

    _refuse_sql_rows(monkeypatch)
    assert store.dense_search(vectors[5], ALICE, NO_FILTERS, 5) == before
    assert store._dense.mapped and store._dense.removed == 1  # no copy in the search
    found = store.dense_search(vectors[1], ALICE, NO_FILTERS, ROWS)
    assert episodes[1].id not in {c.episode_id for c in found}
    assert len(found) == ROWS - 1
    monkeypatch.undo()
    store.close()  # saves both copies again, compacted
    saved = b"".join(f.read_bytes() for f in _saved(path, "dense"))
    assert saved and vectors[1].tobytes() not in saved


def test_an_erasure_frees_the_copies_blocks_on_another_thread(path, monkeypatch):
    """Their names go before the forget returns; freeing a large file takes time
    that grows with it, which the forget does not wait for."""
    store = _open(path)
    episodes = _fill(store)
    store.warm_up()
    freed: list[tuple[str, int]] = []
    close_all = dense_file.index_files._close_all

    def closing(descriptors):
        for descriptor in descriptors:
            freed.append((threading.current_thread().name, os.fstat(descriptor).st_nlink))
        close_all(descriptors)

    monkeypatch.setattr(dense_file.index_files, "_close_all", closing)
    store.forget(ALICE, Selection(episode_ids=(episodes[0].id,)))
    assert not _saved(path, "dense") and not _saved(path, "lexical")
    for worker in threading.enumerate():
        if worker.name == "anamnesis-discard":
            worker.join()
    parts = [f for f in freed if f[0] == "anamnesis-discard"]
    assert len(parts) == len(freed) >= 2  # the matrix's and the postings' files
    assert all(links == 0 for _, links in parts)  # unlinked before they were freed
    store.close()


def test_a_copy_removed_by_an_erasure_while_it_is_checked_is_not_taken_for_damage(path):
    """The background check of a mapped matrix reads the files it was loaded from,
    even when a forget removes them first: no false alarm, no reload from the store."""
    store = _open(path)
    episodes = _fill(store)
    store.warm_up()
    store.close()
    store = _open(path)
    _search_both(store, 1)
    assert store._dense.mapped
    with store._lock:
        check = store._dense_file.checking()  # what warm_up hands to its thread
    assert check is not None
    store.forget(ALICE, Selection(episode_ids=(episodes[0].id,)))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert check()
    store.close()


def test_copies_saved_after_an_erasure_hold_nothing_of_it(path):
    store = _open(path)
    _fill(store)
    secret = make_episode("the zanzibarquux password", scope=ALICE)
    secret_vector = unit_vectors(1, seed=42)
    store.insert_episodes([secret], secret_vector)
    store.warm_up()
    saved = b"".join(f.read_bytes() for f in _saved(path, "dense") + _saved(path, "lexical"))
    assert b"zanzibarquux" in saved and secret_vector[0].tobytes() in saved
    store.forget(ALICE, Selection(episode_ids=(secret.id,)))
    store.warm_up()  # in-place removal, then both saved again
    store.close()
    files = _saved(path, "dense") + _saved(path, "lexical")
    assert any(f.suffix == ".npy" for f in files)
    for file in files:
        data = file.read_bytes()
        assert b"zanzibarquux" not in data, file
        assert secret_vector[0].tobytes() not in data, file
    reopened = _open(path)
    assert reopened.lexical_search(["zanzibarquux"], ALICE, NO_FILTERS, 5) == []
    reopened.close()


def test_a_read_only_store_saves_nothing_beside_it(path, monkeypatch):
    store = _open(path)
    _fill(store)
    store.close()
    # As for a file or file system this user cannot write (root ignores modes).
    monkeypatch.setattr(health, "read_only_reason", lambda path: "read-only file")
    store = _open(path)
    assert store.read_only is not None
    store.warm_up()
    _search_both(store, 2)
    store.close()
    assert not _saved(path, "dense") and not _saved(path, "lexical")


def test_a_state_file_of_another_layout_is_rebuilt(path):
    store = _open(path)
    _fill(store)
    store.warm_up()
    before = _search_both(store, 4)
    store.close()
    for kind in ("dense", "lexical"):
        state = dense_file.index_files.state_path(path, kind)
        state.write_text('{"generation": "x", "epoch": "0", "max_rowid": 1}')
    store = _open(path)
    assert _search_both(store, 4) == before
    assert not store._dense.mapped
    store.close()


#: A child that appends, forgets, saves and searches in a loop until killed; every
#: word it may write is logged before the write.
_WORKER = r"""
import random, sys
sys.path.insert(0, sys.argv[3])
from store_fixtures import DIM, T0, make_episode, unit_vectors
from anamnesis.store.base import Filters, Selection
from anamnesis.store.index import dense as dense_index
from anamnesis.store.index.dense import AnnSettings
from anamnesis.store.sqlite import SQLiteStore, dense_file, lexical_file
from anamnesis.types import Scope
dense_file.MIN_ROWS = lexical_file.MIN_ROWS = 100
dense_file.RESAVE_ROWS = lexical_file.RESAVE_ROWS = 30
path, seed = sys.argv[1], int(sys.argv[2])
rng = random.Random(seed)
words = open(path + ".words", "a")
scope = Scope("alice")
batch = 0
while True:
    store = SQLiteStore(path, dim=DIM, ann=AnnSettings(threshold=10**9))
    for _ in range(rng.randint(1, 4)):
        batch += 1
        names = [f"q{seed}b{batch}n{i}x" for i in range(40)]
        words.write("\n".join(names) + "\n"); words.flush()
        episodes = [make_episode(f"turn about {n}", scope=scope) for n in names]
        store.insert_episodes(episodes, unit_vectors(40, seed=seed * 1000 + batch))
        if rng.random() < 0.5:
            gone = rng.sample(episodes, 5)
            store.forget(scope, Selection(episode_ids=tuple(e.id for e in gone)))
        if rng.random() < 0.5:
            store.warm_up()
        store.lexical_search([names[0]], scope, Filters(), 5)
        store.dense_search(unit_vectors(1, seed=batch)[0], scope, Filters(), 5)
    store.close()
"""


def test_killed_writers_leave_no_file_out_of_step_or_holding_erased_rows(path):
    import os
    import random
    import signal
    import subprocess
    import sys
    import time
    from pathlib import Path

    from anamnesis.store.sqlite.driver import sqlite3

    tests = str(Path(__file__).resolve().parent.parent)
    rng = random.Random(7)
    mapped = erased_seen = 0
    for kill in range(6):
        child = subprocess.Popen(
            [sys.executable, "-c", _WORKER, str(path), str(kill + 1), tests],
            env={**os.environ, "PYTHONPATH": os.getcwd()},
        )
        # Killed at a random moment once the child has opened the store and begun
        # writing (on a busy machine, starting the child alone takes seconds).
        words = Path(str(path) + ".words")
        started = time.monotonic()
        while (not words.exists() or words.stat().st_size == 0) and child.poll() is None:
            assert time.monotonic() - started < 120, "the writer never began"
            time.sleep(0.05)
        time.sleep(rng.uniform(1.0, 4.0))
        child.send_signal(signal.SIGKILL)
        child.wait()

        # What the kill left on disk, before any open could tidy it.
        saved = b"".join(f.read_bytes() for f in _saved(path, "dense") + _saved(path, "lexical"))
        with sqlite3.connect(path) as conn:
            contents = " ".join(r[0] for r in conn.execute("SELECT content FROM episodes"))
        logged = Path(str(path) + ".words").read_text().split()
        erased = [w for w in logged if w not in contents]
        assert not [w for w in erased if w.encode() in saved]
        erased_seen += bool(erased)

        store = _open(path)
        with store._lock:
            store._refresh_dense()
            mapped += store._dense.mapped
            rows = store._conn.execute(
                "SELECT episode_rowid, embedding FROM vectors ORDER BY episode_rowid"
            ).fetchall()
            assert store._dense.rowids_from(0).tolist() == [r for r, _ in rows]
            held = store._dense.vectors_at(slice(0, store._dense.size))
            assert held.tobytes() == b"".join(blob for _, blob in rows)
        for word in rng.sample(logged, min(20, len(logged))):
            got = store.lexical_search([word], ALICE, NO_FILTERS, 5)
            reference = store.fts5_lexical_search([word], ALICE, NO_FILTERS, 5)
            assert [c.episode_id for c in got] == [c.episode_id for c in reference]
        store.close()
    assert mapped and erased_seen  # the kills met saved files and erasures
