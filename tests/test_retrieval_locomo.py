"""Retrieval sanity on a real conversation: a LoCoMo slice (see fixtures/README.md)."""

from __future__ import annotations

import pytest
from locomo_slice import load_slice

from anamnesis import Memory
from anamnesis.bench.presets import BENCH_PRESETS


@pytest.fixture(scope="module")
def conversation(tmp_path_factory, embedder):
    path = tmp_path_factory.mktemp("locomo") / "conv26.db"
    with Memory(path=path, embedder=embedder) as memory:
        qa = load_slice(memory, "conv-26")
    return path, qa


def _recall_at(path, embedder, qa, preset: str, k: int) -> float:
    found = total = 0
    with Memory(path=path, embedder=embedder, config=BENCH_PRESETS[preset]) as memory:
        for item in qa:
            hits = memory.search(item["question"], user_id="conv-26", limit=k)
            retrieved = {h.episode.metadata["dia_id"] for h in hits}
            found += len(set(item["evidence"]) & retrieved)
            total += len(item["evidence"])
    return found / total


def test_hybrid_finds_most_evidence_in_the_top_10(conversation, embedder) -> None:
    path, qa = conversation
    assert len(qa) == 35
    # A sanity floor far below what the benchmark measures, so that a broken channel,
    # fusion or scope bug fails loudly while normal tuning does not.
    assert _recall_at(path, embedder, qa, "hybrid", 10) >= 0.45


def test_hybrid_is_not_worse_than_either_channel_alone(conversation, embedder) -> None:
    path, qa = conversation
    hybrid = _recall_at(path, embedder, qa, "hybrid", 10)
    assert hybrid >= _recall_at(path, embedder, qa, "dense", 10) - 0.05
    assert hybrid >= _recall_at(path, embedder, qa, "bm25", 10) - 0.05


def test_top_50_covers_nearly_everything(conversation, embedder) -> None:
    path, qa = conversation
    assert _recall_at(path, embedder, qa, "hybrid", 50) >= 0.9
