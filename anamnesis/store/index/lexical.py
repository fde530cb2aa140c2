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

import math
import sqlite3
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass

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


def _merged(segments: Sequence[_Segment]) -> _Segment:
    term_ids = np.concatenate([s.term_ids for s in segments])
    order = np.argsort(term_ids, kind="stable")
    return _Segment(
        term_ids[order],
        np.concatenate([s.slots for s in segments])[order],
        np.concatenate([s.tfs for s in segments])[order],
    )


class LexicalIndex:
    """Postings of an FTS5 table in memory, with FTS5's BM25 ranking.

    Rows occupy slots in the order they were added; a removed row's slot is marked
    dead, and a changed row is removed and added again. ``documents`` and ``tokens``
    (N and the total of len(d)) count live rows only, as FTS5 counts its rows.
    """

    def __init__(self) -> None:
        self._term_ids: dict[str, int] = {}
        self._segments: list[_Segment] = []
        self._rowids = np.zeros(0, dtype=np.int64)
        self._lengths = np.zeros(0, dtype=np.float64)
        self._live = np.zeros(0, dtype=bool)
        self._size = 0
        self._scope_masks: dict[tuple[str, ...], np.ndarray] = {}
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
        self._scope_masks.clear()
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
            (self._term_ids.setdefault(k, len(self._term_ids)) for k in postings.keys),
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
        self._segments.append(
            _Segment(
                term_ids.astype(np.int32), posting_slots.astype(np.int32), tf.astype(np.float32)
            )
        )
        if len(self._segments) > MAX_SEGMENTS:
            self._segments = [self._segments[0], _merged(self._segments[1:])]
            if len(self._segments[1].slots) > len(self._segments[0].slots) // 4:
                self._segments = [_merged(self._segments)]

    def remove(self, rowids: Sequence[int] | np.ndarray) -> None:
        """Forget rows (deleted, or about to be re-added with new content)."""
        if not len(rowids) or not self._size:
            return
        hit = self._live[: self._size] & np.isin(
            self._rowids[: self._size], np.asarray(rowids, dtype=np.int64)
        )
        self._live[: self._size][hit] = False
        self._scope_masks.clear()
        self.documents -= int(hit.sum())
        self.tokens -= int(self._lengths[: self._size][hit].sum())

    def _postings(self, key: str) -> tuple[np.ndarray, np.ndarray]:
        """Live slots and term frequencies of ``key`` across all segments."""
        term_id = self._term_ids.get(key)
        if term_id is None:
            return np.zeros(0, dtype=np.int32), np.zeros(0, dtype=np.float32)
        parts = [segment.postings(term_id) for segment in self._segments]
        slots = np.concatenate([p[0] for p in parts])
        tfs = np.concatenate([p[1] for p in parts])
        live = self._live[slots]
        return slots[live], tfs[live]

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

    def search(
        self,
        terms: Mapping[str, int],
        scope_tokens: Sequence[str],
        limit: int,
        allowed_rowids: np.ndarray | None = None,
        exhaustive: bool = False,
    ) -> list[tuple[int, float]]:
        """The ``limit`` best ``(rowid, score)`` pairs, best first (ties: lower rowid).

        ``terms`` maps each FTS5 token of the query to how many query terms yield it
        (FTS5 scores each term as its own phrase); ``scope_tokens`` are the scope
        column's tokens a row must hold; ``allowed_rowids`` narrows further (filters).

        Rows are found MaxScore-style (Turtle and Flood, 1995): terms are read in order
        of the most they can add to a score, and once the ``limit``-th best score found
        so far beats what all unread terms together could add, a row matching only
        those cannot reach the top, so their postings are only looked up for the rows
        already found, not read whole. Every row kept is then scored over all terms in
        query order, as ``exhaustive`` (every match read) does: the same sums, so the
        same ranking.
        """
        if self.documents == 0 or limit <= 0:
            return []
        mean_length = self.tokens / self.documents
        scope = self.in_scope(scope_tokens)
        readers = []
        for term, multiplicity in terms.items():
            reader = self._reader(term, multiplicity)
            if reader is not None:
                readers.append(reader)
        if not readers:
            return []

        def admitted(slots: np.ndarray) -> np.ndarray:
            """Which of ``slots`` are in scope (and allowed by the filters)."""
            keep = scope[slots]
            if allowed_rowids is not None:
                keep &= np.isin(self._rowids[slots], allowed_rowids)
            return keep

        # Read terms by bound, highest first, until the unread ones cannot matter. The
        # check costs a pass over what was read, so it runs only where it can succeed
        # (the read terms' bounds exceed the unread ones') and at most a few times.
        by_bound = sorted(readers, key=lambda r: -r.bound)
        unread_bound = [sum(r.bound for r in by_bound[i:]) for i in range(len(by_bound))]
        read: dict[int, tuple[np.ndarray, np.ndarray]] = {}
        read_bound, checks = 0.0, 0
        for i, reader in enumerate(by_bound):
            if i and not exhaustive and checks < _MAX_CHECKS and unread_bound[i] < read_bound:
                checks += 1
                if unread_bound[i] < _kth_best(self._summed(read.values(), admitted), limit):
                    break
            slots = reader.live_slots(self._live)
            tf = reader.live_tfs(self._live)
            read[id(reader)] = (
                slots,
                reader.contribution(tf, self._lengths[slots], mean_length),
            )
            read_bound += reader.bound
        candidates = _distinct(np.concatenate([slots for slots, _ in read.values()]))
        candidates = candidates[admitted(candidates)]
        if candidates.size == 0:
            return []
        # Score every candidate over all terms in query order (bincount adds in input
        # order, so each row's sum is the one exhaustive scoring computes).
        positions, contributions = [], []
        for reader in readers:
            if id(reader) in read:
                slots, contribution = read[id(reader)]
                at = np.minimum(np.searchsorted(candidates, slots), candidates.size - 1)
                hit = candidates[at] == slots
                positions.append(at[hit])
                contributions.append(contribution[hit])
            else:
                slots, tf = reader.lookup(candidates, self._live)
                positions.append(np.searchsorted(candidates, slots))
                contributions.append(reader.contribution(tf, self._lengths[slots], mean_length))
        values = np.bincount(
            np.concatenate(positions), np.concatenate(contributions), minlength=candidates.size
        )
        if candidates.size > limit:
            # Keep every candidate tied with the limit-th score, then order them all.
            threshold = np.partition(values, candidates.size - limit)[candidates.size - limit]
            keep = values >= threshold
            candidates, values = candidates[keep], values[keep]
        order = np.lexsort((self._rowids[candidates], -values))[:limit]
        return [(int(self._rowids[candidates[i]]), float(values[i])) for i in order]

    def _reader(self, term: str, multiplicity: int) -> _TermReader | None:
        """A reader of ``term``'s postings, or None when no live row holds it."""
        term_id = self._term_ids.get(term)
        if term_id is None:
            return None
        parts = [segment.postings(term_id) for segment in self._segments]
        n = sum(int(np.count_nonzero(self._live[slots])) for slots, _ in parts)
        if n == 0:
            return None
        idf = max(math.log((self.documents - n + 0.5) / (n + 0.5)), IDF_FLOOR)
        return _TermReader(parts, idf, multiplicity)

    @staticmethod
    def _summed(
        read: Iterable[tuple[np.ndarray, np.ndarray]],
        admitted: Callable[[np.ndarray], np.ndarray],
    ) -> np.ndarray:
        """Partial scores (over the terms ``read``: slots, contributions) of the
        admitted rows they match."""
        parts = list(read)
        slots = np.concatenate([p[0] for p in parts])
        matched, inverse = np.unique(slots, return_inverse=True)
        summed = np.bincount(inverse, np.concatenate([p[1] for p in parts]), minlength=matched.size)
        return summed[admitted(matched)]


