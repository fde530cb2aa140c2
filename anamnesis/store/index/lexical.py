"""An in-memory BM25 index that ranks exactly as the SQLite store's FTS5 ``bm25()``.

FTS5 computes ``bm25()`` for every row that matches any query term, which at 100k long
episodes in one scope means tens of thousands of rows per search. This index holds
the same postings in numpy arrays and scores only what the query touches, with FTS5's
formula (``fts5Bm25Function`` in SQLite's ``ext/fts5/fts5_aux.c``; the same one
``postgres.lexical`` reproduces)::

    score(d) = sum over query terms t of
               idf(t) * tf(t, d) * (k1 + 1) / (tf(t, d) + k1 * (1 - b + b * len(d) / avglen))
    idf(t)   = max(ln((N - n(t) + 0.5) / (n(t) + 0.5)), 1e-6)

N counts every row of the FTS table (every tenant), n(t) the rows whose content holds
t, len(d) the row's tokens in all columns, avglen their mean. The postings come from
FTS5 itself (``read_postings`` over an ``fts5vocab`` instance table), so the tokens,
stems and counts are FTS5's own, not a reimplementation of its tokenizer.

Scope is the FTS table's scope column (see ``sqlite.schema``): a row is in a scope when
it holds each of the scope's tokens, exactly as the FTS5 query requires them.
"""

from __future__ import annotations

import hashlib
import math
import sqlite3
from collections import OrderedDict
from collections.abc import Callable, Hashable, Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

#: BM25 parameters: FTS5's, which are fixed in its source (k1 = 1.2, b = 0.75), the
#: values Robertson and Zaragoza recommend as defaults; ``postgres.lexical`` uses them too.
BM25_K1 = 1.2
BM25_B = 0.75
#: The smallest IDF a term can have: FTS5 clamps ln((N - n + 0.5)/(n + 0.5)) at 1e-6,
#: so a term in more than half of the episodes still counts, barely.
IDF_FLOOR = 1e-6
#: The FTS column whose terms are searched; the other columns only count in len(d).
CONTENT_COLUMN = "content"
#: The FTS column holding the scope tokens.
SCOPE_COLUMN = "scope_terms"
#: Keys of scope-column tokens in the term dictionary start with this (FTS5 tokens
#: never contain NUL, so they cannot collide with content terms).
SCOPE_KEY = "\x00"
#: Token instances parsed per step while reading postings (bounds the memory peak).
_PARSE_CHUNK = 500_000
#: More segments than this are merged (appends each add one small segment).
MAX_SEGMENTS = 8
#: Score arrays of the latest term sets kept for reuse: one search's lexical channels
#: ask for the question's terms, the same with feedback terms appended, and the same
#: again restricted to one role.
SCORE_CACHE = 4
#: Row masks of the latest filters kept (``search``'s ``allowed_key``).
ALLOWED_CACHE = 8
#: Tokens' BM25 contributions kept between searches: at most this many per row.
CONTRIBUTION_BUDGET = 4
#: Query tokens whose postings number at most 1/SPARSE_SHARE of the rows are scored
#: over the matched rows only (sorting few postings beats passes over every row).
SPARSE_SHARE = 64
#: A scope holding at most 1/SCOPED_SHARE of the rows (one small user among many) is
#: searched over its own rows: each query token's postings are looked up for them by
#: binary search, so the work follows the scope's size, not the store's.
SCOPED_SHARE = 16
#: Term ids found in a mapped term table, kept for the next searches.
TERM_IDS_KEPT = 100_000
#: Scopes whose rows (``_small_scope``), and term sequences whose matches in a small
#: scope, are kept for the next searches.
SCOPE_CACHE = 64


@dataclass(slots=True)
class Postings:
    """Token instances read from an fts5vocab table, grouped by key.

    ``keys[i]`` holds ``counts[i]`` consecutive entries of ``rowids``; a content term's
    key is the term, a scope token's key is ``SCOPE_KEY + token``.
    ``lengths`` maps each row to its tokens in all columns.
    """

    keys: list[str]
    counts: np.ndarray
    rowids: np.ndarray
    length_rowids: np.ndarray
    lengths: np.ndarray


