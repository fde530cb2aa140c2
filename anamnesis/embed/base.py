"""The Embedder protocol every dense model implements."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol, runtime_checkable

import numpy as np


@runtime_checkable
class Embedder(Protocol):
    """Turns text into L2-normalised float32 vectors.

    ``name`` identifies the model and its settings; it is recorded in the store, and a
    store refuses to open with an embedder of another name or dimension.
    """

    name: str
    dim: int

    def embed_documents(self, texts: Sequence[str]) -> np.ndarray:
        """Vectors for stored text, shape ``(len(texts), dim)``."""
        ...

    def embed_query(self, text: str) -> np.ndarray:
        """The vector for one search query, shape ``(dim,)``."""
        ...


def normalise(vectors: np.ndarray) -> np.ndarray:
    """Row-wise L2 normalisation, leaving all-zero rows at zero."""
    vectors = np.asarray(vectors, dtype=np.float32)
    norms = np.linalg.norm(vectors, axis=1, keepdims=True)
    norms[norms == 0] = 1.0
    return vectors / norms
