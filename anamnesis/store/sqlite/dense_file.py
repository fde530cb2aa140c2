"""The dense index of one SQLite store, persisted beside it and memory-mapped on open.

Reading every vector out of SQLite rows on open grows with the store; a copy of the
matrix in a ``.npy`` file is mapped instead (copy-on-write: appends go to private
memory, the file is never written again), so a fresh process searches at once. Files,
all private to their owner (0600), next to the store:

- ``<store>.dense.<generation>.npy``: the vectors, float32, then zeroed room for rows
  appended later (a sparse tail: no disk is used for it);
- ``<store>.dense.<generation>.npz``: rowids, user/agent/session codes, each session's
  and each user's row positions, the filter columns (role, speaker and modality codes,
  event and recording times) and the rows' places (episode ids as UTF-8 bytes, turn
  indexes); files saved before these columns were kept lack them, and the store reads
  them once at warm-up;
- ``<store>.dense.<generation>.codes.json``: the values behind the codes;
- ``<store>.dense.json``: the state, written last and atomically: the generation, the
  store's ``vector_epoch``, the last rowid, the row count, fingerprints of a few
  rows' vectors and a digest of each file.

A snapshot is attached only when its state matches the store: the same epoch (every
delete bumps it, so the rows up to the last rowid are still those saved) and the same
vectors under a few sampled rowids, the last among them; rows appended since are then
read from SQLite. Anything else (another epoch, rows ahead of the store, unreadable or
damaged files) removes it and the matrix is read from SQLite, then saved again.
Any epoch bump (erasure, an update of a vector) removes the files before the
transaction commits, so no erased vector survives in them, even after a crash (their
names go at once; their blocks are freed on a background thread, ``index_files.
discard``, and a matrix mapped from them stays mapped, with the erased rows marked,
until it is compacted). The digests are checked in the background after open
(``checking``), against the files as they were loaded.
"""

from __future__ import annotations

import hashlib
import json
import warnings
import zipfile
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np

from ..index.dense import DenseIndex, grouping
from . import index_files
from .driver import sqlite3

#: Stores with fewer rows are read from SQLite on open, which is quick there.
MIN_ROWS = 10_000
#: Room left for appends after the saved rows, as a share of them (at least
#: ``MIN_SPARE`` rows): appends beyond it move the matrix to private memory.
SPARE_SHARE = 0.125
MIN_SPARE = 4096
#: Rows read from SQLite past the snapshot before ``close`` saves a new one.
RESAVE_ROWS = 5_000
#: Bumped when the file layout changes: older files are read from SQLite again.
FORMAT = 1
KIND = "dense"


def vector_fingerprint(blob: bytes) -> str:
    """A short digest of a vector's float32 bytes."""
    return hashlib.sha256(blob).hexdigest()[:16]