def read_postings(conn: sqlite3.Connection, vocab: str) -> Postings:
    """Every token instance of an fts5vocab ``instance`` table, as ``Postings``.

    One pass over the vocabulary: FTS5 lists instances by term, then row, so the rows
    of each term arrive in ascending order and are aggregated inside SQLite.
    """
    scope_flag = f"(col = '{SCOPE_COLUMN}')"
    content_flag = f"(col = '{CONTENT_COLUMN}')"
    terms: list[str] = []
    parts: list[tuple[np.ndarray, np.ndarray, np.ndarray]] = []
    chunk: list[str] = []
    counts: list[int] = []
    pending = 0

    def flush() -> None:
        # Parse a few million numbers at a time: the text is the bulkiest form.
        coded = np.fromstring(",".join(chunk), dtype=np.int64, sep=",")  # noqa: NPY201
        first = len(terms) - len(counts)
        group = np.repeat(np.arange(first, len(terms), dtype=np.int32), counts)
        parts.append(((coded & 3).astype(np.int8), np.right_shift(coded, 2, out=coded), group))
        chunk.clear()
        counts.clear()

    for term, count, docs in conn.execute(
        f"SELECT term, count(*), group_concat(doc * 4 + {scope_flag} * 2 + {content_flag}) "
        f"FROM {vocab} GROUP BY term"
    ):
        terms.append(term)
        counts.append(count)
        chunk.append(docs)
        pending += count
        if pending >= _PARSE_CHUNK:
            flush()
            pending = 0
    if chunk:
        flush()
    if not terms:
        empty = np.zeros(0, dtype=np.int64)
        return Postings([], empty, empty, empty, empty)
    flags = np.concatenate([p[0] for p in parts])
    rowids = np.concatenate([p[1] for p in parts])
    group = np.concatenate([p[2] for p in parts])
    parts.clear()
    length_rowids, lengths = _run_lengths(rowids if _ascending(rowids) else np.sort(rowids))
    keys: list[str] = []
    key_counts: list[np.ndarray] = []
    key_rowids: list[np.ndarray] = []
    for flag, prefix in ((1, ""), (2, SCOPE_KEY)):
        selected = flags == flag
        groups, sizes = _run_lengths(group[selected])
        keys.extend(prefix + terms[g] for g in groups)
        key_counts.append(sizes)
        key_rowids.append(rowids[selected])
    return Postings(
        keys=keys,
        counts=np.concatenate(key_counts),
        rowids=np.concatenate(key_rowids),
        length_rowids=length_rowids,
        lengths=lengths,
    )


@dataclass(slots=True)
class _Segment:
    """Postings sorted by term id: ``slots`` and ``tfs`` of ``term_ids``."""

    term_ids: np.ndarray
    slots: np.ndarray
    tfs: np.ndarray

    def postings(self, term_id: int) -> tuple[np.ndarray, np.ndarray]:
        key = np.int32(term_id)  # a Python int would make numpy convert the whole array
        low = int(np.searchsorted(self.term_ids, key, "left"))
        high = int(np.searchsorted(self.term_ids, key, "right"))
        return self.slots[low:high], self.tfs[low:high]


@dataclass(slots=True)
class _Scored:
    """BM25 for one sequence of query tokens: of every slot (``scores``, 0 where none
    matches), or of the matched slots only (``slots`` ascending, ``values``) when few
    postings match; and the matched slots of each scope with their scores."""

    scores: np.ndarray | None = None
    slots: np.ndarray | None = None
    values: np.ndarray | None = None
    matched: dict[tuple[str, ...], tuple[np.ndarray, np.ndarray]] = field(default_factory=dict)

    def at(self, slots: np.ndarray) -> np.ndarray:
        """The scores of ``slots`` (ascending), 0 where none matches, in a new array."""
        if self.scores is not None:
            return self.scores[slots]
        assert self.slots is not None and self.values is not None
        found = np.zeros(slots.size, dtype=np.float64)
        if self.slots.size:
            at = np.minimum(np.searchsorted(self.slots, slots), self.slots.size - 1)
            hit = self.slots[at] == slots
            found[hit] = self.values[at[hit]]
        return found


def _merged(segments: Sequence[_Segment]) -> _Segment:
    term_ids = np.concatenate([s.term_ids for s in segments])
    order = np.argsort(term_ids, kind="stable")
    return _Segment(
        term_ids[order],
        np.concatenate([s.slots for s in segments])[order],
        np.concatenate([s.tfs for s in segments])[order],
    )


def term_hash(term: str) -> int:
    """A 64-bit hash of a term, the same in every process (``hash`` is not)."""
    digest = hashlib.blake2b(term.encode("utf-8"), digest_size=8).digest()
    return int.from_bytes(digest, "little")


@dataclass(frozen=True, slots=True)
class TermTable:
    """Terms in id order as arrays a file can hold and a process can map: found by
    hash (a binary search), so loading one costs no work per term.

    ``blob[offsets[i]:offsets[i + 1]]`` is term ``i`` in UTF-8; ``hashes`` holds every
    term's ``term_hash``, ascending, and ``ids`` the term id of each.
    """

    hashes: np.ndarray
    ids: np.ndarray
    blob: np.ndarray
    offsets: np.ndarray

    @classmethod
    def of(cls, terms: Sequence[str]) -> TermTable:
        encoded = [term.encode("utf-8") for term in terms]
        offsets = np.zeros(len(encoded) + 1, dtype=np.int64)
        np.cumsum([len(term) for term in encoded], out=offsets[1:])
        hashes = np.fromiter(
            (
                int.from_bytes(hashlib.blake2b(term, digest_size=8).digest(), "little")
                for term in encoded
            ),
            dtype=np.uint64,
            count=len(encoded),
        )
        order = np.argsort(hashes, kind="stable")
        blob = np.frombuffer(b"".join(encoded), dtype=np.uint8)
        return cls(hashes[order], order.astype(np.int64), blob, offsets)

    def __len__(self) -> int:
        return self.offsets.size - 1

    def find(self, term: str) -> int | None:
        """The id of ``term``, or None."""
        key = np.uint64(term_hash(term))
        encoded = term.encode("utf-8")
        at = int(np.searchsorted(self.hashes, key))
        while at < self.hashes.size and self.hashes[at] == key:
            found = int(self.ids[at])
            start, end = int(self.offsets[found]), int(self.offsets[found + 1])
            if self.blob[start:end].tobytes() == encoded:
                return found
            at += 1
        return None

    def terms(self) -> list[str]:
        """Every term, in id order."""
        data = self.blob.tobytes()
        bounds = self.offsets.tolist()
        return [data[a:b].decode("utf-8") for a, b in zip(bounds, bounds[1:], strict=False)]


