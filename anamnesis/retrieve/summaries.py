"""The ``summaries`` channel: episodes behind the session summaries and profiles that
match the question.

Derived items (``anamnesis.consolidate``) are matched by their text: cosine between
the question and each item's vector, and BM25 over the items' words, both in numpy
over an index of the scope's items that is kept between searches until a derived item
is written or deleted (``item_index``: a long-lived scope holds one summary per
session, thousands of them), fused by reciprocal rank. The best ``TOP_ITEMS`` items
then propose their provenance episodes that are in scope and pass the filters, each
scored by the mean of its item's cosine and its own cosine to the question. An item
proposes at most ``ITEM_EPISODES`` of its episodes, the closest to the question
(``Store.derived_nearest``: a profile cites every turn behind its facts, which the
SQLite store scores off its dense index). In the default pipeline;
``consolidate`` builds the items, and until it has the channel proposes nothing.
The constants are first guesses, not tuned (docs/experiments/2026-11-25-summaries-and-profiles.md).
"""

from __future__ import annotations

import math
import threading
from collections import Counter, OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..store.base import Candidate, Store
from ..store.index.dense import scan_cosines
from ..store.shared.derived import DERIVED_EPOCH
from ..types import Scope
from .query import words
from .request import SearchRequest
from .resources import StageResources

#: Items (summaries and profiles together) whose episodes are proposed.
TOP_ITEMS = 4
#: An item's episodes proposed, the closest to the question first: a profile's facts
#: and an abstractive summary's turns can be many (an extractive summary keeps at most
#: ``consolidate.salience.MAX_LINES`` sentences, fewer than this: the cap never cuts one).
ITEM_EPISODES = 8
#: RRF constant fusing the dense and BM25 rankings of the items.
ITEM_RRF_K = 10.0
#: BM25 parameters (the usual Okapi defaults, as FTS5's).
BM25_K1, BM25_B = 1.2, 0.75


def _stem(word: str) -> str:
    base = word.split("'")[0]
    return base[:-1] if len(base) > 3 and base.endswith("s") else base


def _terms_of(text: str) -> tuple[Counter[str], int]:
    """A text's stemmed word counts and its length in words."""
    raw = Counter(words(text))  # stem each distinct word once, not each occurrence
    counts: Counter[str] = Counter()
    for word, n in raw.items():
        counts[_stem(word)] += n
    return counts, sum(raw.values())


