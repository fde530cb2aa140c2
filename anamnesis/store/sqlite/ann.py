"""Keeps the approximate graph (``index.ann``) of one SQLite store in step with it.

The graph follows the store's ``DenseIndex`` (itself loaded from the file), keyed by
rowid, under the store's ``vector_epoch``:

- on first use it is loaded from beside the file when its state matches what the
  store holds (``AnnState.matches``), else built again from the vectors;
- rows appended since (by any process; rowids only grow) are added: a few inside the
  search, more on a background thread; meanwhile the search scores them exactly;
- this process's deletes and vector changes are applied in place (``after_change``);
  any other change of the epoch (another process's) drops the graph for a rebuild.

A persisted graph is mapped, not read (``AnnIndex.load(view=True)``): a fresh process
searches it at once. A mapped graph cannot change, and it stays mapped while it can
serve: searches drop the rows this process removed (the dense index marks them) and
score changed and appended rows exactly. It is copied into memory only when those
rows are more than ``VIEW_EXACT_ROWS`` (by the background worker), or when it is
saved (``warm_up``, ``close``) lagging the store: a removal itself copies nothing.

Building runs on a background thread (``warm_up`` builds synchronously); until a
graph is in step, searches are exact. Removed rows leave dead nodes in the graph,
which still route searches; once they are more than ``REBUILD_SHARE`` of its nodes,
the worker builds the graph again from the store's rows, outside the lock, while
searches go on through the old one; this process's changes meanwhile are applied to
the new graph before it replaces the old (``_Rebuild``).

Erasure deletes the persisted graph (it holds the erased rows' vectors); it is saved
again on ``close`` and after a build, with the nodes removed since the last save
overwritten first (``AnnIndex.scrub``). A graph file saved before that was done and
holding removed nodes is deleted when found, and rebuilt.
"""

from __future__ import annotations

import contextlib
import threading
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from ..index.ann import AnnIndex, AnnState, vector_fingerprint
from ..index.dense import AnnSettings, DenseIndex
from . import index_files
from .driver import sqlite3
from .index_files import one_writer

#: Appended rows added to the graph inside a search; more are added in the background.
SYNC_ROWS = 64
#: Rows added per step by the background catch-up (it holds the store's lock per step).
CATCH_UP_STEP = 512
#: Rows a mapped graph leaves to the searches before the worker copies it into memory
#: to take them in: appended and changed rows, which a search scores one by one, and
#: removed ones, which it drops from the graph's candidates (too many, and too few
#: candidates are left: the search falls back to the exact scan).
VIEW_EXACT_ROWS = 2048
#: Share of a graph's nodes that are dead (removed rows' nodes, ``AnnIndex.dead_nodes``)
#: past which the worker builds it again: up to it recall@100 against the exact scan
#: kept clear of the target after bulk removals, at 100k and 1M rows (study "The graph
#: after bulk forgets", docs/experiments/2026-11-27-graph-after-bulk-forgets.md).
REBUILD_SHARE = 0.1
#: Rows a build adds per call: the removed rows are left out of each step's copy of
#: the vectors, not of a copy of the whole matrix (a rebuild holds the old graph too).
BUILD_STEP = 65_536


@dataclass
class _Rebuild:
    """A rebuild in flight, and this process's changes since it read the rows (removed
    and changed rowids, in order), which the new graph takes in."""

    changes: list[tuple[list[int], list[int]]] = field(default_factory=list)


def build_graph(
    dim: int, rowids: np.ndarray, vectors: np.ndarray, live: np.ndarray | None
) -> AnnIndex:
    """A graph of the rows ``rowids`` with ``vectors`` (views of the dense index), but
    those ``live`` marks False (None: every one), ``BUILD_STEP`` rows at a time."""
    graph = AnnIndex(dim)
    threads = AnnIndex.build_threads(len(rowids) if live is None else int(live.sum()))
    for start in range(0, len(rowids), BUILD_STEP):
        step = slice(start, start + BUILD_STEP)
        if live is None:
            graph.add(rowids[step], vectors[step], threads=threads)
        else:
            keep = live[step]
            graph.add(rowids[step][keep], vectors[step][keep], threads=threads)
    return graph


def remove_files(store_path: Path) -> None:
    """Delete a store's persisted graph (``<store>.ann.json`` first, then the graph)."""
    index_files.remove_files(store_path, "ann")


