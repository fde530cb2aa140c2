"""The "edge" embedder: WordLlama static token embeddings, ~30k sentences/s on a CPU."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np

from ..errors import EmbedderUnavailableError
from .base import normalise


class WordLlamaEmbedder:
    """WordLlama (static, 256-d by default): much faster than MiniLM and less accurate."""

    dim: int

    def __init__(self, *, dim: int = 256):
        try:
            import wordllama
            from wordllama import WordLlama
        except ImportError as exc:
            raise EmbedderUnavailableError(
                "the edge embedder needs wordllama: pip install 'anamnesis[edge]'"
            ) from exc
        package_dir = Path(wordllama.__file__).parent
        self._model = WordLlama.load(dim=dim, cache_dir=package_dir, disable_download=True)
        self.dim = dim
        self.name = f"wordllama-l2-supercat-{dim}"

    def embed_documents(self, texts: Sequence[str]) -> np.ndarray:
        """Embed many texts."""
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        return normalise(self._model.embed(list(texts), norm=False))

    def embed_query(self, text: str) -> np.ndarray:
        """Embed one query."""
        return self.embed_documents([text])[0]