@dataclass(frozen=True, slots=True)
class ItemIndex:
    """The derived items of one scope (and kind), ready to match: their ids, their
    vectors as one matrix, and their stemmed words as postings for BM25. Built once
    and kept between searches until the store's ``DERIVED_EPOCH`` changes.

    The words are held twice, as numbers into ``vocabulary``: by item (``item_terms``
    from ``item_offsets[i]`` to ``item_offsets[i + 1]``, with ``item_counts``), which a
    rebuild reuses for every item whose text has not changed, and by term
    (``term_rows`` and ``term_counts`` from ``term_starts[t]`` to ``term_starts[t + 1]``,
    rows ascending), which BM25 reads. A rebuilt index keeps its predecessor's
    vocabulary, so a word no item holds any more keeps its number, with no postings."""

    ids: tuple[str, ...]
    texts: tuple[str, ...]
    matrix: np.ndarray
    lengths: np.ndarray
    vocabulary: dict[str, int]
    item_offsets: np.ndarray
    item_terms: np.ndarray
    item_counts: np.ndarray
    term_starts: np.ndarray
    term_rows: np.ndarray
    term_counts: np.ndarray

    @classmethod
    def build(
        cls, rows: Sequence[tuple[str, str, np.ndarray]], previous: ItemIndex | None = None
    ) -> ItemIndex:
        """The index of ``(id, text, vector)`` rows, in their order; the words of a text
        ``previous`` (an older index of the same scope) holds are taken from it rather
        than read again: it matches the same with or without ``previous``."""
        vocabulary = dict(previous.vocabulary) if previous is not None else {}
        known = {text: i for i, text in enumerate(previous.texts)} if previous else {}
        lengths = np.zeros(len(rows))
        terms: list[np.ndarray] = []
        counts: list[np.ndarray] = []
        for i, (_, text, _) in enumerate(rows):
            at = known.get(text)
            if previous is not None and at is not None:
                start, stop = previous.item_offsets[at], previous.item_offsets[at + 1]
                terms.append(previous.item_terms[start:stop])
                counts.append(previous.item_counts[start:stop])
                lengths[i] = previous.lengths[at]
                continue
            words_of, lengths[i] = _terms_of(text)
            ids_of = [vocabulary.setdefault(term, len(vocabulary)) for term in words_of]
            terms.append(np.array(ids_of, dtype=np.int64))
            counts.append(np.array(list(words_of.values()), dtype=np.float64))
        sizes = np.array([len(t) for t in terms], dtype=np.int64)
        item_offsets = np.concatenate(([0], np.cumsum(sizes))).astype(np.int64)
        item_terms = np.concatenate(terms) if terms else np.zeros(0, np.int64)
        item_counts = np.concatenate(counts) if counts else np.zeros(0)
        # By term, each term's items ascending (a stable sort of the items' terms).
        by_term = np.argsort(item_terms, kind="stable")
        term_starts = np.zeros(len(vocabulary) + 1, dtype=np.int64)
        np.cumsum(np.bincount(item_terms, minlength=len(vocabulary)), out=term_starts[1:])
        dim = len(rows[0][2]) if rows else 0
        return cls(
            ids=tuple(item_id for item_id, _, _ in rows),
            texts=tuple(text for _, text, _ in rows),
            matrix=np.stack([v for _, _, v in rows]) if rows else np.zeros((0, dim), np.float32),
            lengths=lengths,
            vocabulary=vocabulary,
            item_offsets=item_offsets,
            item_terms=item_terms,
            item_counts=item_counts,
            term_starts=term_starts,
            term_rows=np.repeat(np.arange(len(rows), dtype=np.int64), sizes)[by_term],
            term_counts=item_counts[by_term],
        )

    def postings(self, term: str) -> tuple[np.ndarray, np.ndarray]:
        """The items holding ``term`` (ascending) and how often each does."""
        at = self.vocabulary.get(term)
        if at is None:
            return self.term_rows[:0], self.term_counts[:0]
        start, stop = self.term_starts[at], self.term_starts[at + 1]
        return self.term_rows[start:stop], self.term_counts[start:stop]

    def bm25(self, terms: Sequence[str]) -> np.ndarray:
        """Okapi BM25 of each item for ``terms`` (light plural stemming on both sides)."""
        n = len(self.ids)
        scores = np.zeros(n)
        if n == 0:
            return scores
        average = float(self.lengths.sum()) / n or 1.0
        for term in dict.fromkeys(_stem(t) for t in terms):
            rows, tf = self.postings(term)
            if not rows.size:
                continue
            idf = math.log(1 + (n - len(rows) + 0.5) / (len(rows) + 0.5))
            norm = tf + BM25_K1 * (1 - BM25_B + BM25_B * self.lengths[rows] / average)
            scores[rows] += idf * tf * (BM25_K1 + 1) / norm
        return scores


#: Scopes (with kinds) whose item index a ``StageResources`` keeps.
KEPT_INDEXES = 16


class _KeptIndexes:
    """The item indexes of the last ``KEPT_INDEXES`` scopes searched, each with the
    ``DERIVED_EPOCH`` it was built at; one per scope, so a rebuilt index replaces the
    stale one at once (safe between threads)."""

    def __init__(self) -> None:
        self._indexes: OrderedDict[Any, tuple[str, ItemIndex]] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, key: Any, epoch: str) -> ItemIndex | None:
        with self._lock:
            kept = self._indexes.get(key)
            if kept is None or kept[0] != epoch:
                return None
            self._indexes.move_to_end(key)
            return kept[1]

    def older(self, key: Any) -> ItemIndex | None:
        """The index kept for ``key`` at whatever epoch (what a rebuild reuses)."""
        with self._lock:
            kept = self._indexes.get(key)
            return None if kept is None else kept[1]

    def keep(self, key: Any, epoch: str, index: ItemIndex) -> None:
        with self._lock:
            self._indexes[key] = (epoch, index)
            self._indexes.move_to_end(key)
            while len(self._indexes) > KEPT_INDEXES:
                self._indexes.popitem(last=False)


