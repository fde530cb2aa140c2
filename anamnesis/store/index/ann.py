"""Approximate nearest-neighbour search over a store's vectors: a usearch HNSW graph.

The graph only proposes candidates. ``DenseIndex`` stays the authority: every
candidate is rescored exactly against its matrix, rows the graph does not hold yet
(appended since) or holds with an old vector (changed since) are scored exactly too,
and rows it holds but the store no longer has are dropped. So a graph that lags the
store costs recall, never a wrong score or a deleted row.

Why usearch: a manylinux wheel with no compiler needed (hnswlib ships only sources),
incremental add and remove (faiss's HNSW has no remove), half-precision storage and
memory-mapped files. The comparison is in the study "Scale" (docs/experiments).

A graph is persisted beside the store as ``<store>.ann.<generation>`` with a JSON
state file ``<store>.ann.json`` (written last, atomically) naming the generation, the
store's ``vector_epoch``, the last rowid and the row count it covers, and a
fingerprint of that last row's vector. ``AnnState.matches`` checks these against the
store, so a graph behind or ahead of the store (a crash between the two writes, a
store rolled back or changed by another process) is detected and rebuilt.

usearch's ``remove`` only frees a node: its vector stays (and a save would write it)
and its links still route searches. A save first overwrites each node freed since
the last save with a placeholder (``scrub``), a zero vector under a key no row has,
which stays in the graph as a dead node; appends take dead nodes back. Past a share
of dead nodes the store builds the graph again (``SQLiteAnn``).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import uuid
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np

#: The graph's settings. Connectivity 16 and expansion 128 on insert are HNSW's usual
#: defaults; search expansion is at least 4 times the candidates asked for, which kept
#: recall@100 against exact at or above the target on LongMemEval text (study "Scale").
CONNECTIVITY = 16
EXPANSION_ADD = 128
SEARCH_EXPANSION_FACTOR = 4
MIN_SEARCH_EXPANSION = 256
#: Graphs of fewer rows are built on one thread: a parallel build now and then leaves a
#: few rows that no search reaches (study "Recall with the graph forced on"), and a
#: small build is quick on one.
PARALLEL_BUILD_ROWS = 50_000
#: Vectors are held as half floats in the graph: half the memory, the same recall
#: (candidates are rescored in float32 anyway).
GRAPH_DTYPE = "f16"
#: Bumped when the file layout or the settings above change: older files are rebuilt.
FORMAT = 1
#: Keys of the placeholders that overwrite removed nodes before a save: above every
#: rowid (SQLite's are signed 64-bit), so no row has one. A graph's placeholders hold
#: the keys from here up, without a gap.
PLACEHOLDER_KEY = 2**63
#: Insert expansion for those placeholders: a narrow search to place them is enough,
#: since no search wants them (a zero vector is no nearer a query than a row of cosine
#: zero), so the links they get matter little.
PLACEHOLDER_EXPANSION = 16


def _usearch_index() -> Any:
    """usearch's ``Index`` class, with onnxruntime loaded first: in one process,
    importing onnxruntime after usearch's native module crashes it (a clash between
    the two libraries' native code), and the embedders may load it at any time."""
    import onnxruntime  # noqa: F401
    from usearch.index import Index

    return Index


def vector_fingerprint(blob: bytes) -> str:
    """A short digest of a vector's float32 bytes."""
    return hashlib.sha256(blob).hexdigest()[:16]


@dataclass(frozen=True, slots=True)
class AnnState:
    """What a persisted graph covers: the store's epoch when it was saved, its last
    rowid, how many rows it holds, and ``vector_fingerprint`` of the last row."""

    dim: int
    epoch: str
    max_rowid: int
    count: int
    fingerprint: str
    generation: str = ""
    format: int = FORMAT
    #: The graph's removed nodes were overwritten before it was saved (``AnnIndex.save``);
    #: False in files saved before that was done, whose removed nodes may hold vectors.
    scrubbed: bool = False
    #: Placeholders the graph holds (``AnnIndex.scrub``), besides its ``count`` rows;
    #: None in files saved before they were kept, whose removed nodes were left free.
    placeholders: int | None = None

    def matches(self, other: AnnState) -> bool:
        """Whether this graph's coverage is what the store holds up to the same rowid."""
        return (
            self.format == FORMAT
            and self.dim == other.dim
            and self.epoch == other.epoch
            and self.max_rowid == other.max_rowid
            and self.count == other.count
            and self.fingerprint == other.fingerprint
        )


