"""Embedders: the default MiniLM (ONNX), the fast static "edge" model, the slower and
more accurate e5-small, and OpenAI-compatible."""

from __future__ import annotations

from .base import Embedder, normalise

#: Names accepted by ``Memory(embedder=...)`` and ``--embedder``.
EMBEDDER_NAMES = ("minilm", "minilm-int8", "edge", "e5", "openai:<model>")


def get_embedder(spec: str | Embedder | None) -> Embedder:
    """An embedder from a name (``minilm``, ``minilm-int8``, ``edge``, ``e5``,
    ``openai:MODEL``) or an instance. ``minilm-int8`` trades a little recall for faster
    ingest; ``e5`` gains recall for slower ingest (BENCHMARKS.md, "Speed and scale")."""
    from ..errors import EmbedderUnavailableError, InvalidInputError

    if spec is None or spec == "minilm":
        from .minilm import MiniLMEmbedder

        return MiniLMEmbedder()
    if spec == "minilm-int8":
        from .minilm import MiniLMEmbedder

        return MiniLMEmbedder(variant="int8_rowwise")
    if not isinstance(spec, str):
        if not isinstance(spec, Embedder):
            raise EmbedderUnavailableError(
                f"{spec!r} is not an Embedder (needs name, dim, embed_documents, embed_query)"
            )
        return spec
    if spec in ("edge", "wordllama"):
        from .static import WordLlamaEmbedder

        return WordLlamaEmbedder()
    if spec == "e5":
        from .e5 import E5Embedder

        return E5Embedder()
    if spec.startswith("openai:"):
        from .openai import OpenAIEmbedder

        return OpenAIEmbedder(model=spec.removeprefix("openai:"))
    raise InvalidInputError(f"unknown embedder {spec!r}; choose from {EMBEDDER_NAMES}")


__all__ = ["Embedder", "get_embedder", "normalise", "EMBEDDER_NAMES"]
