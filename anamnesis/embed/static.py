"""The "edge" embedder: WordLlama static token embeddings, far faster than a transformer.

WordLlama's vector for a text is the mean of its tokens' rows in one embedding table.
This module reads the table and the tokenizer straight from the files the ``wordllama``
package ships, without importing the package: its import configures the root logger,
and its padded batches spend most of their time on padding. Here each batch is
tokenised unpadded and each text pooled on its own: the vectors equal WordLlama's own,
several times faster (study "Per dataset", "Figures from the code's comments").
"""

from __future__ import annotations

import importlib.util
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from ..errors import EmbedderUnavailableError
from .base import normalise

#: The WordLlama configuration whose files this module reads.
CONFIG = "l2_supercat"


def _package_dir() -> Path:
    """Where ``wordllama`` is installed, found without running its ``__init__``."""
    spec = importlib.util.find_spec("wordllama")
    if spec is None or not spec.submodule_search_locations:
        raise EmbedderUnavailableError(
            "the edge embedder needs the wordllama package (a dependency of anamnesis): "
            "pip install wordllama==0.4.0.post1"
        )
    return Path(next(iter(spec.submodule_search_locations)))


class WordLlamaEmbedder:
    """WordLlama (static, 256-d by default): much faster than MiniLM and less accurate."""

    dim: int

    def __init__(self, *, dim: int = 256):
        from safetensors.numpy import load_file
        from tokenizers import Tokenizer

        package = _package_dir()
        weights = package / "weights" / f"{CONFIG}_{dim}.safetensors"
        tokenizer = package / "tokenizers" / f"{CONFIG}_tokenizer_config.json"
        for path in (weights, tokenizer):
            if not path.is_file():
                raise EmbedderUnavailableError(f"wordllama is installed without {path}")
        self._table = np.ascontiguousarray(
            load_file(str(weights))["embedding.weight"], dtype=np.float32
        )
        norms = np.linalg.norm(self._table, axis=1)
        self._inverse_norms = np.where(norms > 0, 1.0 / np.maximum(norms, 1e-12), 0.0).astype(
            np.float32
        )
        self._tokenizer = Tokenizer.from_file(str(tokenizer))
        self._tokenizer.no_padding()
        self._tokenizer.no_truncation()
        self.dim = dim
        self.name = f"wordllama-l2-supercat-{dim}"

    def token_ids(self, texts: Sequence[str]) -> list[np.ndarray]:
        """Each text's token ids (rows of the embedding table), unpadded."""
        if not texts:
            return []
        # The same ids as ``encode_batch``, faster: it computes no character offsets.
        encoded = self._tokenizer.encode_batch_fast(list(texts), add_special_tokens=False)
        last = len(self._table) - 1
        return [np.minimum(np.asarray(e.ids, dtype=np.intp), last) for e in encoded]

    def pooled(self, token_ids: Sequence[np.ndarray]) -> np.ndarray:
        """The unit-length mean of each text's token rows (the zero vector for a text
        with no tokens): the texts' embeddings."""
        out = np.zeros((len(token_ids), self.dim), dtype=np.float32)
        if not token_ids:
            return out
        # Gather each text's rows into one reused buffer: a fresh array per text costs
        # more in page faults than the sums themselves.
        buffer = np.empty((max(len(ids) for ids in token_ids), self.dim), dtype=np.float32)
        for row, ids in enumerate(token_ids):
            if len(ids):
                rows = np.take(self._table, ids, axis=0, out=buffer[: len(ids)])
                out[row] = rows.sum(axis=0) / len(ids)
        return normalise(out)

    def token_vectors(self, token_ids: np.ndarray) -> np.ndarray:
        """The unit-length table rows of ``token_ids``: one token's sense, for comparing
        words with words."""
        return self._table[token_ids] * self._inverse_norms[token_ids, None]

    def embed_documents(self, texts: Sequence[str]) -> np.ndarray:
        """Embed many texts (a text with no tokens gets the zero vector)."""
        return self.pooled(self.token_ids(texts))

    def embed_query(self, text: str) -> np.ndarray:
        """Embed one query."""
        return self.embed_documents([text])[0]
