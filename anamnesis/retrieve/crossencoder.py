"""A cross-encoder reranking stage, behind a small interface.

A cross-encoder reads the question and a candidate together and scores their
relevance. None ships on PyPI as a package, so the stage is off by default and runs a
model the user provides:

* an **ONNX** model directory holding ``model.onnx`` (or one ``*.onnx`` file) and a
  Hugging Face ``tokenizer.json`` (a BERT-style pair template), run with onnxruntime;
  inputs ``input_ids``, ``attention_mask`` and, if the graph has it, ``token_type_ids``;
  output ``[batch]``, ``[batch, 1]`` (a relevance logit) or ``[batch, 2]``
  (not-relevant / relevant logits);
* a **sentence-transformers** ``CrossEncoder`` directory (needs that package and its
  torch; not a dependency of Anamnesis).

Configure it with ``stage_options["cross-encoder"] = {"model": PATH}`` or the
``ANAMNESIS_CROSS_ENCODER`` environment variable; ``kind`` ("onnx",
"sentence-transformers") is inferred from the directory when not given. A missing or
unusable model raises ``CrossEncoderUnavailableError`` on the first search.

Cost: one model forward pass per candidate rescored (``top_n``, default 30), which
even for a small cross-encoder is well over the search budget: keep it off unless
recall matters more than latency (study "Post-fusion stages and context assembly").
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import numpy as np

from ..errors import AnamnesisError
from ..ingest.normalise import embedding_text
from .fusion import Fused
from .request import SearchRequest

#: Environment variable naming the cross-encoder model when the config names none.
CROSS_ENCODER_ENV = "ANAMNESIS_CROSS_ENCODER"
#: How many of the best fused candidates the cross-encoder rescores.
CROSS_ENCODER_TOP_N = 30
#: Tokens per (question, candidate) pair; longer pairs are truncated.
CROSS_ENCODER_MAX_TOKENS = 256
#: Pairs per forward pass.
CROSS_ENCODER_BATCH = 16


class CrossEncoderUnavailableError(AnamnesisError):
    """The configured cross-encoder cannot be loaded (path, files or package missing)."""


class CrossEncoder(Protocol):
    """Scores how well each text answers a query; higher is more relevant."""

    name: str

    def score(self, query: str, texts: Sequence[str]) -> np.ndarray:
        """One relevance score per text, as float32, in the order given."""
        ...


@dataclass
class OnnxCrossEncoder:
    """A cross-encoder exported to ONNX, with its ``tokenizer.json``."""

    directory: Path
    max_tokens: int = CROSS_ENCODER_MAX_TOKENS
    batch_size: int = CROSS_ENCODER_BATCH
    threads: int = 1

    def __post_init__(self) -> None:
        import onnxruntime as ort
        from onnxruntime.capi.onnxruntime_pybind11_state import (
            Fail,
            InvalidGraph,
            InvalidProtobuf,
            NoSuchFile,
        )
        from tokenizers import Tokenizer

        model = _onnx_file(self.directory)
        tokenizer_file = self.directory / "tokenizer.json"
        if not tokenizer_file.is_file():
            raise CrossEncoderUnavailableError(
                f"no tokenizer.json next to {model}: export the tokenizer with the model "
                "(tokenizer.save_pretrained(DIR) writes it)"
            )
        self.name = f"onnx:{self.directory.name}"
        self._tokenizer = Tokenizer.from_file(str(tokenizer_file))
        self._tokenizer.enable_truncation(self.max_tokens)
        self._tokenizer.no_padding()
        options = ort.SessionOptions()
        options.intra_op_num_threads = self.threads
        options.inter_op_num_threads = 1
        try:
            self._session = ort.InferenceSession(
                str(model), options, providers=["CPUExecutionProvider"]
            )
        except (Fail, InvalidGraph, InvalidProtobuf, NoSuchFile, RuntimeError) as exc:
            raise CrossEncoderUnavailableError(f"cannot load {model}: {exc}") from exc
        self._inputs = {i.name for i in self._session.get_inputs()}
        missing = {"input_ids", "attention_mask"} - self._inputs
        if missing:
            raise CrossEncoderUnavailableError(
                f"{model} lacks the inputs {sorted(missing)}; a BERT-style cross-encoder "
                "takes input_ids, attention_mask and optionally token_type_ids"
            )

    def score(self, query: str, texts: Sequence[str]) -> np.ndarray:
        """Relevance logits of (query, text) pairs."""
        out = np.empty(len(texts), dtype=np.float32)
        for start in range(0, len(texts), self.batch_size):
            batch = list(texts[start : start + self.batch_size])
            encodings = self._tokenizer.encode_batch([(query, t) for t in batch])
            width = max(len(e.ids) for e in encodings)
            ids = np.zeros((len(batch), width), dtype=np.int64)
            mask = np.zeros_like(ids)
            types = np.zeros_like(ids)
            for row, encoding in enumerate(encodings):
                n = len(encoding.ids)
                ids[row, :n] = encoding.ids
                mask[row, :n] = 1
                types[row, :n] = encoding.type_ids
            feeds = {"input_ids": ids, "attention_mask": mask}
            if "token_type_ids" in self._inputs:
                feeds["token_type_ids"] = types
            (logits,) = self._session.run(None, feeds)[:1]
            out[start : start + len(batch)] = _relevance(np.asarray(logits, dtype=np.float32))
        return out


def _relevance(logits: np.ndarray) -> np.ndarray:
    """One score per row from a cross-encoder's output."""
    if logits.ndim == 1:
        return logits
    if logits.shape[-1] == 1:
        return logits[:, 0]
    if logits.shape[-1] == 2:
        return logits[:, 1] - logits[:, 0]
    raise CrossEncoderUnavailableError(
        f"cross-encoder output has shape {logits.shape}; expected [batch], [batch, 1] or [batch, 2]"
    )