def item_index(
    store: Store,
    scope: Scope,
    kinds: Sequence[str] | None = None,
    resources: StageResources | None = None,
) -> ItemIndex:
    """The index of the scope's derived items (of ``kinds``, default every kind): from
    ``resources`` when it holds one built at the store's present ``DERIVED_EPOCH``
    (a new random token with every write or delete of derived items, by any process,
    so no two stores share one), else read now and kept there."""
    epoch = store.get_meta(DERIVED_EPOCH)  # read before the items: never newer than them
    if resources is None or epoch is None:
        return _read_index(store, scope, kinds)
    kept = resources.get(("summaries", "item indexes"), _KeptIndexes)
    key = (scope, None if kinds is None else tuple(kinds))
    index = kept.get(key, epoch)
    if index is None:
        index = _read_index(store, scope, kinds, kept.older(key))
        kept.keep(key, epoch, index)
    return index


def _read_index(
    store: Store, scope: Scope, kinds: Sequence[str] | None, previous: ItemIndex | None = None
) -> ItemIndex:
    """The index of the scope's derived items of ``kinds``, read from the store now (the
    words of texts ``previous`` holds taken from it: a consolidation rewrites few)."""
    one_kind = kinds[0] if kinds is not None and len(kinds) == 1 else None  # asked in SQL
    return ItemIndex.build(
        [
            (item_id, text, v)
            for item_id, kind, text, v in store.derived_texts(scope, one_kind)
            if kinds is None or kind in kinds
        ],
        previous,
    )


def matching_items(
    store: Store,
    scope: Scope,
    terms: Sequence[str],
    vector: np.ndarray,
    kinds: Sequence[str] | None = None,
    resources: StageResources | None = None,
    limit: int | None = None,
) -> list[tuple[str, float]]:
    """The ids of the scope's derived items (of ``kinds``, default every kind), best
    match first, each with its cosine to ``vector``: the ``limit`` best (default all).

    With a ``limit``, only the items near the top of either ranking are fused
    (``_fused_top``), so that a scope of many sessions is not sorted whole on every
    search; the order is the same as the whole ranking's."""
    index = item_index(store, scope, kinds, resources)
    if not index.ids:
        return []
    # On this thread, as the dense index scans: BLAS's helper threads stall when the CPUs
    # are busy.
    cosines = scan_cosines(index.matrix, np.asarray(vector, dtype=np.float32))
    lexical = index.bm25(terms)
    order = _fused_top(cosines, lexical, limit) if limit is not None else None
    if order is None:
        order = _fused_order(cosines, lexical)[:limit]
    return list(zip([index.ids[i] for i in order.tolist()], cosines[order].tolist(), strict=True))


def _fused_order(cosines: np.ndarray, lexical: np.ndarray) -> np.ndarray:
    """Every item, best first by the reciprocal-rank fusion of the two rankings (each
    ranking and the fusion in item order on ties)."""
    fused = np.zeros(len(cosines))
    fused[np.argsort(-cosines, kind="stable")] = 1.0 / (ITEM_RRF_K + _ranks(len(cosines)))
    by_words = np.argsort(-lexical, kind="stable")
    matched = by_words[lexical[by_words] > 0]
    fused[matched] += 1.0 / (ITEM_RRF_K + _ranks(len(matched)))
    return np.argsort(-fused, kind="stable")


#: How deep each ranking is read when only the best few fused items are wanted.
FUSION_DEPTH = 64