def state_path(store_path: Path) -> Path:
    """Where a store's graph state file lives."""
    return store_path.with_name(store_path.name + ".ann.json")


class AnnIndex:
    """An HNSW graph of unit vectors keyed by rowid, inner-product metric."""

    def __init__(self, dim: int, index: object | None = None, view: bool = False) -> None:
        Index = _usearch_index()  # noqa: N806
        self.dim = dim
        #: Whether the graph is a read-only mapping of its file (``load``): usearch
        #: refuses to add to it and crashes on a remove, so ``materialised`` comes first.
        self.view = view
        self._index: Any = index or Index(
            ndim=dim,
            metric="ip",
            dtype=GRAPH_DTYPE,
            connectivity=CONNECTIVITY,
            expansion_add=EXPANSION_ADD,
        )
        #: The largest rowid added: the store's rows above it are not in the graph.
        self.max_rowid = 0
        #: Nodes freed by ``remove`` and not taken back since, as counted here: they keep
        #: the removed rows' vectors until ``scrub``, which counts them as usearch does.
        self.freed = 0
        #: Placeholders in the graph (``scrub``): dead nodes under the keys from
        #: ``PLACEHOLDER_KEY`` up, in place of removed rows.
        self.placeholders = 0
        #: Rows were removed since the last ``scrub``: free nodes may hold their vectors
        #: (whatever ``freed`` says: ``scrub`` counts them itself then).
        self.unscrubbed = False

    def __len__(self) -> int:
        """The rows the graph holds (placeholders left out)."""
        return len(self._index) - self.placeholders

    def dead_nodes(self) -> int:
        """Nodes of removed rows not taken back by an append: freed or placeholders. They
        still route searches (their links stay), which costs recall as they grow."""
        return self.freed + self.placeholders

    def removed_nodes(self) -> int:
        """Nodes free in usearch's count (it walks every node): removed and not reused
        since, whose vectors a save would write (``scrub``)."""
        return int(self._index.stats.nodes) - len(self._index)

    def scrub(self) -> None:
        """Overwrite the vector of every free node, if a row was removed since the last
        scrub (or the graph was loaded from a file whose removed nodes were left free):
        add as many placeholders (zero vectors, under keys no row has) as there are free
        nodes, which usearch puts in those nodes. They stay, as dead nodes, so the next
        scrub finds only the nodes freed after this one (usearch reuses free nodes
        oldest first: freed again, these would be overwritten again before any newer
        one). Searches drop them (``search``); appends take them back (``add``)."""
        if self.view:
            raise ValueError("a mapped graph is read-only; use materialised() first")
        count = self.removed_nodes() if self.unscrubbed else 0
        if count:
            first = PLACEHOLDER_KEY + self.placeholders
            keys = np.arange(first, first + count, dtype=np.uint64)
            expansion = self._index.expansion_add
            self._index.expansion_add = PLACEHOLDER_EXPANSION
            try:
                self._index.add(keys, np.zeros((count, self.dim), dtype=np.float32), threads=1)
            finally:
                self._index.expansion_add = expansion
            self.placeholders += count
            if self.removed_nodes():  # a placeholder took a new node, not a removed one
                raise RuntimeError("the graph's removed nodes could not all be overwritten")
        self.freed, self.unscrubbed = 0, False

    def materialised(self) -> AnnIndex:
        """A copy in memory that can be changed (this graph itself when not a view)."""
        if not self.view:
            return self
        copy = AnnIndex(self.dim, self._index.copy())
        copy.max_rowid, copy.freed, copy.placeholders, copy.unscrubbed = (
            self.max_rowid,
            self.freed,
            self.placeholders,
            self.unscrubbed,
        )
        return copy

    @staticmethod
    def build_threads(rows: int) -> int:
        """Threads to build a graph of ``rows`` rows with (0: every core)."""
        return 1 if rows < PARALLEL_BUILD_ROWS else 0

    def add(self, rowids: np.ndarray, vectors: np.ndarray, threads: int = 1) -> None:
        """Add rows (ascending rowids, above every rowid added before)."""
        if not len(rowids):
            return
        if self.view:
            raise ValueError("a mapped graph is read-only; use materialised() first")
        # Placeholders give their nodes back for the rows past the freed nodes (usearch
        # fills free nodes first): the last ones, so the others keep their keys.
        back = min(self.placeholders, max(0, len(rowids) - self.freed))
        if back:
            last = PLACEHOLDER_KEY + self.placeholders
            self._index.remove(np.arange(last - back, last, dtype=np.uint64))
            self.placeholders -= back
            self.freed += back
        self._index.add(
            np.asarray(rowids, dtype=np.uint64),
            np.ascontiguousarray(vectors, dtype=np.float32),
            threads=threads,
        )
        self.freed -= min(self.freed, len(rowids))
        self.max_rowid = max(self.max_rowid, int(rowids[-1]))

    def remove(self, rowids: np.ndarray | list[int]) -> None:
        """Take rows out of the graph (rows it does not hold are ignored)."""
        if self.view:
            raise ValueError("a mapped graph is read-only; use materialised() first")
        keys = [int(r) for r in rowids if self._index.contains(int(r))]
        if keys:
            self._index.remove(keys)
            self.freed += len(keys)
            self.unscrubbed = True

    def search(self, vector: np.ndarray, count: int) -> np.ndarray:
        """Rowids of about the ``count`` nearest rows, nearest first."""
        if count <= 0 or not len(self):
            return np.zeros(0, dtype=np.int64)
        self._index.expansion_search = max(MIN_SEARCH_EXPANSION, SEARCH_EXPANSION_FACTOR * count)
        wanted = min(count, len(self))
        # Every row asked for: every node, so that no placeholder takes a row's place.
        ask = len(self._index) if wanted == len(self) else wanted
        found = self._index.search(np.asarray(vector, dtype=np.float32), ask, threads=1)
        keys = np.asarray(found.keys, dtype=np.uint64)
        if self.placeholders:
            keys = keys[keys < PLACEHOLDER_KEY]  # dead nodes, not rows
        return keys.astype(np.int64)

    def save(self, store_path: Path, state: AnnState) -> None:
        """Persist the graph beside the store: the graph under a new generation, with
        no vector of a removed row (``scrub``), then the state naming it (atomically),
        then older generations are removed."""
        self.scrub()
        generation = uuid.uuid4().hex[:12]
        graph = store_path.with_name(f"{store_path.name}.ann.{generation}")
        self._index.save(str(graph))
        os.chmod(graph, 0o600)
        target = state_path(store_path)
        temporary = target.with_name(target.name + ".tmp")
        with open(os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600), "w") as out:
            saved = {
                **asdict(state),
                "generation": generation,
                "scrubbed": True,
                "placeholders": self.placeholders,
            }
            json.dump(asdict(AnnState(**saved)), out)
            out.flush()
            os.fsync(out.fileno())
        os.replace(temporary, target)
        for stale in store_path.parent.glob(store_path.name + ".ann.*"):
            if stale.name not in (graph.name, target.name):
                with contextlib.suppress(FileNotFoundError):
                    stale.unlink()

    @classmethod
    def load(cls, store_path: Path, view: bool = False) -> tuple[AnnIndex, AnnState] | None:
        """The persisted graph and its state, or None when there is none or it cannot
        be read (the caller then rebuilds). ``view``: map the file rather than read it
        (immediate; pages are read as searches touch them)."""
        Index = _usearch_index()  # noqa: N806
        try:
            raw = json.loads(state_path(store_path).read_text(encoding="utf-8"))
            state = AnnState(**raw)
            graph = store_path.with_name(f"{store_path.name}.ann.{state.generation}")
            index = Index.restore(str(graph), view=view)
        except (OSError, ValueError, TypeError, RuntimeError):
            return None
        placeholders = state.placeholders or 0
        if index is None or index.ndim != state.dim or len(index) != state.count + placeholders:
            return None
        loaded = cls(state.dim, index, view=view)
        loaded.max_rowid, loaded.placeholders = state.max_rowid, placeholders
        if state.placeholders is None or not state.scrubbed:
            # Saved with its removed nodes left free (scrubbed or not): counted once here,
            # made placeholders at the next save.
            loaded.freed = loaded.removed_nodes()
            loaded.unscrubbed = loaded.freed > 0
        return loaded, state