class SQLiteAnn:
    """The approximate graph of one store, and its upkeep.

    ``lock`` is the store's lock: ``sync``, ``after_change`` and ``close`` are called
    with it held; the background builder takes it only to read and to install.
    """

    def __init__(
        self,
        path: Path,
        lock: threading.RLock,
        settings: AnnSettings,
        file_epoch: Callable[[], str | None],
    ) -> None:
        self._path = path
        #: The file's ``vector_epoch`` now (None: the store is closed); called under the lock.
        self._file_epoch = file_epoch
        self._lock = lock
        self.settings = settings
        self._graph: AnnIndex | None = None
        self._epoch: str | None = None
        self._stale: set[int] = set()
        #: Rows removed or changed while the graph was a mapped view: taken out of the
        #: copy made in memory (meanwhile searches drop or rescore them, see ``dense``).
        self._pending: set[int] = set()
        self._load_tried = False
        #: The epoch of the dense index at the last ``sync``.
        self._seen: str | None = None
        self._dirty = False
        self._worker: threading.Thread | None = None
        #: The rebuild in flight (``_work``); None when there is none, or when the graph
        #: it would replace was dropped meanwhile (it is then not installed).
        self._rebuild: _Rebuild | None = None
        self._closed = False
        #: Why the last build failed, until one succeeds (searches are then exact, or go
        #: through the graph as it was when a rebuild failed; no rebuild is tried again).
        self.failure: str | None = None

    @property
    def ready(self) -> bool:
        """Whether a graph is in use."""
        return self._graph is not None

    def state(self, dense: DenseIndex, epoch: str, max_rowid: int | None = None) -> AnnState:
        """What ``dense`` holds up to ``max_rowid`` (default: all of it), as an AnnState."""
        last = dense.max_rowid if max_rowid is None else max_rowid
        count = dense.rows_upto(last)
        blob = dense.vectors_at(slice(count - 1, count)).tobytes() if count else b""
        # The last row's own rowid must be the one claimed, else coverage differs.
        if count and dense.rowid_at(count - 1) != last:
            blob = b"missing"
        return AnnState(dense.dim, epoch, last, count, vector_fingerprint(blob))

    def sync(self, dense: DenseIndex, epoch: str, build: bool = False) -> None:
        """Attach to ``dense`` a graph in step with it, when it is large enough: load,
        catch up or start a build as needed. ``build``: build or catch up now, here."""
        # A graph replaced since (a mapped one the worker copied into memory) is let go
        # on another thread: unmapping a file an erasure unlinked frees it, which takes
        # a time that grows with it.
        replaced = [dense.ann] if dense.ann is not None and dense.ann is not self._graph else []
        dense.ann = None
        index_files.release_later(replaced)
        self._seen = epoch
        if self._closed or dense.size < self.settings.threshold:
            return
        if self._graph is None and not self._load_tried:
            self._load_tried = True
            self._load(dense, epoch)
        if self._graph is not None and self._epoch != epoch:
            # another process changed rows
            self._graph, self._stale, self._pending = None, set(), set()
            self._rebuild = None
        if self._graph is None:
            if build:
                self._build(dense, epoch)
            else:
                self._start_worker(dense, epoch)
            if self._graph is None:
                return
        graph = self._graph
        if self.rebuild_due(graph):
            self._start_worker(dense, epoch)  # meanwhile searches go through this graph
        if graph.view:
            # A mapped graph is read-only: removed rows are dropped by the searches,
            # changed and appended ones scored exactly, until a build (``warm_up``) or,
            # when they are many, the worker copies it.
            behind = dense.size - dense.rows_upto(graph.max_rowid)
            if build and (self._stale or self._pending or behind):
                graph = self._graph = self._materialised(graph)
            elif len(self._pending) + len(self._stale) + behind > VIEW_EXACT_ROWS:
                self._start_worker(dense, epoch)
            if graph.view:
                dense.ann = graph
                dense.ann_stale = self._stale
                return
        if self._stale:
            self._take_stale(dense, graph)
        start = dense.rows_upto(graph.max_rowid)
        behind = dense.size - start
        if behind and (build or behind <= SYNC_ROWS):
            graph.add(*dense.live_rows(start, dense.size))
            graph.max_rowid = dense.max_rowid  # removed rows among them too
            self._dirty = True
        elif behind:
            self._start_worker(dense, epoch)
        dense.ann = graph
        dense.ann_stale = self._stale

    def _take_stale(self, dense: DenseIndex, graph: AnnIndex) -> None:
        """Add the changed rows again with their vectors now (the caller holds the lock;
        ``graph`` in memory, the old vectors already taken out)."""
        # Rows past the graph's last are appended ones: the catch-up takes them.
        held = [rowid for rowid in self._stale if rowid <= graph.max_rowid]
        stale = np.sort(dense.positions(np.array(held, dtype=np.int64)))
        graph.add(dense.rowids_from(0)[stale], dense.vectors_at(stale))
        self._stale.clear()
        self._dirty = True

    def warm_up(self, dense: DenseIndex, epoch: str) -> None:
        """Load, build or catch up the graph now; the build runs outside the lock.
        The caller does not hold the lock."""
        with self._lock:
            self.sync(dense, epoch)
            worker = self._worker
        if worker is not None:
            worker.join()
        with self._lock:
            if self._seen == epoch:
                self.sync(dense, epoch, build=True)

    def _load(self, dense: DenseIndex, epoch: str) -> None:
        loaded = AnnIndex.load(self._path, view=True)
        if loaded is None:
            return
        graph, saved = loaded
        if saved.max_rowid > dense.max_rowid or not saved.matches(
            self.state(dense, epoch, saved.max_rowid)
        ):
            remove_files(self._path)  # behind or ahead of the store: rebuilt
            return
        if not saved.scrubbed and graph.freed:
            remove_files(self._path)  # saved by an older version: may hold erased vectors
            return
        self._graph, self._epoch = graph, epoch

    def _build(self, dense: DenseIndex, epoch: str) -> None:
        """Build a graph of every row of ``dense`` (the caller holds the lock)."""
        size = dense.size
        graph = build_graph(
            dense.dim,
            dense.rowids_from(0)[:size],
            dense.vectors_at(slice(0, size)),
            dense.live_mask(0, size),
        )
        graph.max_rowid = dense.max_rowid  # removed rows among them too
        self._install(graph, epoch)

    def _install(self, graph: AnnIndex, epoch: str) -> None:
        self._graph, self._epoch, self._stale, self._pending = graph, epoch, set(), set()
        self._dirty = True
        self.failure = None

    def _materialised(self, graph: AnnIndex) -> AnnIndex:
        """``graph`` in memory, without the rows changed while it was a view (the
        caller holds the lock)."""
        copy = graph.materialised()
        copy.remove(sorted(self._pending))
        self._pending.clear()
        return copy

    def _start_worker(self, dense: DenseIndex, epoch: str) -> None:
        if self._worker is not None and self._worker.is_alive():
            return
        self._worker = threading.Thread(
            target=self._work, args=(dense, epoch), name="anamnesis-ann-index", daemon=True
        )
        self._worker.start()

    def rebuild_due(self, graph: AnnIndex) -> bool:
        """Whether ``graph``'s dead nodes (with the rows removed or changed while it was
        mapped) are more than ``REBUILD_SHARE`` of its nodes; not after a failed build."""
        if self.failure is not None:
            return False
        dead = graph.dead_nodes() + len(self._pending)
        return dead > REBUILD_SHARE * (len(graph) + graph.dead_nodes())

    def _work(self, dense: DenseIndex, epoch: str) -> None:
        """Build or rebuild (outside the lock), or catch up (a step at a time, under it)."""
        rebuild: _Rebuild | None = None
        try:
            with self._lock:
                graph, size = self._graph, dense.size
                if graph is not None and self.rebuild_due(graph):
                    if self._closed or self._seen != epoch or self._epoch != epoch:
                        return  # changed since the sync that asked: the next one asks again
                    rebuild = self._rebuild = _Rebuild()
                rowids = dense.rowids_from(0)[:size]
                vectors = dense.vectors_at(slice(0, size))
                live = dense.live_mask(0, size)
                last = dense.rowid_at(size - 1) if size else 0
            if graph is not None and graph.view and rebuild is None:
                copy = graph.materialised()  # outside the lock: the view never changes
                with self._lock:
                    if self._closed or self._graph is not graph or self._epoch != epoch:
                        return
                    self._graph = graph = self._materialised(copy)
            if graph is None or rebuild is not None:
                # Rows below ``size`` are never written again (appends go past them,
                # a reload replaces the arrays), so these views stay valid unlocked.
                fresh = build_graph(dense.dim, rowids, vectors, live)
                fresh.max_rowid = max(fresh.max_rowid, last)
                with self._lock:
                    if rebuild is not None:
                        self._replace(fresh, rebuild, dense)
                        return
                    if self._closed or self._graph is not None or self._seen != epoch:
                        return
                    self._install(fresh, epoch)
                    self.save(dense, epoch)
                return
            while True:
                with self._lock:
                    if self._closed or self._graph is not graph or self._epoch != epoch:
                        return
                    start = dense.rows_upto(graph.max_rowid)
                    stop = min(dense.size, start + CATCH_UP_STEP)
                    if start >= stop:
                        return
                    graph.add(*dense.live_rows(start, stop))
                    graph.max_rowid = max(graph.max_rowid, dense.rowid_at(stop - 1))
                    self._dirty = True
        except (RuntimeError, ValueError, MemoryError, OSError) as exc:
            self.failure = str(exc)
            meanwhile = (
                "dense search stays exact (same results, slower)"
                if rebuild is None
                else "dense search goes on through the graph as it was"
            )
            warnings.warn(
                f"building the approximate vector index of {self._path} failed ({exc}); "
                + meanwhile,
                RuntimeWarning,
                stacklevel=2,
            )
        finally:
            if rebuild is not None and self._rebuild is rebuild:
                self._rebuild = None

    def _replace(self, fresh: AnnIndex, rebuild: _Rebuild, dense: DenseIndex) -> None:
        """Put the rebuilt graph ``fresh`` in place of the graph it was built for, with
        this process's changes since applied to it, unless that graph was dropped
        meanwhile (the caller holds the lock)."""
        if self._closed or self._rebuild is not rebuild or self._graph is None:
            return
        assert self._epoch is not None
        self._rebuild = None
        stale: set[int] = set()
        for removed, changed in rebuild.changes:
            fresh.remove([*removed, *changed])  # changed rows are added again by ``sync``
            stale.update(changed)
            stale.difference_update(removed)
        epoch = self._epoch
        self._install(fresh, epoch)
        self._stale = stale
        if not rebuild.changes:  # else the rows read since are the next sync's
            self.save(dense, epoch)

    def after_change(
        self,
        removed: list[int],
        changed: list[int],
        epoch_before: str,
        epoch_after: str,
    ) -> None:
        """Apply this process's committed deletes (``removed``) and vector changes
        (``changed``); if the graph was not at ``epoch_before``, leave it to rebuild.
        Erasure also deletes the persisted graph, which holds the erased vectors."""
        self._seen = epoch_after  # a build of the rows before this change is not installed
        if removed:
            remove_files(self._path)
        if self._graph is None or self._epoch != epoch_before:
            self._rebuild = None  # the graph it would replace is dropped: so is the rebuild
            return
        if self._rebuild is not None:
            self._rebuild.changes.append((list(removed), list(changed)))
        if self._graph.view:
            # Taken out of the copy in memory, when one is made (``_materialised``); until
            # then searches drop removed rows and rescore changed ones exactly.
            self._pending.update([*removed, *changed])
        else:
            self._graph.remove([*removed, *changed])
        self._stale.update(changed)
        self._stale.difference_update(removed)
        self._epoch = epoch_after
        self._dirty = True

    def save(self, dense: DenseIndex, epoch: str) -> None:
        """Persist the graph, if it changed since it was loaded or saved and is in step.
        A mapped graph that lags the store (rows removed or changed since it was mapped,
        its file gone after an erasure; rows appended) is copied into memory first,
        without the removed rows and with the others (appended ones up to
        ``VIEW_EXACT_ROWS``), so that the next open maps a graph in step rather than
        copying it again."""
        graph = self._graph
        if graph is None or self._epoch != epoch:
            return
        if dense.removed:
            return  # a graph built meanwhile may hold removed rows: saved once compacted
        if graph.view:
            behind = dense.size - dense.rows_upto(graph.max_rowid)
            lags = bool(self._pending or self._stale)
            if not lags and (not behind or behind > VIEW_EXACT_ROWS):
                # The file itself: in step, or too far behind to catch up in a close
                # (a graph behind the store is caught up after the next open).
                return
            graph = self._graph = self._materialised(graph)
            if self._stale:
                self._take_stale(dense, graph)
            if behind <= VIEW_EXACT_ROWS:  # more would hold up the close
                graph.add(*dense.live_rows(dense.size - behind, dense.size))
                graph.max_rowid = dense.max_rowid  # removed rows among them too
            self._dirty = True
        if not self._dirty:
            return
        if self._stale:
            self._take_stale(dense, graph)
        if dense.rows_upto(graph.max_rowid) != len(graph):
            return
        self._write(graph, dense, epoch)

    @one_writer("ann")
    def _write(self, graph: AnnIndex, dense: DenseIndex, epoch: str) -> None:
        try:
            if self._file_epoch() != epoch:
                return  # the file changed since (another process): this graph is not saved
            graph.save(self._path, self.state(dense, epoch, graph.max_rowid))
            self._dirty = False
            if self._file_epoch() != epoch:
                remove_files(self._path)  # changed while saving: it may hold erased rows
        except sqlite3.Error:
            remove_files(self._path)  # the epoch cannot be read: nothing is trusted
        except (OSError, RuntimeError) as exc:
            remove_files(self._path)
            warnings.warn(
                f"saving the approximate vector index of {self._path} failed ({exc}); "
                "it is rebuilt on next open",
                RuntimeWarning,
                stacklevel=2,
            )

    def close(self, dense: DenseIndex, epoch: str | None) -> None:
        """Save the graph if it is in step with ``dense``, and drop it."""
        self._closed = True
        if epoch is not None:
            with contextlib.suppress(ValueError):
                self.save(dense, epoch)
        self._graph = None
        dense.ann = None