class _Terms:
    """Term ids: a ``TermTable`` (from a file) and the terms added since, in a dict."""

    def __init__(self, table: TermTable | None = None) -> None:
        self._table = table
        self._base = 0 if table is None else len(table)
        self._added: dict[str, int] = {}
        #: The table's answers so far (it never changes): id, or None when it lacks the term.
        self._found: dict[str, int | None] = {}

    def __len__(self) -> int:
        return self._base + len(self._added)

    def get(self, term: str) -> int | None:
        found = self._added.get(term)
        if found is None and self._table is not None:
            if term in self._found:
                return self._found[term]
            if len(self._found) >= TERM_IDS_KEPT:
                self._found.clear()
            found = self._found[term] = self._table.find(term)
        return found

    def setdefault(self, term: str) -> int:
        found = self.get(term)
        if found is None:
            found = self._added[term] = len(self)
        return found

    def snapshot(self) -> _Terms:
        """A copy that later additions do not change (the table is never changed)."""
        copy = _Terms(self._table)
        copy._added = dict(self._added)
        return copy

    def values(self) -> list[str]:
        """Every term, in id order."""
        base = self._table.terms() if self._table is not None else []
        return base + list(self._added)


@dataclass(slots=True)
class _Parts:
    """A ``LexicalIndex`` taken apart (``LexicalIndex.parts``)."""

    segments: list[_Segment]
    rowids: np.ndarray
    lengths: np.ndarray
    live: np.ndarray
    terms: _Terms
    counts: dict[str, int]

    def exported(self) -> tuple[dict[str, np.ndarray], TermTable, dict[str, int]]:
        """The live rows only, and only the terms they hold: a removed row's postings
        and the terms no live row holds are left out (its text is not kept anywhere)."""
        live = self.live
        if not self.segments:
            empty = np.zeros(0, dtype=np.int32)
            merged = _Segment(empty, empty, np.zeros(0, dtype=np.float32))
        else:
            merged = self.segments[0] if len(self.segments) == 1 else _merged(self.segments)
        keep = live[merged.slots]
        slots, term_ids, tfs = merged.slots[keep], merged.term_ids[keep], merged.tfs[keep]
        new_slots = np.cumsum(live, dtype=np.int64) - 1
        every = self.terms.values()
        used = np.flatnonzero(np.bincount(term_ids, minlength=len(every)))
        renumbered = np.full(len(every), -1, dtype=np.int64)
        renumbered[used] = np.arange(used.size)
        arrays = {
            "term_ids": renumbered[term_ids].astype(np.int32),
            "slots": new_slots[slots].astype(np.int32),
            "tfs": tfs.astype(np.float32),
            "rowids": self.rowids[live],
            "lengths": self.lengths[live],
            "live": np.ones(int(live.sum()), dtype=bool),
        }
        terms = TermTable.of([every[i] for i in used])
        return arrays, terms, {**self.counts, "size": int(live.sum())}