def sample_positions(count: int) -> list[int]:
    """The rows whose identity is checked against the store on load: a few spread
    over the index, the last among them (reading them all would cost what the file
    saves; the digest is checked in the background)."""
    return sorted({0, count // 4, count // 2, 3 * count // 4, count - 1})


@dataclass(frozen=True, slots=True)
class DenseState:
    """What a saved matrix covers; see the module's docstring."""

    dim: int
    epoch: str
    max_rowid: int
    count: int
    #: ``[position, rowid, vector_fingerprint]`` of a few rows, the last among them.
    samples: list
    #: Each part's ``index_files.file_digest`` when saved.
    digests: dict
    generation: str
    format: int = FORMAT


def remove_files(store_path: Path) -> None:
    """Delete a store's saved matrix."""
    index_files.remove_files(store_path, KIND)


def _part(store_path: Path, generation: str, part: str) -> Path:
    return index_files.part_path(store_path, KIND, generation, part)


class DenseFile(index_files.SavedCopy):
    """Loads, checks and saves the matrix of the store at ``path``."""

    def __init__(self, path: Path) -> None:
        super().__init__(path, MIN_ROWS)

    def load(self, dense: DenseIndex, conn: sqlite3.Connection, epoch: str) -> bool:
        """Attach the saved matrix to ``dense`` if it matches the store at ``epoch``;
        else remove the files. True when attached (rows appended since are the caller's)."""
        self.drop_check()
        try:
            raw = index_files.read_state(self._path, KIND)
            if raw is None:
                index_files.remove_if_possible(self._path, KIND)  # parts a crash left unnamed
                return False
            state = DenseState(**raw)
            if state.format != FORMAT or state.dim != dense.dim or state.epoch != epoch:
                raise ValueError("another layout or epoch")
            for _position, rowid, fingerprint in state.samples:
                row = conn.execute(
                    "SELECT embedding FROM vectors WHERE episode_rowid = ?", (rowid,)
                ).fetchone()
                if row is None or vector_fingerprint(row[0]) != fingerprint:
                    raise ValueError("the store holds other rows")
            matrix = np.load(_part(self._path, state.generation, "npy"), mmap_mode="c")
            with np.load(_part(self._path, state.generation, "npz"), allow_pickle=False) as saved:
                columns = {name: saved[name] for name in saved.files}
            tables = json.loads(
                _part(self._path, state.generation, "codes.json").read_text(encoding="utf-8")
            )
            rowids = columns["rowids"]
            if (
                matrix.dtype != np.float32
                or rowids.size != state.count
                or int(rowids[-1]) != state.max_rowid
                or any(
                    int(rowids[position]) != rowid
                    or vector_fingerprint(matrix[position].tobytes()) != fingerprint
                    for position, rowid, fingerprint in state.samples
                )
            ):
                raise ValueError("the files do not hold the rows their state names")
            dense.attach(matrix, columns, tables)
        except (OSError, ValueError, TypeError, KeyError, IndexError, zipfile.BadZipFile):
            index_files.remove_if_possible(self._path, KIND)
            dense.clear()
            return False
        self._unverified = index_files.DigestCheck(
            self._path,
            KIND,
            state.generation,
            state.digests,
            "the saved vectors were damaged; they are read from the store again",
        )
        self.unsaved = 0
        return True

    def wanted(self, dense: DenseIndex) -> bool:
        """Whether ``save`` would write: a large index with rows the files lack."""
        return index_files.save_wanted(
            self.persist, dense.size, self.min_rows, self.unsaved, RESAVE_ROWS, self._path, KIND
        )

    @index_files.one_writer(KIND)
    def save(
        self, dense: DenseIndex, epoch: str, file_epoch: Callable[[], str | None], lock: Any
    ) -> None:
        """Write ``dense`` (in step with the store at ``epoch``) beside the store, if
        ``wanted``: its rows are taken under ``lock`` (the store's), written outside it.
        ``file_epoch()`` is the store's epoch now, checked before and after writing (a
        change meanwhile may have erased rows: the files are then removed). Nothing is
        written while another thread or process writes a copy (``one_writer``)."""
        with lock:
            if not self.wanted(dense):
                return
            check = self.checking()
            matrix, columns, tables = dense.export(grouped=False)
            unsaved = self.unsaved
        # The grouping sorts every row: outside the lock, so searches go on meanwhile.
        exported = (matrix, {**columns, **grouping(columns, tables)}, tables)
        if check is not None and not check():
            return
        try:
            if file_epoch() != epoch:
                return
            self._write(dense.dim, exported, epoch)
            with lock:
                self.unsaved = max(0, self.unsaved - unsaved)
            if file_epoch() != epoch:
                remove_files(self._path)
        except sqlite3.Error:
            remove_files(self._path)
        except (OSError, ValueError) as exc:
            remove_files(self._path)
            warnings.warn(
                f"saving the vectors beside {self._path} failed ({exc}); they are read "
                "from the store on next open",
                RuntimeWarning,
                stacklevel=2,
            )

    def _write(
        self,
        dim: int,
        exported: tuple[np.ndarray, dict[str, np.ndarray], dict[str, list]],
        epoch: str,
    ) -> None:
        matrix, columns, tables = exported
        count = matrix.shape[0]
        rowids = columns["rowids"]
        generation = index_files.new_generation()
        spare = max(MIN_SPARE, int(count * SPARE_SHARE))
        npy = _part(self._path, generation, "npy")
        index_files.write_array(npy, matrix.astype("<f4", copy=False), spare)
        with index_files.private_file(_part(self._path, generation, "npz")) as out:
            arrays: dict[str, Any] = dict(columns)
            np.savez(out, **arrays)
            index_files.finish(out)
        index_files.write_json(_part(self._path, generation, "codes.json"), tables)
        digests = {
            "npy": index_files.file_digest(npy, index_files.array_bytes(npy, count)),
            "npz": index_files.file_digest(_part(self._path, generation, "npz")),
            "codes.json": index_files.file_digest(_part(self._path, generation, "codes.json")),
        }
        state = DenseState(
            dim=dim,
            epoch=epoch,
            max_rowid=int(rowids[-1]),
            count=count,
            samples=[
                [position, int(rowids[position]), vector_fingerprint(matrix[position].tobytes())]
                for position in sample_positions(count)
            ],
            digests=digests,
            generation=generation,
        )
        index_files.write_state(self._path, KIND, asdict(state))
