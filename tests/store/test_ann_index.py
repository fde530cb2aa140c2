"""Above a size threshold, the SQLite store's dense search takes its candidates from an
approximate graph (usearch HNSW) and rescores them exactly: its recall against the
exact scan, its persistence beside the store, the detection of a graph behind or ahead
of the store, and the exact scan kept for small stores and small scopes."""

from __future__ import annotations

import json
import shutil

import numpy as np
import pytest
from store_fixtures import DIM, make_episode, unit_vectors

from anamnesis.store.base import Filters, Selection
from anamnesis.store.index import ann as ann_module
from anamnesis.store.index.ann import AnnIndex, AnnState
from anamnesis.store.index.dense import _SCAN_BLOCK, AnnSettings, scan_cosines
from anamnesis.store.sqlite import SQLiteStore, dense_file
from anamnesis.store.sqlite import ann as sqlite_ann
from anamnesis.store.sqlite.ann import SQLiteAnn
from anamnesis.types import Scope

ALICE = Scope("alice")
BOB = Scope("bob")
NO_FILTERS = Filters()
#: Small enough that a test store of a few thousand rows crosses it.
SETTINGS = AnnSettings(threshold=500, scope_fraction=0.5)
ROWS = 2000


def _open(path, settings: AnnSettings = SETTINGS) -> SQLiteStore:
    return SQLiteStore(path, dim=DIM, ann=settings)


def _fill(store: SQLiteStore, rows: int = ROWS, scope: Scope = ALICE, seed: int = 0) -> list:
    episodes = [make_episode(f"turn {i} of {scope.user_id}", scope=scope) for i in range(rows)]
    store.insert_episodes(episodes, unit_vectors(rows, seed=seed))
    return episodes


def _exact(store: SQLiteStore, vector: np.ndarray, scope: Scope, limit: int) -> list:
    """The exact scan's ranking, as ``(rowid, score)`` pairs."""
    with store._lock:
        store._refresh_dense()
        return store._dense.search(vector, user_id=scope.user_id, limit=limit, exact=True)


def _ids(candidates) -> list[str]:
    return [c.episode_id for c in candidates]


@pytest.fixture
def path(tmp_path):
    return tmp_path / "memory.db"


def test_graph_recall_at_100_against_the_exact_scan_is_at_least_0_98(path):
    store = _open(path)
    _fill(store)
    store.warm_up()
    assert store._ann.ready
    recalls = []
    for query in unit_vectors(30, seed=99):
        exact = {rowid for rowid, _ in _exact(store, query, ALICE, 100)}
        with store._lock:
            found = store._dense.search(query, user_id="alice", limit=100)
        assert store._dense.ann is not None
        recalls.append(len(exact & {rowid for rowid, _ in found}) / 100)
    assert np.mean(recalls) >= 0.98
    store.close()


def test_graph_results_are_rescored_exactly(path):
    store = _open(path)
    _fill(store)
    store.warm_up()
    query = unit_vectors(1, seed=5)[0]
    exact = dict(_exact(store, query, ALICE, 20))
    with store._lock:
        found = store._dense.search(query, user_id="alice", limit=20)
    common = [rowid for rowid, _ in found if rowid in exact]
    assert len(common) >= 18
    assert [s for r, s in found if r in exact] == pytest.approx([exact[r] for r in common])
    store.close()


def test_below_the_threshold_search_is_the_exact_scan(path, monkeypatch):
    store = _open(path, AnnSettings(threshold=ROWS + 1))
    _fill(store)
    store.warm_up()
    assert not store._ann.ready
    monkeypatch.setattr(ann_module.AnnIndex, "search", _refuse)
    for query in unit_vectors(5, seed=3):
        got = store.dense_search(query, ALICE, NO_FILTERS, 10)
        assert [c.score for c in got] == [s for _, s in _exact(store, query, ALICE, 10)]
    store.close()


def test_tied_scores_rank_in_row_order_through_the_graph_as_in_the_exact_scan(path):
    # Repeated texts ("Take care, bye!") have the same vector: their order must not
    # depend on which rows were scored (the graph's candidates or the whole scope).
    store = _open(path)
    vectors = unit_vectors(ROWS, seed=2)
    repeated = unit_vectors(1, seed=99)[0]
    vectors[::200] = repeated
    episodes = [make_episode(f"turn {i}", scope=ALICE) for i in range(ROWS)]
    store.insert_episodes(episodes, vectors)
    store.warm_up()
    expected = [e.id for e in episodes[::200]]
    assert _ids(store.dense_search(repeated, ALICE, NO_FILTERS, 40))[:10] == expected
    assert store._dense.graph_searches == 1
    with store._lock:
        exact = store._dense.search(repeated, user_id="alice", limit=40, exact=True)
        ids = store._in_scope([rowid for rowid, _ in exact], ALICE)
    assert [ids[rowid][0] for rowid, _ in exact][:10] == expected
    store.close()


def test_the_dense_index_counts_searches_through_the_graph_and_exact_scans(path):
    store = _open(path)
    _fill(store)
    _fill(store, rows=10, scope=BOB, seed=1)
    store.warm_up()
    query = unit_vectors(1, seed=4)[0]
    store.dense_search(query, ALICE, NO_FILTERS, 10)
    store.dense_search(query, ALICE, NO_FILTERS, 10)
    store.dense_search(query, BOB, NO_FILTERS, 10)  # a small scope: scanned exactly
    assert (store._dense.graph_searches, store._dense.exact_searches) == (2, 1)
    store.close()


