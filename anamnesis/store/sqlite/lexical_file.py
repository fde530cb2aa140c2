"""The in-memory lexical index of one SQLite store, persisted beside it.

Building the postings from FTS5 grows with the store and runs in the background while
searches use FTS5 itself (slower, and in one process with the build). A saved copy
is mapped instead on open (``index_files``, kind ``lexical``):

- ``<store>.lexical.<generation>.{term_ids,slots,tfs}.npy``: the postings, one
  segment sorted by term, mapped read-only (they are never written in place);
- ``<store>.lexical.<generation>.rows.npz``: each slot's rowid and length;
- ``<store>.lexical.<generation>.vocab_{hashes,ids,blob,offsets}.npy``: the terms
  (``TermTable``: found by hash, so nothing is parsed per term on open);
- ``<store>.lexical.json``: the state, written last: the generation, the store's
  ``vector_epoch``, the FTS tokenizer, the last rowid and the row count, sampled
  rows' content hashes, a digest of each file.

Only live rows and the terms they hold are saved (a removed row's postings and words
stay out). A copy is used only when its epoch and tokenizer match the store's and a
few sampled rows (the last among them) hold the same content hash there; rows
appended since are caught up as any appended rows are. Any epoch bump removes the
files before its transaction commits (``SQLiteStore``); the digests are checked in
the background (``checking``).
"""

from __future__ import annotations

import warnings
import zipfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from ..index.lexical import LexicalIndex, TermTable
from . import index_files
from .dense_file import sample_positions
from .driver import sqlite3

KIND = "lexical"
#: Stores with fewer rows build the index from FTS5 on open, which is quick there.
MIN_ROWS = 10_000
#: Rows added since the saved copy before a new one is saved.
RESAVE_ROWS = 5_000
FORMAT = 1
_MAPPED = ("term_ids", "slots", "tfs")
_VOCAB = ("hashes", "ids", "blob", "offsets")


def remove_files(store_path: Path) -> None:
    """Delete a store's saved lexical index."""
    index_files.remove_files(store_path, KIND)


def _part(store_path: Path, generation: str, part: str) -> Path:
    return index_files.part_path(store_path, KIND, generation, part)


class LexicalFile(index_files.SavedCopy):
    """Loads, checks and saves the lexical index of the store at ``path``."""

    def __init__(self, path: Path) -> None:
        super().__init__(path, MIN_ROWS)
        #: Whether the index in use was loaded from the files (not built).
        self.mapped = False

    def load(self, conn: sqlite3.Connection, epoch: str, tokenize: str) -> LexicalIndex | None:
        """The saved index if it matches the store at ``epoch``; else None (and the
        files are removed)."""
        try:
            state = index_files.read_state(self._path, KIND)
            if state is None:
                index_files.remove_if_possible(self._path, KIND)  # parts a crash left unnamed
                return None
            if (
                state.get("format") != FORMAT
                or state.get("epoch") != epoch
                or state.get("tokenize") != tokenize
            ):
                raise ValueError("another layout, tokenizer or epoch")
            generation, max_rowid = str(state["generation"]), int(state["max_rowid"])
            digests = dict(state["digests"])
            for rowid, content_hash in state["samples"]:
                row = conn.execute(
                    "SELECT content_hash FROM episodes WHERE rowid = ?", (rowid,)
                ).fetchone()
                if row is None or row[0] != content_hash:
                    raise ValueError("the store holds other rows")
            count = int(state["documents"])
            arrays = {
                name: np.load(_part(self._path, generation, f"{name}.npy"), mmap_mode="r")
                for name in _MAPPED
            }
            rows = _part(self._path, generation, "rows.npz")
            with np.load(rows, allow_pickle=False) as saved:
                arrays.update({name: saved[name] for name in ("rowids", "lengths", "live")})
            terms = TermTable(
                *(
                    np.load(_part(self._path, generation, f"vocab_{name}.npy"), mmap_mode="r")
                    for name in _VOCAB
                )
            )
            if arrays["rowids"].size != count:
                raise ValueError("the files do not hold the rows their state names")
            index = LexicalIndex()
            index.attach(arrays, terms)
            if index.max_rowid != max_rowid or index.documents != count:
                raise ValueError("the files do not hold the rows their state names")
        except (OSError, ValueError, TypeError, KeyError, IndexError, zipfile.BadZipFile):
            index_files.remove_if_possible(self._path, KIND)
            return None
        self.drop_check()
        self._unverified = index_files.DigestCheck(
            self._path,
            KIND,
            generation,
            digests,
            "the saved lexical index was damaged; it is built from the store again",
        )
        self.unsaved = 0
        self.mapped = True
        return index

    def wanted(self, index: LexicalIndex) -> bool:
        """Whether ``save`` would write: a large index with rows the files lack."""
        return index_files.save_wanted(
            self.persist,
            index.documents,
            self.min_rows,
            self.unsaved,
            RESAVE_ROWS,
            self._path,
            KIND,
        )

    @index_files.one_writer(KIND)
    def save(
        self,
        index: LexicalIndex,
        epoch: str,
        tokenize: str,
        file_epoch: Callable[[], str | None],
        content_hash: Callable[[int], str | None],
        lock: Any,
    ) -> None:
        """Write ``index`` (in step with the store at ``epoch``, nothing stale) beside
        the store if ``wanted``; taken under ``lock``, written outside it, the store's
        epoch checked before and after (a change meanwhile removes the files).
        ``content_hash(rowid)`` reads a row's hash from the store (the samples checked
        on load). Nothing is written while another thread or process writes a copy
        (``index_files.one_writer``)."""
        with lock:
            if not self.wanted(index) or self._unverified is not None:
                return
            parts = index.parts()
            unsaved = self.unsaved
        try:
            if file_epoch() != epoch:
                return
            arrays, terms, counts = parts.exported()
            generation = index_files.new_generation()
            vocab = {f"vocab_{name}": getattr(terms, name) for name in _VOCAB}
            names = [f"{name}.npy" for name in (*_MAPPED, *vocab)] + ["rows.npz"]
            for name, array in (*((n, arrays[n]) for n in _MAPPED), *vocab.items()):
                index_files.write_array(_part(self._path, generation, f"{name}.npy"), array)
            with index_files.private_file(_part(self._path, generation, "rows.npz")) as out:
                np.savez(
                    out, rowids=arrays["rowids"], lengths=arrays["lengths"], live=arrays["live"]
                )
                index_files.finish(out)
            rowids = arrays["rowids"]
            samples = [
                [rowid, content_hash(rowid)]
                for rowid in (int(rowids[p]) for p in sample_positions(rowids.size))
            ]
            state = {
                "format": FORMAT,
                "epoch": epoch,
                "tokenize": tokenize,
                "max_rowid": counts["max_rowid"],
                "documents": counts["size"],
                "samples": samples,
                "digests": {
                    name: index_files.file_digest(_part(self._path, generation, name))
                    for name in names
                },
                "generation": generation,
            }
            if file_epoch() != epoch:
                remove_files(self._path)  # the parts may hold rows erased meanwhile
                return
            index_files.write_state(self._path, KIND, state)
            with lock:
                self.unsaved = max(0, self.unsaved - unsaved)
            if file_epoch() != epoch:
                remove_files(self._path)
        except sqlite3.Error:
            remove_files(self._path)
        except (OSError, ValueError) as exc:
            remove_files(self._path)
            warnings.warn(
                f"saving the lexical index beside {self._path} failed ({exc}); it is "
                "built from the store on next open",
                RuntimeWarning,
                stacklevel=2,
            )
