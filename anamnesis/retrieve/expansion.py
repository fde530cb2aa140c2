"""Pseudo-relevance feedback: expansion terms taken from the first lexical hits.

An RM3-style rule without a language model: the content terms of the top BM25 hits
are scored by the hits that contain them, each weighted by its rank (``1 / rank``,
standing in for RM3's query likelihood of the document); the best ``count`` new
terms are appended to the question's own terms.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Sequence

from .query import search_terms

#: Terms shorter than this never become expansion terms (``ok``, ``oh``, ``go``).
MIN_TERM_LENGTH = 3


def feedback_terms(
    query_terms: Sequence[str],
    feedback: Sequence[str],
    count: int,
    exclude: Iterable[str] = (),
) -> list[str]:
    """Up to ``count`` terms from ``feedback`` texts (best hit first) to add to a query.

    A term scores ``sum over hits containing it of 1/rank``. Stopwords, short words,
    numbers, query terms and ``exclude`` (e.g. speaker names) are skipped. Ties break
    alphabetically, so the result is deterministic.
    """
    if count <= 0 or not feedback:
        return []
    skip = set(query_terms) | set(exclude)
    weight: defaultdict[str, float] = defaultdict(float)
    for rank, text in enumerate(feedback, start=1):
        for term in set(search_terms(text)):
            if term in skip or len(term) < MIN_TERM_LENGTH or term.isdigit():
                continue
            weight[term] += 1.0 / rank
    return sorted(weight, key=lambda t: (-weight[t], t))[:count]