def _move(store: SQLiteStore, episode) -> np.ndarray:
    """Give ``episode`` new text and a new vector (an update); returns the vector."""
    moved = unit_vectors(1, seed=123)[0]
    store.update_episode(
        episode.id,
        ALICE,
        content="moved",
        content_hash="h",
        metadata={},
        vector=moved,
        changed_at=episode.recorded_at,
    )
    return moved


def _refuse(*args, **kwargs):
    raise AssertionError("the graph was consulted")


def test_a_small_scope_in_a_large_store_is_scanned_exactly(path, monkeypatch):
    store = _open(path)
    _fill(store)
    bob = _fill(store, rows=50, scope=BOB, seed=1)
    store.warm_up()
    assert store._ann.ready
    monkeypatch.setattr(ann_module.AnnIndex, "search", _refuse)
    query = unit_vectors(1, seed=8)[0]
    got = store.dense_search(query, BOB, NO_FILTERS, 10)
    assert set(_ids(got)) <= {e.id for e in bob}
    assert [c.score for c in got] == [s for _, s in _exact(store, query, BOB, 10)]
    store.close()


def test_a_large_scope_among_others_gets_only_its_own_rows(path):
    store = _open(path)
    alice = {e.id for e in _fill(store)}
    _fill(store, rows=400, scope=BOB, seed=1)
    store.warm_up()
    for query in unit_vectors(5, seed=11):
        got = store.dense_search(query, ALICE, NO_FILTERS, 50)
        assert len(got) == 50 and set(_ids(got)) <= alice
    store.close()


def test_the_graph_is_persisted_and_loaded_without_a_rebuild(path, monkeypatch):
    store = _open(path)
    _fill(store)
    store.warm_up()
    query = unit_vectors(1, seed=4)[0]
    before = store.dense_search(query, ALICE, NO_FILTERS, 10)
    store.close()
    assert ann_module.state_path(path).exists()

    built = []
    monkeypatch.setattr(SQLiteAnn, "_build", lambda self, *a: built.append(a))
    reopened = _open(path)
    assert reopened.dense_search(query, ALICE, NO_FILTERS, 10) == before
    assert reopened._ann.ready and not built
    reopened.close()


def test_a_graph_behind_the_store_is_caught_up(path):
    store = _open(path)
    _fill(store)
    store.warm_up()
    store.close()
    # Rows appended while no graph was open (another process, or a crash before save).
    other = _open(path, AnnSettings(threshold=10**9))
    extra = _fill(other, rows=100, seed=2)
    other.close()
    store = _open(path)
    target = unit_vectors(100, seed=2)[57]
    assert store.dense_search(target, ALICE, NO_FILTERS, 1)[0].episode_id == extra[57].id
    store.warm_up()
    assert len(store._ann._graph) == ROWS + 100
    store.close()


def test_a_graph_ahead_of_the_store_is_detected_and_rebuilt(path, tmp_path):
    store = _open(path)
    _fill(store)
    store.close()
    saved = tmp_path / "before.db"
    shutil.copy(path, saved)
    # The graph is saved covering rows the store then loses (a crash rolls it back).
    store = _open(path)
    _fill(store, rows=100, seed=2)
    store.warm_up()
    store.close()
    shutil.copy(saved, path)
    store = _open(path)
    store.warm_up()
    assert store._ann.ready and len(store._ann._graph) == ROWS
    lost = unit_vectors(100, seed=2)[3]
    assert store.dense_search(lost, ALICE, NO_FILTERS, 5)[0].score < 0.999
    store.close()


def test_a_graph_of_different_rows_under_the_same_rowids_is_rebuilt(path, tmp_path):
    store = _open(path)
    _fill(store)
    store.warm_up()
    store.close()
    state = ann_module.state_path(path)
    kept = state.read_text()
    path.unlink()
    store = _open(path)  # a new store whose rowids coincide, other vectors
    _fill(store, seed=7)
    store.close()
    state.write_text(kept)
    store = _open(path)
    store.warm_up()
    query = unit_vectors(ROWS, seed=7)[10]
    assert store.dense_search(query, ALICE, NO_FILTERS, 1)[0].score == pytest.approx(1.0)
    assert len(store._ann._graph) == ROWS
    store.close()


def test_a_damaged_graph_file_is_rebuilt(path):
    store = _open(path)
    _fill(store)
    store.warm_up()
    store.close()
    for graph in path.parent.glob("memory.db.ann.*"):
        if not graph.name.endswith(".json"):
            graph.write_bytes(b"not a graph")
    store = _open(path)
    store.warm_up()
    assert store._ann.ready
    store.close()


def test_this_process_forget_and_update_apply_in_place(path):
    store = _open(path)
    episodes = _fill(store)
    store.warm_up()
    store.close()
    store = _open(path)
    vectors = unit_vectors(ROWS)
    store.dense_search(vectors[0], ALICE, NO_FILTERS, 5)  # loads the saved graph
    assert store._ann.ready and store._ann._graph.view  # mapped, not read
    store.forget(ALICE, Selection(episode_ids=(episodes[5].id,)))
    assert not ann_module.state_path(path).exists()  # the erased vector left the disk
    assert store._ann._graph.view  # not copied by the forget
    got = store.dense_search(vectors[5], ALICE, NO_FILTERS, 5)
    assert episodes[5].id not in _ids(got)
    moved = _move(store, episodes[9])
    got = store.dense_search(moved, ALICE, NO_FILTERS, 1)
    assert got[0].episode_id == episodes[9].id and got[0].score == pytest.approx(1.0)
    assert store._ann.ready
    # The mapped graph is copied into memory without the removed row, and takes the
    # changed one again with its new vector.
    store.warm_up()
    graph = store._ann._graph
    assert not graph.view and len(graph) == ROWS - 1
    ((rowid,),) = store._read("SELECT rowid FROM episodes WHERE id = ?", (episodes[9].id,))
    assert graph.search(moved, 1).tolist() == [rowid]
    store.close()


