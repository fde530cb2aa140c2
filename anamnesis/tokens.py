"""Counting tokens the way context budgets are measured.

Token counts use the MiniLM WordPiece vocabulary bundled with Anamnesis
(bert-base-uncased, no special tokens, no truncation). It is offline and
deterministic, and on English chat close enough to GPT-style BPE counts for a context
budget (docs/measuring.md).
"""

from __future__ import annotations

from collections.abc import Sequence
from itertools import islice
from pathlib import Path

_VOCAB = Path(__file__).resolve().parent / "data" / "bert-base-uncased-vocab.txt"

#: What reports say about how tokens were counted.
TOKENIZER_NAME = "bert-base-uncased WordPiece (MiniLM vocabulary), no special tokens"
#: Counts a ``TokenCounter`` keeps; the oldest are forgotten beyond this, so a
#: long-lived ``Memory`` answering ``context`` calls does not grow without bound.
CACHE_SIZE = 100_000


class TokenCounter:
    """Counts WordPiece tokens, caching by text (the latest ``CACHE_SIZE`` texts)."""

    def __init__(self) -> None:
        from tokenizers import BertWordPieceTokenizer

        self._tokenizer = BertWordPieceTokenizer(str(_VOCAB), lowercase=True)
        self._cache: dict[str, int] = {}

    def count(self, texts: Sequence[str]) -> list[int]:
        """Token counts of ``texts``, in order."""
        todo = list(dict.fromkeys(t for t in texts if t not in self._cache))
        if todo:
            encodings = self._tokenizer.encode_batch(todo, add_special_tokens=False)
            self._cache.update(zip(todo, (len(e.ids) for e in encodings), strict=True))
        counts = [self._cache[t] for t in texts]
        for stale in list(islice(self._cache, max(0, len(self._cache) - CACHE_SIZE))):
            del self._cache[stale]
        return counts

    def count_once(self, text: str) -> int:
        """Token count of a text that will not come again (a rendered context): not
        cached, so it does not push out the counts that are reused."""
        return len(self._tokenizer.encode(text, add_special_tokens=False).ids)

    def clear(self) -> None:
        """Forget cached counts (between cases, to bound memory)."""
        self._cache.clear()