class LexicalIndex:
    """Postings of an FTS5 table in memory, with FTS5's BM25 ranking.

    Rows occupy slots in the order they were added; a removed row's slot is marked
    dead, and a changed row is removed and added again. ``documents`` and ``tokens``
    (N and the total of len(d)) count live rows only, as FTS5 counts its rows.
    """

    def __init__(self) -> None:
        self._terms = _Terms()
        self._segments: list[_Segment] = []
        self._rowids = np.zeros(0, dtype=np.int64)
        self._lengths = np.zeros(0, dtype=np.float64)
        self._live = np.zeros(0, dtype=bool)
        self._size = 0
        #: Removed slots (postings of live rows only need no filtering while none is),
        #: and which they are, ascending.
        self._dead = 0
        self._dead_slots = np.zeros(0, dtype=np.int64)
        #: Each scope's mask over the slots (``in_scope``): kept by appends (extended)
        #: and removals (their slots cleared), not taken again from the postings.
        self._scope_masks: dict[tuple[str, ...], np.ndarray] = {}
        self._scope_slot_cache: OrderedDict[tuple[str, ...], np.ndarray] = OrderedDict()
        self._scored: OrderedDict[tuple[str, ...], _Scored] = OrderedDict()
        self._scoped: OrderedDict[tuple, tuple[np.ndarray, np.ndarray]] = OrderedDict()
        #: Live postings of each query token, while some rows are dead (N's n(t)).
        self._live_counts: dict[str, int] = {}
        self._allowed_masks: OrderedDict[Hashable, np.ndarray] = OrderedDict()
        self._contribution_cache: OrderedDict[str, np.ndarray] = OrderedDict()
        self._contribution_values = 0
        self.documents = 0
        self.tokens = 0
        #: The largest rowid ever added: rows above it are not indexed yet.
        self.max_rowid = 0

    def _grow(self, extra: int) -> None:
        needed = self._size + extra
        if needed <= len(self._rowids):
            return
        capacity = max(needed, 2 * len(self._rowids), 1024)
        for name in ("_rowids", "_lengths", "_live"):
            old = getattr(self, name)
            new = np.zeros(capacity, dtype=old.dtype)
            new[: self._size] = old[: self._size]
            setattr(self, name, new)

    def add(self, postings: Postings) -> None:
        """Index the rows in ``postings`` (new rows, or rows removed before)."""
        rows = postings.length_rowids
        if rows.size == 0:
            return
        self._forget_scores()
        start = self._size
        self._grow(rows.size)
        self._rowids[start : start + rows.size] = rows
        self._lengths[start : start + rows.size] = postings.lengths
        self._live[start : start + rows.size] = True
        self._size += rows.size
        self.documents += int(rows.size)
        self.tokens += int(postings.lengths.sum())
        self.max_rowid = max(self.max_rowid, int(rows[-1]))

        ids = np.fromiter(
            (self._terms.setdefault(k) for k in postings.keys),
            dtype=np.int32,
            count=len(postings.keys),
        )
        instance_ids = np.repeat(ids, postings.counts)
        slots = (start + np.searchsorted(rows, postings.rowids)).astype(np.int64)
        # One posting per (term, row), its count the term frequency.
        combined = instance_ids.astype(np.int64) * (self._size + 1) + slots
        if not _ascending(combined):
            combined.sort()
        unique, tf = _run_lengths(combined)
        del combined
        term_ids, posting_slots = np.divmod(unique, self._size + 1)
        segment = _Segment(
            term_ids.astype(np.int32), posting_slots.astype(np.int32), tf.astype(np.float32)
        )
        self._segments.append(segment)
        self._extend_scope_masks(segment, start)
        if len(self._segments) > MAX_SEGMENTS:
            self._segments = [self._segments[0], _merged(self._segments[1:])]
            if len(self._segments[1].slots) > len(self._segments[0].slots) // 4:
                self._segments = [_merged(self._segments)]

    def _extend_scope_masks(self, segment: _Segment, start: int) -> None:
        """Extend each remembered scope mask over the slots from ``start`` on, which
        ``segment`` alone holds postings of (the rows just added)."""
        added = self._size - start
        for key, mask in self._scope_masks.items():
            part = np.full(added, bool(key))  # no token: no row (as ``in_scope``)
            for token in key:
                term_id = self._terms.get(SCOPE_KEY + token)
                keep = np.zeros(added, dtype=bool)
                if term_id is not None:
                    keep[segment.postings(term_id)[0] - start] = True
                part &= keep
            self._scope_masks[key] = np.concatenate((mask[:start], part))

    def export(self) -> tuple[dict[str, np.ndarray], TermTable, dict[str, int]]:
        """What ``attach`` takes back: the arrays (postings merged into one segment),
        the terms in id order and the counts. Segments never change once made, so the
        merge may run outside the owner's lock if the arrays are taken under it
        (``parts``)."""
        return self.parts().exported()

    def parts(self) -> _Parts:
        """The index's state now, cheap to take (the small arrays copied)."""
        size = self._size
        return _Parts(
            segments=list(self._segments),
            rowids=self._rowids[:size].copy(),
            lengths=self._lengths[:size].copy(),
            live=self._live[:size].copy(),
            terms=self._terms.snapshot(),
            counts={
                "size": size,
                "documents": self.documents,
                "tokens": self.tokens,
                "max_rowid": self.max_rowid,
            },
        )

    def attach(self, arrays: Mapping[str, np.ndarray], terms: TermTable) -> None:
        """Replace the whole index by what ``export`` gave (the postings may be
        read-only mappings: they are never written in place)."""
        size = arrays["rowids"].size
        if not (arrays["lengths"].size == arrays["live"].size == size):
            raise ValueError("the row arrays differ in length")
        term_ids, slots, tfs = arrays["term_ids"], arrays["slots"], arrays["tfs"]
        if not (term_ids.size == slots.size == tfs.size):
            raise ValueError("the posting arrays differ in length")
        # Only the ends are checked here (a pass over mapped postings would read them
        # all); the owner checks a digest of the whole before trusting it further.
        if not (terms.hashes.size == terms.ids.size == len(terms)) or (
            terms.offsets.size and int(terms.offsets[-1]) != terms.blob.size
        ):
            raise ValueError("the term table is inconsistent")
        if term_ids.size and (int(term_ids[-1]) >= len(terms) or int(term_ids[0]) < 0):
            raise ValueError("the postings name terms the index lacks")
        live = arrays["live"].astype(bool)
        lengths = arrays["lengths"].astype(np.float64)
        self._forget_scores()
        self._scope_masks.clear()
        self._dead_slots = np.flatnonzero(~live).astype(np.int64)
        self._dead = int(self._dead_slots.size)
        self._terms = _Terms(terms)
        # Plain views of the (mapped) arrays: a numpy.memmap slices slower, in Python.
        self._segments = [_Segment(np.asarray(term_ids), np.asarray(slots), np.asarray(tfs))]
        self._rowids = np.array(arrays["rowids"], dtype=np.int64)
        self._lengths = lengths
        self._live = live
        self._size = size
        self.documents = int(live.sum())
        self.tokens = int(lengths[live].sum())
        self.max_rowid = int(self._rowids[-1]) if size else 0

    def remove(self, rowids: Sequence[int] | np.ndarray) -> None:
        """Forget rows (deleted, or about to be re-added with new content)."""
        if not len(rowids) or not self._size:
            return
        hit = self._live[: self._size] & np.isin(
            self._rowids[: self._size], np.asarray(rowids, dtype=np.int64)
        )
        self._live[: self._size][hit] = False
        gone = np.flatnonzero(hit)
        self._dead += int(gone.size)
        self._dead_slots = np.union1d(self._dead_slots, gone)
        self._forget_scores()
        for mask in self._scope_masks.values():
            mask[gone] = False
        self.documents -= int(hit.sum())
        self.tokens -= int(self._lengths[: self._size][hit].sum())

    def _forget_scores(self) -> None:
        """Drop what was computed over the rows (they changed); the scope masks are
        kept up to date instead (``add``, ``remove``)."""
        self._scope_slot_cache.clear()
        self._scored.clear()
        self._scoped.clear()
        self._live_counts.clear()
        self._allowed_masks.clear()
        self._contribution_cache.clear()
        self._contribution_values = 0

    def _postings(self, key: str) -> tuple[np.ndarray, np.ndarray]:
        """Live slots and term frequencies of ``key`` across all segments."""
        term_id = self._terms.get(key)
        if term_id is None:
            return np.zeros(0, dtype=np.int32), np.zeros(0, dtype=np.float32)
        parts = [segment.postings(term_id) for segment in self._segments]
        if len(parts) == 1:
            slots, tfs = parts[0]
        else:
            slots = np.concatenate([p[0] for p in parts])
            tfs = np.concatenate([p[1] for p in parts])
        if not self._dead:
            return slots, tfs
        dead = self._dead_at(slots)
        if dead is None:
            return slots, tfs
        return np.delete(slots, dead), np.delete(tfs, dead)

    def _dead_at(self, slots: np.ndarray) -> np.ndarray | None:
        """Where ``slots`` (ascending) hold removed ones (None: nowhere): a binary search
        of each removed slot when they are the fewer, else a look at each slot."""
        if not slots.size:
            return None
        if self._dead_slots.size < slots.size:
            wanted = self._dead_slots.astype(slots.dtype, copy=False)
            at = np.minimum(np.searchsorted(slots, wanted), slots.size - 1)
            found = at[slots[at] == wanted]
        else:
            found = np.flatnonzero(~self._live[slots])
        return found if found.size else None

    def in_scope(self, scope_tokens: Sequence[str]) -> np.ndarray:
        """A boolean mask over slots: rows holding every one of ``scope_tokens``."""
        key = tuple(scope_tokens)
        cached = self._scope_masks.get(key)
        if cached is not None:
            return cached
        if len(self._scope_masks) >= 64:
            self._scope_masks.clear()
        mask = np.zeros(self._size, dtype=bool)
        for i, token in enumerate(scope_tokens):
            slots, _ = self._postings(SCOPE_KEY + token)
            if i == 0:
                mask[slots] = True
            else:
                keep = np.zeros(self._size, dtype=bool)
                keep[slots] = True
                mask &= keep
        self._scope_masks[key] = mask
        return mask

    def _contributions(self, terms: Sequence[str]) -> list[tuple[np.ndarray, np.ndarray]]:
        """Each query token's live slots and its BM25 contribution to each (tokens no
        row holds left out). Contributions are remembered between searches, up to
        ``CONTRIBUTION_BUDGET`` values per row, until the index changes: common words
        come back in question after question."""
        out: list[tuple[np.ndarray, np.ndarray]] = []
        for term in terms:
            slots, tf = self._postings(term)
            if not slots.size:
                continue
            values = self._contribution_cache.get(term)
            if values is None:
                values = self._bm25(slots, tf)
                self._remember_contribution(term, values)
            else:
                self._contribution_cache.move_to_end(term)
            out.append((slots, values))
        return out

    def _bm25(self, slots: np.ndarray, tf: np.ndarray, n: int | None = None) -> np.ndarray:
        """One token's BM25 contribution to each of ``slots`` (live), given its term
        frequency there; ``n``: the live rows holding it (default: ``slots.size``, all
        of them)."""
        n = slots.size if n is None else n
        idf = max(math.log((self.documents - n + 0.5) / (n + 0.5)), IDF_FLOOR)
        mean_length = self.tokens / self.documents
        tf64 = tf.astype(np.float64)
        norm = BM25_K1 * (1 - BM25_B + BM25_B * self._lengths[slots] / mean_length)
        result: np.ndarray = idf * (tf64 * (BM25_K1 + 1)) / (tf64 + norm)
        return result

    def _remember_contribution(self, term: str, values: np.ndarray) -> None:
        """Keep ``values`` for ``term``, the least recently used dropped over budget."""
        budget = CONTRIBUTION_BUDGET * self._size
        if values.size > budget:
            return
        self._contribution_cache[term] = values
        self._contribution_values += values.size
        while self._contribution_values > budget:
            _, dropped = self._contribution_cache.popitem(last=False)
            self._contribution_values -= dropped.size

    def _scores(self, terms: Sequence[str]) -> _Scored:
        """BM25 for the query tokens ``terms``, remembered for the next searches.

        A row's score adds each token's contribution in query order (a token given
        twice counts twice, as FTS5 scores each query term as its own phrase). A token
        sequence that extends a remembered one (the question's tokens with feedback
        tokens appended) starts from its sums and adds only the new tokens: each slot
        receives the same additions in the same order, so the scores are the same
        floating-point numbers as from scratch. When the tokens' postings are few next
        to the rows, only the matched slots are scored (``_Scored.slots``).
        """
        key = tuple(terms)
        found = self._scored.get(key)
        if found is not None:
            self._scored.move_to_end(key)
            return found
        start, base = 0, None
        for known, scored in self._scored.items():
            if start < len(known) < len(key) and key[: len(known)] == known:
                start, base = len(known), scored
        new = self._contributions(key[start:])
        sparse_base = base if base is not None and base.slots is not None else None
        touched = sum(slots.size for slots, _ in new)
        if sparse_base is not None and sparse_base.slots is not None:
            touched += sparse_base.slots.size
        if base is not None and base.scores is not None:
            scores = base.scores.copy()
        elif touched > self._size // SPARSE_SHARE:
            scores = np.zeros(self._size, dtype=np.float64)
            if sparse_base is not None:
                scores[sparse_base.slots] = sparse_base.values
        else:
            found = self._sparse(base, new)
            scores = None
        if scores is not None:
            for slots, values in new:
                # A token holds each slot once, so this adds one contribution per slot.
                scores[slots] += values
            found = _Scored(scores=scores)
        assert found is not None
        self._scored[key] = found
        if len(self._scored) > SCORE_CACHE:
            self._scored.popitem(last=False)
        return found

    def _sparse(self, base: _Scored | None, new: list[tuple[np.ndarray, np.ndarray]]) -> _Scored:
        """``_scores`` over the matched slots only: the base's sums, then each new
        token's contributions, added per slot in that order."""
        slot_parts: list[np.ndarray] = []
        value_parts: list[np.ndarray] = []
        if base is not None and base.slots is not None and base.values is not None:
            slot_parts.append(base.slots)
            value_parts.append(base.values)
        for slots, values in new:
            slot_parts.append(slots)
            value_parts.append(values)
        if not slot_parts:
            empty = np.zeros(0, dtype=np.int64)
            return _Scored(slots=empty, values=np.zeros(0, dtype=np.float64))
        slots, inverse = np.unique(np.concatenate(slot_parts), return_inverse=True)
        # bincount adds the weights in the order given: per slot, the same order as above.
        values = np.bincount(inverse, np.concatenate(value_parts), minlength=slots.size)
        return _Scored(slots=slots, values=values)

    def _allowed(
        self,
        candidates: np.ndarray,
        allowed_rowids: np.ndarray | Callable[[], np.ndarray | None],
        key: Hashable | None,
    ) -> np.ndarray | None:
        """Which of ``candidates`` (slots) ``allowed_rowids`` holds, as a boolean array
        (None: no restriction). With a ``key``, what the rows are is remembered under
        it until the index changes: a mask over every slot, or, for rows that are few
        next to the slots (a small scope's), the rowids sorted, looked up by binary
        search; without, only the candidates are looked up."""
        entry = self._allowed_masks.get(key) if key is not None else None
        if entry is None:
            rowids = allowed_rowids() if callable(allowed_rowids) else allowed_rowids
            if rowids is None:
                return None
            if key is None:
                result: np.ndarray = np.isin(self._rowids[candidates], rowids)
                return result
            rowids = np.asarray(rowids, dtype=np.int64)
            if rowids.size * SCOPED_SHARE <= self._size:
                entry = np.sort(rowids)
            else:
                entry = np.isin(self._rowids[: self._size], rowids)
            self._allowed_masks[key] = entry
            if len(self._allowed_masks) > ALLOWED_CACHE:
                self._allowed_masks.popitem(last=False)
        else:
            self._allowed_masks.move_to_end(key)
        if entry.dtype == np.bool_:
            kept: np.ndarray = entry[candidates]
            return kept
        return _member(self._rowids[candidates], entry)

    def _slot_count(self, key: str) -> int:
        """How many postings ``key`` has (dead rows' too): no pass over them."""
        term_id = self._terms.get(key)
        if term_id is None:
            return 0
        return sum(segment.postings(term_id)[0].size for segment in self._segments)

    def _small_scope(self, scope_tokens: tuple[str, ...]) -> np.ndarray | None:
        """The live slots holding every one of ``scope_tokens``, ascending, when they
        are at most 1/``SCOPED_SHARE`` of the rows (remembered until the index
        changes); None for a larger scope, which ``_scores`` serves."""
        cached = self._scope_slot_cache.get(scope_tokens)
        if cached is not None:
            self._scope_slot_cache.move_to_end(scope_tokens)
            return cached
        if not scope_tokens:
            return None
        counts = {token: self._slot_count(SCOPE_KEY + token) for token in scope_tokens}
        smallest = min(scope_tokens, key=counts.__getitem__)
        if counts[smallest] * SCOPED_SHARE > self.documents:
            return None
        term_id = self._terms.get(SCOPE_KEY + smallest)
        parts = [] if term_id is None else [s.postings(term_id)[0] for s in self._segments]
        slots = np.concatenate(parts) if parts else np.zeros(0, dtype=np.int32)
        # Segments hold ascending slots, each segment's above the one before's.
        if not _ascending(slots):
            slots = np.sort(slots)
        for token in scope_tokens:
            if token != smallest and slots.size:
                slots = slots[self._holds(SCOPE_KEY + token, slots)]
        if self._dead and slots.size:
            slots = slots[self._live[slots]]
        self._scope_slot_cache[scope_tokens] = slots
        if len(self._scope_slot_cache) > SCOPE_CACHE:
            self._scope_slot_cache.popitem(last=False)
        return slots

    def _holds(self, key: str, slots: np.ndarray) -> np.ndarray:
        """Which of ``slots`` (ascending) ``key`` has a posting in, as a boolean array."""
        held = np.zeros(slots.size, dtype=bool)
        term_id = self._terms.get(key)
        if term_id is None:
            return held
        for segment in self._segments:
            held |= _member(slots, segment.postings(term_id)[0])
        return held

    def _scoped_matches(
        self, terms: Sequence[str], scope: np.ndarray, sums: np.ndarray | None = None
    ) -> tuple[np.ndarray, np.ndarray]:
        """The slots of ``scope`` (ascending live slots) that hold any of ``terms``,
        and their BM25: the scores ``_scores`` gives them (each token's contribution
        computed by the same formula, added per slot in query order), computed for
        these rows only; ``sums``, when given, are the scope's sums of the tokens before
        ``terms``. Each token's postings are looked up for the scope's rows, or the
        scope's rows for its postings, whichever are fewer, by binary search."""
        if sums is None:
            sums = np.zeros(scope.size, dtype=np.float64)
        for term in terms:
            term_id = self._terms.get(term)
            if term_id is None:
                continue
            parts = [segment.postings(term_id) for segment in self._segments]
            held = self._live_count(term, parts)
            if not held:
                continue
            at_parts, tf_parts = [], []
            for slots, tfs in parts:
                if not slots.size:
                    continue
                # The scope's slots in the postings' dtype: a search between arrays of
                # different dtypes would convert a whole (mapped) postings array.
                wanted = scope.astype(slots.dtype, copy=False)
                if slots.size <= wanted.size:
                    found = np.minimum(np.searchsorted(wanted, slots), wanted.size - 1)
                    hit = wanted[found] == slots
                    at_parts.append(found[hit])
                    tf_parts.append(tfs[hit])
                else:
                    found = np.minimum(np.searchsorted(slots, wanted), slots.size - 1)
                    hit = slots[found] == wanted
                    at_parts.append(np.flatnonzero(hit))
                    tf_parts.append(tfs[found[hit]])
            at = np.concatenate(at_parts) if at_parts else np.zeros(0, dtype=np.int64)
            if at.size:
                # A token holds each slot once, so this adds one contribution per slot.
                sums[at] += self._bm25(scope[at], np.concatenate(tf_parts), held)
        # Every contribution is > 0 (idf >= IDF_FLOOR, tf >= 1): matched <=> > 0.
        keep = sums > 0
        return scope[keep], sums[keep]

    def _live_count(self, term: str, parts: Sequence[tuple[np.ndarray, np.ndarray]]) -> int:
        """The live rows holding ``term`` (its N's n(t)), given its postings in each
        segment; counted once per term while some rows are dead."""
        if not self._dead:
            return sum(slots.size for slots, _ in parts)
        found = self._live_counts.get(term)
        if found is None:
            found = 0
            for slots, _ in parts:
                dead = self._dead_at(slots)
                found += slots.size - (0 if dead is None else dead.size)
            self._live_counts[term] = found
        return found

    def search(
        self,
        terms: Sequence[str],
        scope_tokens: Sequence[str],
        limit: int,
        allowed_rowids: np.ndarray | Callable[[], np.ndarray | None] | None = None,
        allowed_key: Hashable | None = None,
    ) -> list[tuple[int, float]]:
        """The ``limit`` best ``(rowid, score)`` pairs, best first (ties: lower rowid).

        ``terms`` are the FTS5 tokens of the query terms, in query order (FTS5 scores
        each term as its own phrase: a token given twice counts twice);
        ``scope_tokens`` are the scope column's tokens a row must hold;
        ``allowed_rowids`` narrows further (filters): the rowids, or a function
        returning them (None: no restriction), called only when needed. With
        ``allowed_key``, a name for that set of rows while the index does not change,
        the set is matched to the index's rows once and remembered.

        A scope holding few of the rows (at most 1/``SCOPED_SHARE``) is scored over its
        own rows only. In a larger one, each token sequence's scores, and its matched
        rows in each scope, are remembered until the index changes: a search for tokens
        already searched, or for more tokens after them, reads the matches instead of
        scoring every row again. Both give the same scores, bit for bit.
        """
        if self.documents == 0 or limit <= 0:
            return []
        scope = tuple(scope_tokens)
        small = self._small_scope(scope)
        if small is not None:
            matched = self._scoped_search(tuple(terms), scope, small)
        else:
            matched = self._store_search(terms, scope)
        candidates, values = matched
        if allowed_rowids is not None and candidates.size:
            keep = self._allowed(candidates, allowed_rowids, allowed_key)
            if keep is not None:
                candidates, values = candidates[keep], values[keep]
        if candidates.size == 0:
            return []
        if candidates.size > limit:
            # Keep every candidate tied with the limit-th score, then order them all.
            threshold = np.partition(values, candidates.size - limit)[candidates.size - limit]
            keep = values >= threshold
            candidates, values = candidates[keep], values[keep]
        order = np.lexsort((self._rowids[candidates], -values))[:limit]
        return [(int(self._rowids[candidates[i]]), float(values[i])) for i in order]

    def rank_rows(
        self, terms: Sequence[str], rowids: Sequence[int] | np.ndarray, limit: int
    ) -> list[tuple[int, float]]:
        """``search`` among the live rows of ``rowids`` only (the caller has checked
        their scope): the same scores, computed for those rows alone, so the cost
        follows how many rows are given, not how many hold the terms."""
        if self.documents == 0 or limit <= 0:
            return []
        indexed = self._rowids[: self._size]
        wanted = np.unique(np.asarray(rowids, dtype=np.int64))
        # Rowids are appended in ascending order, so a slot is found by binary search.
        at = np.minimum(np.searchsorted(indexed, wanted), max(self._size - 1, 0))
        slots = at[(indexed[at] == wanted) & self._live[at]] if self._size else at[:0]
        # The sums of the longest remembered start of ``terms`` (the question's own
        # tokens, when feedback tokens follow them), then the rest added in order: the
        # same floating-point numbers as from scratch (``_scores``).
        key, start, sums = tuple(terms), 0, None
        for known, scored in self._scored.items():
            if start < len(known) <= len(key) and key[: len(known)] == known:
                start, sums = len(known), scored.at(slots)
        candidates, values = self._scoped_matches(key[start:], slots, sums)
        order = np.lexsort((self._rowids[candidates], -values))[:limit]
        return [(int(self._rowids[candidates[i]]), float(values[i])) for i in order]

    def _scoped_search(
        self, terms: tuple[str, ...], scope: tuple[str, ...], slots: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray]:
        """The matched slots of a small scope (``slots``) and their scores, remembered
        per term sequence and scope until the index changes."""
        key = (terms, scope)
        found = self._scoped.get(key)
        if found is None:
            found = self._scoped[key] = self._scoped_matches(terms, slots)
            if len(self._scoped) > SCOPE_CACHE:
                self._scoped.popitem(last=False)
        else:
            self._scoped.move_to_end(key)
        return found

    def _store_search(
        self, terms: Sequence[str], scope: tuple[str, ...]
    ) -> tuple[np.ndarray, np.ndarray]:
        """The matched slots of a large scope and their scores: every matched row's
        score (``_scores``), masked by the scope."""
        scored = self._scores(terms)
        matched = scored.matched.get(scope)
        if matched is None:
            # Every term's contribution is > 0 (idf >= IDF_FLOOR, tf >= 1): matched <=> > 0.
            if scored.scores is not None:
                slots = np.flatnonzero((scored.scores > 0) & self.in_scope(scope))
                matched = (slots, scored.scores[slots])
            else:
                assert scored.slots is not None and scored.values is not None
                keep = (scored.values > 0) & self.in_scope(scope)[scored.slots]
                matched = (scored.slots[keep], scored.values[keep])
            scored.matched[scope] = matched
        return matched


def _member(values: np.ndarray, sorted_values: np.ndarray) -> np.ndarray:
    """Which of ``values`` ``sorted_values`` (ascending) holds, as a boolean array."""
    if not sorted_values.size:
        return np.zeros(values.size, dtype=bool)
    values = values.astype(sorted_values.dtype, copy=False)
    at = np.minimum(np.searchsorted(sorted_values, values), sorted_values.size - 1)
    found: np.ndarray = sorted_values[at] == values
    return found


def _ascending(values: np.ndarray) -> bool:
    return bool(np.all(values[1:] >= values[:-1]))


def _run_lengths(values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Distinct values of a sorted array and how often each occurs."""
    if values.size == 0:
        return values, np.zeros(0, dtype=np.int64)
    starts = np.flatnonzero(np.concatenate(([True], values[1:] != values[:-1])))
    return values[starts], np.diff(np.append(starts, values.size))