def test_another_process_forget_drops_the_graph_for_a_rebuild(path):
    store = _open(path)
    episodes = _fill(store)
    store.warm_up()
    other = _open(path, AnnSettings(threshold=10**9))

    other.forget(ALICE, Selection(episode_ids=(episodes[5].id,)))
    other.close()
    got = store.dense_search(unit_vectors(ROWS)[5], ALICE, NO_FILTERS, 5)
    assert episodes[5].id not in _ids(got)
    store.warm_up()
    assert store._ann.ready and len(store._ann._graph) == ROWS - 1
    store.close()


def test_appended_rows_are_found_before_the_graph_holds_them(path):
    store = _open(path)
    _fill(store)
    store.warm_up()
    fresh = make_episode("just added")
    vector = unit_vectors(1, seed=77)
    store.insert_episodes([fresh], vector)
    assert store.dense_search(vector[0], ALICE, NO_FILTERS, 1)[0].episode_id == fresh.id
    store.close()


def test_the_threshold_can_be_set_from_the_environment(path, monkeypatch):
    from anamnesis.errors import InvalidInputError
    from anamnesis.store.index.dense import THRESHOLD_ENV

    monkeypatch.setenv(THRESHOLD_ENV, "100")
    store = SQLiteStore(path, dim=DIM)
    _fill(store, rows=300)
    store.warm_up()
    assert store._ann.ready
    store.close()
    monkeypatch.setenv(THRESHOLD_ENV, "many")
    with pytest.raises(InvalidInputError, match=THRESHOLD_ENV):
        SQLiteStore(path, dim=DIM)


def test_a_build_from_before_a_forget_is_neither_installed_nor_saved(path, monkeypatch):
    store = _open(path)
    episodes = _fill(store)
    with store._lock:
        store._refresh_dense()  # starts the background build
        worker = store._ann._worker
        assert worker is not None
        # The forget commits while the build is still reading the old rows.
        store.forget(ALICE, Selection(episode_ids=(episodes[5].id,)))
    worker.join()
    assert not ann_module.state_path(path).exists()
    store.warm_up()
    assert len(store._ann._graph) == ROWS - 1
    store.close()