def _fused_top(cosines: np.ndarray, lexical: np.ndarray, limit: int) -> np.ndarray | None:
    """The first ``limit`` items of ``_fused_order``, from the top ``FUSION_DEPTH`` of
    each ranking: an item below both scores at most the fusion of the two next ranks,
    so when the ``limit``-th item found scores above that, no item left out can come
    before it. None when it does not (the caller fuses every item)."""
    n = len(cosines)
    if n <= 2 * FUSION_DEPTH or not np.isfinite(cosines).all():
        return None  # few items, or a NaN the partial sorts would place differently
    matched = np.flatnonzero(lexical > 0)
    by_cosine = _best(cosines, np.arange(n), FUSION_DEPTH)
    by_words = _best(lexical, matched, FUSION_DEPTH)
    found = np.union1d(by_cosine, by_words)
    fused = 1.0 / (ITEM_RRF_K + _ranks_in(cosines, np.arange(n), by_cosine, found))
    words = np.isin(found, matched, assume_unique=True)
    fused[words] += 1.0 / (ITEM_RRF_K + _ranks_in(lexical, matched, by_words, found[words]))
    order = np.lexsort((found, -fused))[:limit]
    bound = 1.0 / (ITEM_RRF_K + len(by_cosine) + 1)
    if len(by_words) < len(matched):
        bound += 1.0 / (ITEM_RRF_K + len(by_words) + 1)
    if len(order) < limit or fused[order[-1]] <= bound:
        return None
    result: np.ndarray = found[order]
    return result


def _best(scores: np.ndarray, rows: np.ndarray, depth: int) -> np.ndarray:
    """``rows`` scoring at least the ``depth``-th best score among them (every row tied
    with it kept), best first, ties in row order."""
    if depth < rows.size:
        kth = np.partition(scores[rows], rows.size - depth)[rows.size - depth]
        rows = rows[scores[rows] >= kth]
    ordered: np.ndarray = rows[np.lexsort((rows, -scores[rows]))]
    return ordered


def _ranks_in(
    scores: np.ndarray, rows: np.ndarray, top: np.ndarray, asked: np.ndarray
) -> np.ndarray:
    """The rank (from 1, ties in row order) among ``rows`` of each of ``asked``, given
    ``top``, the best of ``rows`` in order (``_best``): read there, else counted."""
    at = {row: i + 1 for i, row in enumerate(top.tolist())}
    ranks = np.array([at.get(row, 0) for row in asked.tolist()], dtype=np.float64)
    missing = np.flatnonzero(ranks == 0)
    if missing.size:
        pool = scores[rows]
        ordered = np.sort(pool)
        wanted = scores[asked[missing]]
        above = len(pool) - np.searchsorted(ordered, wanted, side="right")
        tied = np.searchsorted(ordered, wanted, side="right") - np.searchsorted(
            ordered, wanted, side="left"
        )
        for i, row, score, ahead, ties in zip(
            missing.tolist(), asked[missing].tolist(), wanted, above, tied, strict=True
        ):
            if ties > 1:  # rows tied with it count when they come first
                ahead += np.count_nonzero((pool == score) & (rows < row))
            ranks[i] = 1 + ahead
    return ranks


def _ranks(n: int) -> np.ndarray:
    """1, 2, ..., n as floats."""
    return np.arange(1, n + 1, dtype=np.float64)


def summaries(request: SearchRequest, limit: int) -> list[Candidate]:
    """Episodes behind the best-matching summaries and profiles (module docstring).

    ``stage_options["summaries"]["kinds"]`` limits it to some kinds of item (for
    example ``("summary",)``: the sessions' summaries without the profiles)."""
    kinds = request.options("summaries").get("kinds")
    ranked = matching_items(
        request.store,
        request.scope,
        request.analysis.terms,
        request.query_vector,
        kinds,
        request.resources,
        TOP_ITEMS,
    )
    if not ranked:
        return []
    nearest = request.store.derived_nearest(
        [item_id for item_id, _ in ranked],
        request.query_vector,
        request.scope,
        request.filters,
        ITEM_EPISODES,
    )
    best: dict[str, float] = {}
    for item_id, item_cosine in ranked:
        for episode_id, cosine in nearest.get(item_id, []):
            score = 0.5 * item_cosine + 0.5 * cosine
            if score > best.get(episode_id, -math.inf):
                best[episode_id] = score
    ordered = sorted(best.items(), key=lambda pair: -pair[1])
    return [Candidate(episode_id, score) for episode_id, score in ordered[:limit]]