@dataclass(slots=True, eq=False)
class _TermReader:
    """One query term's postings (per segment, slots ascending) and its BM25 weights."""

    parts: list[tuple[np.ndarray, np.ndarray]]
    idf: float
    multiplicity: int

    @property
    def bound(self) -> float:
        """The most this term can add to a row's score (tf / (tf + norm) < 1)."""
        return self.multiplicity * self.idf * (BM25_K1 + 1)

    def live_slots(self, live: np.ndarray) -> np.ndarray:
        """Every live row slot holding the term (reads all its postings)."""
        slots = np.concatenate([p[0] for p in self.parts])
        return slots[live[slots]]

    def live_tfs(self, live: np.ndarray) -> np.ndarray:
        """The term frequencies in the same order as ``live_slots``."""
        slots = np.concatenate([p[0] for p in self.parts])
        return np.concatenate([p[1] for p in self.parts])[live[slots]]

    def lookup(self, candidates: np.ndarray, live: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Live ``(slots, tf)`` of this term among ``candidates`` (ascending), found by
        binary search in each segment rather than by reading every posting."""
        slots_parts, tf_parts = [], []
        for slots, tf in self.parts:
            at = np.searchsorted(slots, candidates)
            inside = at < slots.size
            at = at[inside][slots[at[inside]] == candidates[inside]]
            keep = live[slots[at]]
            slots_parts.append(slots[at][keep])
            tf_parts.append(tf[at][keep])
        return np.concatenate(slots_parts), np.concatenate(tf_parts)

    def contribution(self, tf: np.ndarray, lengths: np.ndarray, mean_length: float) -> np.ndarray:
        """Each posting's share of the score, as FTS5's bm25() computes it."""
        tf = tf.astype(np.float64)
        norm = BM25_K1 * (1 - BM25_B + BM25_B * lengths / mean_length)
        return self.multiplicity * (self.idf * (tf * (BM25_K1 + 1)) / (tf + norm))


#: Pruning checks per search (each is a pass over the postings read so far).
_MAX_CHECKS = 3
#: Relative margin taken off a partial k-th score before it prunes: partial sums add
#: in another order than final ones, so they may differ in the last bits.
_ROUNDING_MARGIN = 1e-9


def _kth_best(scores: np.ndarray, k: int) -> float:
    """The ``k``-th highest of ``scores``, less the rounding margin (a lower bound on
    the final ``k``-th score); minus infinity when there are fewer."""
    if scores.size < k:
        return -math.inf
    return float(np.partition(scores, scores.size - k)[scores.size - k]) * (1 - _ROUNDING_MARGIN)


def _distinct(values: np.ndarray) -> np.ndarray:
    """The distinct values, ascending (by sorting: numpy's hashing ``unique`` is slower
    on these arrays)."""
    ordered = np.sort(values)
    return ordered[np.concatenate(([True], ordered[1:] != ordered[:-1]))]


def _ascending(values: np.ndarray) -> bool:
    return bool(np.all(values[1:] >= values[:-1]))


def _run_lengths(values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Distinct values of a sorted array and how often each occurs."""
    if values.size == 0:
        return values, np.zeros(0, dtype=np.int64)
    starts = np.flatnonzero(np.concatenate(([True], values[1:] != values[:-1])))
    return values[starts], np.diff(np.append(starts, values.size))