def test_the_embedder_loads_after_a_graph_in_the_same_process(path):
    """onnxruntime imported after usearch's native module crashes the process; the
    graph loads onnxruntime first. Run in a fresh interpreter, where neither is loaded."""
    import subprocess
    import sys

    code = (
        "import sys\n"
        "from anamnesis.store.index.ann import AnnIndex\n"
        "import numpy as np\n"
        "graph = AnnIndex(8)\n"
        "graph.add(np.arange(1, 101), np.eye(100, 8, dtype=np.float32))\n"
        "import onnxruntime\n"
        "print('loaded', len(graph))\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-500:]
    assert "loaded 100" in done.stdout


def test_an_exact_scan_in_blocks_scores_as_one_product():
    """The exact scan scores its rows in blocks (on the calling thread): each row's
    cosine is its dot product with the query, whatever the block it falls in."""
    rng = np.random.default_rng(3)
    for rows in (1, _SCAN_BLOCK, _SCAN_BLOCK + 1, 3 * _SCAN_BLOCK + 7):
        matrix = rng.standard_normal((rows, 32)).astype(np.float32)
        query = rng.standard_normal(32).astype(np.float32)
        expected = np.array([float(np.dot(row, query)) for row in matrix], dtype=np.float32)
        np.testing.assert_allclose(scan_cosines(matrix, query), expected, rtol=1e-5, atol=1e-6)


def test_small_graphs_are_built_on_one_thread_large_ones_on_every_core():
    # A parallel build now and then leaves rows no search reaches; small graphs (only
    # forced ones are that small) are built on one thread, where every row is found.
    AnnIndex, rows = ann_module.AnnIndex, ann_module.PARALLEL_BUILD_ROWS
    assert AnnIndex.build_threads(rows - 1) == 1
    assert AnnIndex.build_threads(rows) == 0
    rng = np.random.default_rng(3)
    vectors = rng.normal(size=(512, 32)).astype(np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    graph = AnnIndex(32)
    graph.add(np.arange(1, 513), vectors, threads=AnnIndex.build_threads(512))
    assert all(graph.search(v, 1)[0] == i for i, v in enumerate(vectors, start=1))


def _reopened_with_a_mapped_graph(path) -> tuple[SQLiteStore, list]:
    """A store of ``ROWS`` rows whose graph was saved, opened again and searched once:
    its graph is the mapped file."""
    store = _open(path)
    episodes = _fill(store)
    store.warm_up()
    store.close()
    store = _open(path)
    store.dense_search(unit_vectors(ROWS)[0], ALICE, NO_FILTERS, 5)
    assert store._ann._graph.view
    return store, episodes


def _copies(monkeypatch) -> list[AnnIndex]:
    """The graphs copied into memory from here on."""
    copied: list[AnnIndex] = []
    original = AnnIndex.materialised

    def materialised(self: AnnIndex) -> AnnIndex:
        if self.view:
            copied.append(self)
        return original(self)

    monkeypatch.setattr(AnnIndex, "materialised", materialised)
    return copied


def _rowid(store: SQLiteStore, episode_id: str) -> int:
    ((rowid,),) = store._read("SELECT rowid FROM episodes WHERE id = ?", (episode_id,))
    return rowid


def test_a_forget_leaves_a_mapped_graph_mapped_until_the_next_save(path, monkeypatch):
    """Removals and a few appends copy nothing: the mapped graph keeps proposing the
    erased row, which no search returns, and appended rows are scored exactly. The save
    at close copies it once, without the erased row and with the appended one, and the
    next open maps that."""
    monkeypatch.setattr(dense_file, "MIN_ROWS", 100)  # the matrix saved, as a large store's
    store, episodes = _reopened_with_a_mapped_graph(path)
    copied = _copies(monkeypatch)
    graph = store._ann._graph
    vectors = unit_vectors(ROWS)
    erased = _rowid(store, episodes[5].id)
    fresh = make_episode("just added")
    fresh_vector = unit_vectors(1, seed=77)
    store.insert_episodes([fresh], fresh_vector)
    store.forget(ALICE, Selection(episode_ids=(episodes[5].id,)))
    store.forget(ALICE, Selection(episode_ids=(episodes[6].id,)))
    for _ in range(3):
        got = store.dense_search(vectors[5], ALICE, NO_FILTERS, 10)
        assert episodes[5].id not in _ids(got) and episodes[6].id not in _ids(got)
    assert store.dense_search(fresh_vector[0], ALICE, NO_FILTERS, 1)[0].episode_id == fresh.id
    if store._ann._worker is not None:
        store._ann._worker.join()
    assert store._ann._graph is graph and graph.view and not copied
    assert erased in graph.search(vectors[5], 10).tolist()  # proposed, and dropped
    assert store._dense.graph_searches >= 4
    store.close()
    assert len(copied) == 1 and ann_module.state_path(path).exists()

    built = []
    monkeypatch.setattr(SQLiteAnn, "_build", lambda self, *a: built.append(a))
    store = _open(path)
    got = store.dense_search(vectors[5], ALICE, NO_FILTERS, 10)
    assert episodes[5].id not in _ids(got)
    reloaded = store._ann._graph
    assert reloaded.view and not built
    assert len(reloaded) == ROWS - 1 and not reloaded._index.contains(erased)
    assert reloaded._index.contains(_rowid(store, fresh.id))
    assert store.dense_search(fresh_vector[0], ALICE, NO_FILTERS, 1)[0].episode_id == fresh.id
    store.close()


def test_a_mapped_graph_is_copied_once_too_many_rows_are_scored_exactly(path, monkeypatch):
    """Rows removed and appended past ``VIEW_EXACT_ROWS`` are the worker's cue to copy
    the graph into memory, without the removed rows and with the appended ones."""
    monkeypatch.setattr(sqlite_ann, "VIEW_EXACT_ROWS", 6)
    store, episodes = _reopened_with_a_mapped_graph(path)
    copied = _copies(monkeypatch)
    erased = _rowid(store, episodes[5].id)
    store.forget(ALICE, Selection(episode_ids=(episodes[5].id,)))
    _fill(store, rows=5, seed=3)
    store.dense_search(unit_vectors(1, seed=4)[0], ALICE, NO_FILTERS, 5)
    assert store._ann._graph.view and not copied  # one removed, five appended: six
    _fill(store, rows=1, seed=5)
    store.dense_search(unit_vectors(1, seed=4)[0], ALICE, NO_FILTERS, 5)
    store._ann._worker.join()
    graph = store._ann._graph
    assert len(copied) == 1 and not graph.view
    assert len(graph) == ROWS - 1 + 6
    assert not graph._index.contains(erased)
    store.close()


def test_rankings_after_a_forget_are_those_of_a_store_that_never_held_the_rows(path, tmp_path):
    """Through the mapped graph, after erasures: the same episodes in the same order,
    with the same scores, as a store into which the erased rows were never written."""
    store, episodes = _reopened_with_a_mapped_graph(path)
    vectors = unit_vectors(ROWS)
    erased = {5, 17, 1999}
    for n in sorted(erased):
        store.forget(ALICE, Selection(episode_ids=(episodes[n].id,)))
    never = _open(tmp_path / "never.db")
    kept = [n for n in range(ROWS) if n not in erased]
    never.insert_episodes([episodes[n] for n in kept], vectors[kept])
    never.warm_up()
    assert never._ann.ready and store._ann._graph.view
    queries = [vectors[5], vectors[17], vectors[1999], *unit_vectors(10, seed=8)]
    before = store._dense.graph_searches, never._dense.graph_searches
    for query in queries:
        got = store.dense_search(query, ALICE, NO_FILTERS, 20)
        expected = never.dense_search(query, ALICE, NO_FILTERS, 20)
        assert _ids(got) == _ids(expected)
        assert [c.score for c in got] == pytest.approx([c.score for c in expected])
        assert not set(_ids(got)) & {episodes[n].id for n in erased}
    after = store._dense.graph_searches, never._dense.graph_searches
    assert after[0] - before[0] == after[1] - before[1] == len(queries)
    store.close()
    never.close()


def test_a_mapped_graph_behind_the_store_is_saved_in_step_so_the_next_open_copies_nothing(
    path, monkeypatch
):
    """Rows appended (and searched since) to a store whose graph is mapped are in the
    graph saved at close: the next open maps it, and its warm-up has nothing to copy."""
    store, _ = _reopened_with_a_mapped_graph(path)
    extra = _fill(store, rows=3, seed=9)
    store.dense_search(unit_vectors(1, seed=10)[0], ALICE, NO_FILTERS, 5)
    store.close()
    copied = _copies(monkeypatch)
    store = _open(path)
    store.warm_up()
    graph = store._ann._graph
    assert graph.view and len(graph) == ROWS + 3 and not copied
    target = unit_vectors(3, seed=9)[1]
    assert store.dense_search(target, ALICE, NO_FILTERS, 1)[0].episode_id == extra[1].id
    store.close()


def test_many_removals_are_the_workers_cue_to_copy_a_mapped_graph(path, monkeypatch):
    """A mapped graph proposing many removed rows would leave searches too few
    candidates: past ``VIEW_EXACT_ROWS`` removals the worker copies it without them."""
    monkeypatch.setattr(sqlite_ann, "VIEW_EXACT_ROWS", 6)
    store, episodes = _reopened_with_a_mapped_graph(path)
    copied = _copies(monkeypatch)
    erased = [_rowid(store, episodes[n].id) for n in range(10, 17)]
    store.forget(ALICE, Selection(episode_ids=tuple(episodes[n].id for n in range(10, 17))))
    store.dense_search(unit_vectors(1, seed=4)[0], ALICE, NO_FILTERS, 5)
    store._ann._worker.join()
    graph = store._ann._graph
    assert len(copied) == 1 and not graph.view and len(graph) == ROWS - 7
    assert not any(graph._index.contains(rowid) for rowid in erased)
    store.close()


def test_a_close_adds_no_more_than_view_exact_rows_to_a_mapped_graph(path, monkeypatch):
    """A close does not catch up a mapped graph far behind the store (that would hold
    it up): with rows removed it saves the copy without them, covering the rows it
    held; the next open catches up the rest."""
    monkeypatch.setattr(dense_file, "MIN_ROWS", 100)  # the matrix saved, as a large store's
    monkeypatch.setattr(sqlite_ann, "VIEW_EXACT_ROWS", 10**9)
    store, episodes = _reopened_with_a_mapped_graph(path)
    store.forget(ALICE, Selection(episode_ids=(episodes[5].id,)))
    late = _fill(store, rows=20, seed=3)
    store.dense_search(unit_vectors(1, seed=4)[0], ALICE, NO_FILTERS, 5)
    monkeypatch.setattr(sqlite_ann, "VIEW_EXACT_ROWS", 10)
    store.close()
    assert json.loads(ann_module.state_path(path).read_text())["count"] == ROWS - 1
    store = _open(path)
    target = unit_vectors(20, seed=3)[7]
    assert store.dense_search(target, ALICE, NO_FILTERS, 1)[0].episode_id == late[7].id
    store.warm_up()
    assert len(store._ann._graph) == ROWS - 1 + 20
    store.close()


def _held_by_a_file_beside(path, vector: np.ndarray) -> list[str]:
    """The files beside the store (the store's own and every saved index, the graph
    included) that hold ``vector``'s bytes in a precision a file keeps vectors in:
    float32 (the store, the matrix) or half floats (the graph, ``GRAPH_DTYPE``)."""
    needles = [vector.astype(np.float32).tobytes(), vector.astype(np.float16).tobytes()]
    return [
        file.name
        for file in sorted(path.parent.glob(path.name + "*"))
        if file.is_file() and any(needle in file.read_bytes() for needle in needles)
    ]


@pytest.mark.parametrize("mapped", [False, True], ids=["graph-in-memory", "graph-mapped"])
def test_a_graph_saved_after_a_forget_holds_no_byte_of_the_erased_vector(path, monkeypatch, mapped):
    """usearch's remove frees a node but keeps its vector, and a save writes every
    node: the graph saved after a forget (here at close) must not hold the erased
    row's vector, in memory or copied from the mapped file, nor any other file."""
    assert ann_module.GRAPH_DTYPE == "f16"  # the precisions searched for below
    monkeypatch.setattr(dense_file, "MIN_ROWS", 100)  # the matrix saved, as a large store's
    store = _open(path)
    episodes = _fill(store)
    secret = make_episode("the zanzibarquux password", scope=ALICE)
    secret_vector = unit_vectors(1, seed=42)[0]
    store.insert_episodes([secret], secret_vector[None, :])
    _fill(store, rows=10, seed=3)  # the secret is not the last row
    store.warm_up()
    assert any(".ann." in name for name in _held_by_a_file_beside(path, secret_vector))
    if mapped:
        store.close()
        store = _open(path)
        store.dense_search(secret_vector, ALICE, NO_FILTERS, 5)
        assert store._ann._graph.view
    store.forget(ALICE, Selection(episode_ids=(secret.id, episodes[3].id)))
    got = store.dense_search(secret_vector, ALICE, NO_FILTERS, 10)  # the removal applied
    assert secret.id not in _ids(got) and episodes[3].id not in _ids(got)
    store.close()
    assert json.loads(ann_module.state_path(path).read_text())["count"] == ROWS + 11 - 2
    assert _held_by_a_file_beside(path, secret_vector) == []
    assert _held_by_a_file_beside(path, unit_vectors(ROWS)[3]) == []
    assert _held_by_a_file_beside(path, unit_vectors(ROWS)[4]) != []  # a kept row is there
    for file in path.parent.glob(path.name + "*"):
        assert b"zanzibarquux" not in file.read_bytes(), file.name
    store = _open(path)
    got = store.dense_search(secret_vector, ALICE, NO_FILTERS, 10)
    assert secret.id not in _ids(got) and episodes[3].id not in _ids(got)
    assert store._ann._graph.view  # the graph saved at close, mapped
    store.close()


def test_a_graph_saved_with_removed_nodes_unscrubbed_is_deleted_and_rebuilt(path, monkeypatch):
    """A graph file saved before removed nodes were overwritten (its state does not say
    ``scrubbed``) may hold erased vectors: the next open deletes it and builds anew."""
    monkeypatch.setattr(dense_file, "MIN_ROWS", 100)  # the matrix saved, as a large store's
    store = _open(path)
    episodes = _fill(store)
    store.warm_up()
    store.forget(ALICE, Selection(episode_ids=(episodes[3].id,)))
    erased = unit_vectors(ROWS)[3]
    with monkeypatch.context() as older:
        older.setattr(AnnIndex, "scrub", lambda self: None)  # as an older version saved
        store.dense_search(erased, ALICE, NO_FILTERS, 5)
        store.close()
    state = json.loads(ann_module.state_path(path).read_text())
    del state["scrubbed"]
    ann_module.state_path(path).write_text(json.dumps(state))
    assert any(".ann." in name for name in _held_by_a_file_beside(path, erased))
    store = _open(path)
    got = store.dense_search(erased, ALICE, NO_FILTERS, 5)
    assert episodes[3].id not in _ids(got)
    assert not any(".ann." in name for name in _held_by_a_file_beside(path, erased))
    store.warm_up()
    assert store._ann.ready
    store.close()
    assert json.loads(ann_module.state_path(path).read_text())["scrubbed"]
    assert _held_by_a_file_beside(path, erased) == []


def test_a_scrubbed_graph_holds_no_removed_vector_and_searches_as_before(tmp_path):
    """``scrub`` overwrites every removed node (usearch reuses them for its
    placeholders, which stay as dead nodes): the saved file holds no removed row's
    vector and every kept row's, searches return live rows only, recall is kept, and
    rows added afterwards take the placeholders' nodes."""
    vectors = unit_vectors(ROWS, seed=1)
    rowids = np.arange(1, ROWS + 1)
    graph = AnnIndex(DIM)
    graph.add(rowids, vectors)
    removed = np.arange(1, ROWS + 1, 10)  # a tenth of the rows
    graph.remove(removed)
    queries = unit_vectors(30, seed=2)
    live = np.setdiff1d(rowids, removed)

    def recall() -> float:
        scores = queries @ vectors[live - 1].T
        found = [set(graph.search(q, 50).tolist()) for q in queries]
        assert all(f <= set(live.tolist()) for f in found)  # no removed row, no placeholder
        exact = [set(live[np.argsort(-s)[:50]].tolist()) for s in scores]
        return float(np.mean([len(e & f) / 50 for e, f in zip(exact, found, strict=True)]))

    before = recall()
    assert graph.removed_nodes() == len(removed)
    graph.save(tmp_path / "memory.db", AnnState(DIM, "1", ROWS, len(live), "-"))
    assert graph.removed_nodes() == 0 and graph.placeholders == len(removed)
    assert len(graph) == len(live) and graph.dead_nodes() == len(removed)
    assert recall() >= before - 0.01
    (saved,) = [f for f in tmp_path.iterdir() if not f.name.endswith(".json")]
    data = saved.read_bytes()
    assert not [r for r in removed if vectors[r - 1].astype(np.float16).tobytes() in data]
    assert all(vectors[r - 1].astype(np.float16).tobytes() in data for r in live[:100])
    assert json.loads(ann_module.state_path(tmp_path / "memory.db").read_text())["scrubbed"]
    graph.add(np.arange(ROWS + 1, ROWS + 11), unit_vectors(10, seed=3))
    assert graph.placeholders == len(removed) - 10 and graph.removed_nodes() == 0
    assert graph._index.stats.nodes == ROWS  # no node added: placeholders' nodes taken


def test_a_save_overwrites_only_the_nodes_freed_since_the_last_one(tmp_path):
    """Each save overwrites the nodes freed since the last one, not those it overwrote
    before (they stay as placeholders); no saved file holds a removed row's vector, in
    memory or after a load, and no search returns a placeholder."""
    vectors = unit_vectors(ROWS, seed=1)
    rowids = np.arange(1, ROWS + 1)
    graph = AnnIndex(DIM)
    graph.add(rowids, vectors)
    store_path = tmp_path / "memory.db"

    def save_counting(graph: AnnIndex, removed: np.ndarray) -> list[int]:
        """Save ``graph`` and return the sizes of the batches added to it meanwhile."""
        added: list[int] = []
        index = graph._index
        add = type(index).add

        def counting(self, keys, *args, **kwargs):
            added.append(len(keys))
            return add(self, keys, *args, **kwargs)

        index.add = counting.__get__(index)
        try:
            graph.save(store_path, AnnState(DIM, "1", ROWS, len(graph), "-"))
        finally:
            del index.add
        (saved,) = [f for f in tmp_path.iterdir() if not f.name.endswith(".json")]
        data = saved.read_bytes()
        assert not [r for r in removed if vectors[r - 1].astype(np.float16).tobytes() in data]
        return added

    first = np.arange(1, ROWS + 1, 7)
    graph.remove(first)
    assert save_counting(graph, first) == [len(first)]
    later = np.array([2, 3, 500, 1001])
    graph.remove(later)
    assert save_counting(graph, np.concatenate([first, later])) == [len(later)]
    assert graph.removed_nodes() == 0 and graph.placeholders == len(first) + len(later)

    loaded = AnnIndex.load(store_path, view=True)
    assert loaded is not None
    copy = loaded[0].materialised()
    assert len(copy) == ROWS - len(first) - len(later)
    assert copy.placeholders == graph.placeholders and not copy.freed
    last = np.array([4, 6])
    copy.remove(last)
    gone = np.concatenate([first, later, last])
    assert save_counting(copy, gone) == [len(last)]
    live = set(np.setdiff1d(rowids, gone).tolist())
    for query in unit_vectors(20, seed=5):
        assert set(copy.search(query, 100).tolist()) <= live
    assert int(copy._index.stats.nodes) == ROWS  # every placeholder in a removed node


#: A dimension at which removed rows' nodes measurably cost the graph recall on random
#: vectors (at ``DIM`` every row is found either way).
WIDE = 128


def _wide_store(path, rows: int = 3000) -> tuple[SQLiteStore, list, np.ndarray]:
    store = SQLiteStore(path, dim=WIDE, ann=SETTINGS)
    episodes = [make_episode(f"turn {i}", scope=ALICE) for i in range(rows)]
    vectors = unit_vectors(rows, dim=WIDE, seed=0)
    store.insert_episodes(episodes, vectors)
    return store, episodes, vectors


def _recall_at_100(store: SQLiteStore, graph: AnnIndex, queries: np.ndarray) -> float:
    """Recall@100 of ``graph``'s proposals against the exact scan of the store's rows."""
    recalls = []
    for query in queries:
        exact = {rowid for rowid, _ in _exact(store, query, ALICE, 100)}
        recalls.append(len(exact & set(graph.search(query, 100).tolist())) / 100)
    return float(np.mean(recalls))


def _forget(store: SQLiteStore, episodes: list, numbers) -> None:
    store.forget(ALICE, Selection(episode_ids=tuple(episodes[n].id for n in numbers)))


def test_past_the_rebuild_share_of_removed_rows_the_graph_is_rebuilt_and_recall_is_back(path):
    """Removed rows' nodes still route searches, once overwritten (by a save) through
    zero vectors, which costs recall; once they are more than ``REBUILD_SHARE`` of the
    graph's nodes, the worker builds the graph again from the rows left: no dead node,
    and recall@100 against the exact scan back to that of a graph of those rows alone."""
    store, episodes, _ = _wide_store(path)
    store.warm_up()
    queries = unit_vectors(30, dim=WIDE, seed=9)
    _forget(store, episodes, range(0, 3000, 2))  # half the rows
    worn = store._ann._graph
    assert worn.dead_nodes() == 1500 and store._ann.rebuild_due(worn)
    with store._lock:
        store._refresh_dense()
        worn.scrub()  # as a save does
    worn_recall = _recall_at_100(store, worn, queries)
    store.dense_search(queries[0], ALICE, NO_FILTERS, 10)  # the cue to rebuild
    store._ann._worker.join()
    store.dense_search(queries[0], ALICE, NO_FILTERS, 10)
    rebuilt = store._ann._graph
    assert rebuilt is not worn and rebuilt is store._dense.ann
    assert len(rebuilt) == 1500 and rebuilt.dead_nodes() == 0
    alone = AnnIndex(WIDE)
    kept = range(1, 3000, 2)
    with store._lock:
        rowids = [_rowid(store, episodes[n].id) for n in kept]
        alone.add(np.array(rowids), unit_vectors(3000, dim=WIDE, seed=0)[list(kept)])
    assert _recall_at_100(store, rebuilt, queries) == _recall_at_100(store, alone, queries)
    assert _recall_at_100(store, rebuilt, queries) > worn_recall
    store.close()


def test_below_the_rebuild_share_the_graph_keeps_its_dead_nodes(path):
    store = _open(path)
    episodes = _fill(store)
    store.warm_up()
    graph = store._ann._graph
    share = int(sqlite_ann.REBUILD_SHARE * ROWS)
    _forget(store, episodes, range(share))
    store.dense_search(unit_vectors(1, seed=4)[0], ALICE, NO_FILTERS, 5)
    if store._ann._worker is not None:
        store._ann._worker.join()
    assert store._ann._graph is graph and graph.dead_nodes() == share
    store.close()


def test_searches_during_a_rebuild_are_right_and_changes_meanwhile_reach_the_new_graph(
    path, monkeypatch
):
    """While the worker builds the new graph (held here mid-build), searches go on
    through the old one and rank as the exact scan; rows forgotten and changed
    meanwhile are taken out of, or changed in, the new graph when it is put in place,
    and the graph saved at close holds no erased vector."""
    import threading

    monkeypatch.setattr(dense_file, "MIN_ROWS", 100)  # the matrix saved, as a large store's
    store = _open(path)
    episodes = _fill(store)
    store.warm_up()
    old = store._ann._graph
    building, release = threading.Event(), threading.Event()
    threads = AnnIndex.build_threads

    def held(rows: int) -> int:
        building.set()
        release.wait(timeout=60)
        return threads(rows)

    monkeypatch.setattr(AnnIndex, "build_threads", staticmethod(held))
    vectors = unit_vectors(ROWS)
    _forget(store, episodes, range(100, 100 + int(0.3 * ROWS)))
    queries = [vectors[50], vectors[150], *unit_vectors(5, seed=8)]
    store.dense_search(queries[0], ALICE, NO_FILTERS, 10)  # starts the rebuild
    assert building.wait(timeout=60)
    for query in queries:  # through the old graph meanwhile
        got = store.dense_search(query, ALICE, NO_FILTERS, 20)
        exact = _exact(store, query, ALICE, 20)
        assert [c.score for c in got] == pytest.approx([s for _, s in exact])
        assert store._ann._graph is old and store._dense.ann is old
    _forget(store, episodes, [7, 1999])
    moved = _move(store, episodes[9])
    release.set()
    store._ann._worker.join()
    got = store.dense_search(moved, ALICE, NO_FILTERS, 3)
    rebuilt = store._ann._graph
    assert rebuilt is not old and not rebuilt.view
    assert len(rebuilt) == ROWS - int(0.3 * ROWS) - 2
    assert got[0].episode_id == episodes[9].id and got[0].score == pytest.approx(1.0)
    for n in (7, 1999, 150):
        assert not rebuilt._index.contains(_rowid_or_none(episodes[n].id, store))
        assert episodes[n].id not in _ids(store.dense_search(vectors[n], ALICE, NO_FILTERS, 10))
    store.close()
    for n in (7, 1999, 150):
        assert _held_by_a_file_beside(path, vectors[n]) == []
    assert _held_by_a_file_beside(path, vectors[8]) != []


def _rowid_or_none(episode_id: str, store: SQLiteStore) -> int:
    """The rowid the graph would hold ``episode_id`` under (0, which no row has, once
    the episode is gone)."""
    rows = store._read("SELECT rowid FROM episodes WHERE id = ?", (episode_id,))
    return rows[0][0] if rows else 0


def test_a_crash_mid_rebuild_leaves_the_old_graph_in_step_and_the_next_open_rebuilds(path):
    """A process that dies while saving a rebuilt graph (the new graph's file written,
    the state naming it not yet) leaves the state naming the old graph, which is in
    step with the store: the next open maps it, searches through it drop no live row
    and return no removed one, and the rebuild starts again and is saved."""
    import subprocess
    import sys

    store = _open(path)
    episodes = _fill(store)
    store.warm_up()
    store.close()
    gone = range(int(0.3 * ROWS))
    store = _open(path)
    store._ann.rebuild_due = lambda graph: False  # closed before any rebuild
    store.dense_search(unit_vectors(1, seed=4)[0], ALICE, NO_FILTERS, 5)  # maps the graph
    _forget(store, episodes, gone)
    store.dense_search(unit_vectors(1, seed=4)[0], ALICE, NO_FILTERS, 5)
    store.close()
    worn = json.loads(ann_module.state_path(path).read_text())
    assert worn["placeholders"] == len(gone)

    code = f"""
import os, sys
sys.path[:0] = {sys.path!r}
from pathlib import Path
from anamnesis.store.index.ann import AnnIndex
from anamnesis.store.index.dense import AnnSettings
from anamnesis.store.sqlite import SQLiteStore

def dies_while_saving(self, store_path, state):
    self.scrub()
    self._index.save(str(store_path.with_name(store_path.name + ".ann.crashedgraph")))
    os._exit(3)

AnnIndex.save = dies_while_saving
store = SQLiteStore(Path({str(path)!r}), dim={DIM}, ann=AnnSettings(threshold=500))
store.warm_up()
"""
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert done.returncode == 3, done.stderr[-2000:]
    assert (path.parent / "memory.db.ann.crashedgraph").exists()
    assert json.loads(ann_module.state_path(path).read_text()) == worn

    store = _open(path)
    vectors = unit_vectors(ROWS)
    got = store.dense_search(vectors[ROWS - 1], ALICE, NO_FILTERS, 10)
    assert got[0].episode_id == episodes[ROWS - 1].id
    assert not set(_ids(got)) & {episodes[n].id for n in gone}
    assert store._ann._graph.view and store._ann._graph.placeholders == len(gone)
    store.warm_up()
    rebuilt = store._ann._graph
    assert rebuilt.dead_nodes() == 0 and len(rebuilt) == ROWS - len(gone)
    store.close()
    state = json.loads(ann_module.state_path(path).read_text())
    assert state["placeholders"] == 0 and state["count"] == ROWS - len(gone)
    assert not (path.parent / "memory.db.ann.crashedgraph").exists()


def test_a_graph_asked_for_every_row_returns_every_row_beside_its_placeholders():
    """Placeholders are nodes too: asked for as many rows as it holds, a graph with
    placeholders still returns each of its rows, and no placeholder."""
    vectors = unit_vectors(60, seed=3)
    graph = AnnIndex(DIM)
    graph.add(np.arange(1, 61), vectors)
    graph.remove(np.arange(1, 6))
    graph.scrub()
    assert graph.placeholders == 5 and len(graph) == 55
    for query in unit_vectors(10, seed=4):
        assert sorted(graph.search(query, 55).tolist()) == list(range(6, 61))


def test_a_graph_is_built_a_step_at_a_time_without_the_removed_rows():
    """``build_graph`` adds ``BUILD_STEP`` rows per call, leaving out the rows marked
    removed: the graph holds every live row, and only those, each found by itself."""
    vectors = unit_vectors(1000, seed=6)
    rowids = np.arange(1, 1001)
    live = np.ones(1000, dtype=bool)
    live[::3] = False
    added: list[int] = []
    original = AnnIndex.add

    def counting(self, ids, *args, **kwargs):
        added.append(len(ids))
        return original(self, ids, *args, **kwargs)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(sqlite_ann, "BUILD_STEP", 256)
        patch.setattr(AnnIndex, "add", counting)
        graph = sqlite_ann.build_graph(DIM, rowids, vectors, live)
    assert len(added) == 4 and sum(added) == live.sum() == len(graph)
    assert not any(graph._index.contains(int(r)) for r in rowids[~live])
    assert all(graph.search(vectors[i], 1)[0] == rowids[i] for i in np.flatnonzero(live))
