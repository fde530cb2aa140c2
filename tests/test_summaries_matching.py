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