def _onnx_file(directory: Path) -> Path:
    if not directory.is_dir():
        raise CrossEncoderUnavailableError(f"cross-encoder directory not found: {directory}")
    preferred = directory / "model.onnx"
    if preferred.is_file():
        return preferred
    found = sorted(directory.glob("*.onnx"))
    if len(found) != 1:
        raise CrossEncoderUnavailableError(
            f"expected model.onnx (or exactly one *.onnx file) in {directory}, found "
            f"{[p.name for p in found]}"
        )
    return found[0]


class SentenceTransformersCrossEncoder:
    """A ``sentence_transformers.CrossEncoder`` loaded from a local directory."""

    def __init__(self, directory: Path) -> None:
        if not directory.exists():
            raise CrossEncoderUnavailableError(f"cross-encoder model not found: {directory}")
        try:
            from sentence_transformers import CrossEncoder as STCrossEncoder
        except ImportError as exc:
            raise CrossEncoderUnavailableError(
                "this cross-encoder needs the sentence-transformers package "
                "(pip install sentence-transformers), or export it to ONNX and point the "
                "stage at that directory"
            ) from exc
        self.name = f"sentence-transformers:{directory.name}"
        self._model: Any = STCrossEncoder(str(directory), device="cpu")

    def score(self, query: str, texts: Sequence[str]) -> np.ndarray:
        """Relevance scores of (query, text) pairs."""
        scores = self._model.predict([(query, t) for t in texts], show_progress_bar=False)
        return np.asarray(scores, dtype=np.float32).reshape(len(texts), -1)[:, -1]


def load_cross_encoder(
    model: str | os.PathLike[str] | None, kind: str | None = None
) -> CrossEncoder:
    """The cross-encoder at ``model`` (default: $ANAMNESIS_CROSS_ENCODER)."""
    chosen = model or os.environ.get(CROSS_ENCODER_ENV)
    if not chosen:
        raise CrossEncoderUnavailableError(
            "the cross-encoder stage needs a model: set stage_options['cross-encoder']"
            f"['model'] or {CROSS_ENCODER_ENV} to an ONNX or sentence-transformers "
            "cross-encoder directory"
        )
    path = Path(chosen).expanduser()
    if kind is None:
        kind = "onnx" if path.is_dir() and any(path.glob("*.onnx")) else "sentence-transformers"
    if kind == "onnx":
        return OnnxCrossEncoder(path)
    if kind == "sentence-transformers":
        return SentenceTransformersCrossEncoder(path)
    raise CrossEncoderUnavailableError(
        f"unknown cross-encoder kind {kind!r}; use 'onnx' or 'sentence-transformers'"
    )


def cross_encoder_stage(request: SearchRequest, fused: list[Fused]) -> list[Fused]:
    """Reorder the top ``top_n`` candidates by cross-encoder score (True Memory Stage 10).

    Options (``stage_options["cross-encoder"]``): ``model``, ``kind``, ``top_n``.
    The reordered candidates take over the old scores of those ranks, so scores stay
    decreasing down the list.
    """
    options = request.options("cross-encoder")
    model = options.get("model")
    kind = options.get("kind")
    encoder = request.resources.get(
        ("cross-encoder", model, kind),
        lambda: load_cross_encoder(model, kind),
    )
    top_n = int(options.get("top_n", CROSS_ENCODER_TOP_N))
    head, tail = fused[:top_n], fused[top_n:]
    episodes = request.episodes([f.episode_id for f in head])
    scored = [f for f in head if f.episode_id in episodes]
    if not scored:
        return fused
    texts = [
        embedding_text(episodes[f.episode_id].content, episodes[f.episode_id].speaker)
        for f in scored
    ]
    relevance = encoder.score(request.analysis.text, texts)
    return reorder(head, scored, relevance) + tail


def reorder(head: list[Fused], scored: list[Fused], relevance: np.ndarray) -> list[Fused]:
    """``head`` with ``scored`` sorted by ``relevance``; the rank slots keep their scores."""
    slots = sorted((f.score for f in head), reverse=True)
    order = [scored[i] for i in np.argsort(-relevance, kind="stable")]
    chosen = {id(f) for f in scored}
    order += [f for f in head if id(f) not in chosen]
    for f, slot in zip(order, slots, strict=True):
        f.score = slot
    return order
