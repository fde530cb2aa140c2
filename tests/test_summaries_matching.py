"""Matching a question against a scope's derived items: the best few items are found
without fusing and sorting every item of the scope (a long-lived scope holds one
summary per session), and they are exactly the first few of the whole ranking, ties
included."""

from __future__ import annotations

import numpy as np
import pytest

from anamnesis.retrieve import summaries
from anamnesis.retrieve.summaries import FUSION_DEPTH, matching_items
from anamnesis.types import Scope


class _Items:
    """A store holding only derived items: ``(id, kind, text, vector)`` rows."""

    def __init__(self, rows: list[tuple[str, str, str, np.ndarray]]) -> None:
        self.rows = rows

    def get_meta(self, key: str) -> None:
        return None

    def derived_texts(self, scope: Scope, kind: str | None = None) -> list:
        return self.rows


def _scores(rng: np.random.Generator, n: int) -> tuple[np.ndarray, np.ndarray]:
    """Cosines and BM25 scores of ``n`` items, rounded so that many tie, and with most
    items matching no word."""
    cosines = np.round(rng.standard_normal(n) * 4) / 4
    lexical = np.where(rng.random(n) < 0.2, np.round(rng.exponential(size=n) * 2) / 2, 0.0)
    return cosines.astype(np.float32), lexical


def test_the_best_few_items_are_the_first_of_the_whole_ranking_ties_included() -> None:
    rng = np.random.default_rng(7)
    checked = 0
    for _ in range(400):
        cosines, lexical = _scores(rng, int(rng.integers(2 * FUSION_DEPTH + 1, 2000)))
        for limit in (1, 4, 9):
            top = summaries._fused_top(cosines, lexical, limit)
            if top is not None:  # None: the caller fuses every item
                checked += 1
                assert top.tolist() == summaries._fused_order(cosines, lexical)[:limit].tolist()
    assert checked > 1000


def test_an_item_without_a_number_for_a_cosine_ranks_as_in_the_whole_ranking() -> None:
    # A NaN cosine ranks last in the whole sort; counted against the others it would
    # rank first.
    cosines, _ = _scores(np.random.default_rng(5), 500)
    cosines[3] = np.nan
    texts = {3: "dogs and many other words", 7: "dogs"}  # item 3 second by its words
    store = _Items(
        [(f"s{i}", "summary", texts.get(i, ""), np.array([c])) for i, c in enumerate(cosines)]
    )
    query = np.ones(1, np.float32)
    whole = matching_items(store, Scope("u"), ["dogs"], query)  # type: ignore[arg-type]
    best = matching_items(store, Scope("u"), ["dogs"], query, limit=4)  # type: ignore[arg-type]
    assert [i for i, _ in best] == [i for i, _ in whole[:4]]


def test_items_far_down_both_rankings_are_not_fused(monkeypatch: pytest.MonkeyPatch) -> None:
    rng = np.random.default_rng(3)
    n, dim = 5000, 8
    vectors = rng.standard_normal((n, dim)).astype(np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    texts = [f"session {i} talked about {'dogs' if i % 50 == 0 else 'weather'}" for i in range(n)]
    store = _Items([(f"sum_{i}", "summary", texts[i], vectors[i]) for i in range(n)])
    query = vectors[123]
    whole = matching_items(store, Scope("u"), ["dogs"], query)  # type: ignore[arg-type]
    assert len(whole) == n

    def every_item(*args: object) -> None:
        raise AssertionError("every item was fused to find the best four")

    monkeypatch.setattr(summaries, "_fused_order", every_item)
    best = matching_items(store, Scope("u"), ["dogs"], query, limit=4)  # type: ignore[arg-type]
    assert best == whole[:4]


_WORDS = "dog dogs cat cats hiking trip trips paris rome wine cooking class classes run".split()


def _texts(rng: np.random.Generator, n: int) -> list[str]:
    return [" ".join(rng.choice(_WORDS, size=int(rng.integers(0, 12)))) for _ in range(n)]


def test_an_index_rebuilt_from_an_older_one_matches_one_built_from_scratch() -> None:
    # After a consolidation the channel rebuilds its index of the scope's items, taking
    # the words of every unchanged text from the index it had: items rewritten, added,
    # dropped and moving place must match exactly as in an index read afresh.
    rng = np.random.default_rng(3)
    for _ in range(30):
        texts = _texts(rng, 40)
        vectors = rng.standard_normal((60, 4)).astype(np.float32)
        old = summaries.ItemIndex.build([(f"s{i}", t, vectors[i]) for i, t in enumerate(texts)])
        now = [(f"s{i}", t, vectors[i]) for i, t in enumerate(texts) if rng.random() > 0.2]
        now = [(i, _texts(rng, 1)[0] if rng.random() < 0.2 else t, v) for i, t, v in now]
        now += [(f"n{i}", t, vectors[40 + i]) for i, t in enumerate(_texts(rng, 20))]
        now = [now[i] for i in rng.permutation(len(now))]
        reused = summaries.ItemIndex.build(now, old)
        fresh = summaries.ItemIndex.build(now)
        assert (reused.ids, reused.texts) == (fresh.ids, fresh.texts)
        assert np.array_equal(reused.matrix, fresh.matrix)
        assert np.array_equal(reused.lengths, fresh.lengths)
        for word in {*reused.vocabulary, *fresh.vocabulary}:
            for mine, theirs in zip(reused.postings(word), fresh.postings(word), strict=True):
                assert mine.tolist() == theirs.tolist()
        for _ in range(5):
            terms = list(rng.choice(_WORDS, size=3))
            assert reused.bm25(terms).tolist() == fresh.bm25(terms).tolist()


def test_a_rebuilt_index_reads_the_words_of_changed_items_only(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from anamnesis.retrieve.resources import StageResources

    vectors = np.eye(4, dtype=np.float32)
    store = _Items([(f"s{i}", "summary", f"text {i}", vectors[i]) for i in range(3)])
    store.get_meta = lambda key: "epoch 1"  # type: ignore[method-assign]
    resources = StageResources()
    summaries.item_index(store, Scope("u"), None, resources)  # type: ignore[arg-type]
    read: list[str] = []
    terms_of = summaries._terms_of
    monkeypatch.setattr(summaries, "_terms_of", lambda text: read.append(text) or terms_of(text))
    store.rows = [store.rows[0], ("s1", "summary", "text 1 grew", vectors[1]), store.rows[2]]
    store.rows.append(("s3", "summary", "text 3", vectors[3]))
    store.get_meta = lambda key: "epoch 2"  # type: ignore[method-assign]
    index = summaries.item_index(store, Scope("u"), None, resources)  # type: ignore[arg-type]
    assert sorted(read) == ["text 1 grew", "text 3"]
    assert (
        index.bm25(["grew"]).tolist()
        == summaries.ItemIndex.build([(i, t, v) for i, _, t, v in store.rows])
        .bm25(["grew"])
        .tolist()
    )
