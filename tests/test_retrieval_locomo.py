"""Retrieval sanity on a real conversation: a LoCoMo slice (see fixtures/README.md)."""

from __future__ import annotations

import json
from datetime import datetime
from pathlib import Path

import pytest

from anamnesis import Memory
from anamnesis.config import PRESETS

FIXTURE = Path(__file__).parent / "fixtures" / "locomo_conv26_sessions1-4.json"


@pytest.fixture(scope="module")
def conversation(tmp_path_factory, embedder):
    data = json.loads(FIXTURE.read_text())
    conv = data["conversation"]
    path = tmp_path_factory.mktemp("locomo") / "conv26.db"
    with Memory(path=path, embedder=embedder) as memory:
        n = 1
        while f"session_{n}" in conv:
            when = datetime.strptime(conv[f"session_{n}_date_time"], "%I:%M %p on %d %B, %Y")
            memory.add_many(
                [
                    {
                        "speaker": turn["speaker"],
                        "content": turn["text"],
                        "event_time": when,
                        "metadata": {"dia_id": turn["dia_id"]},
                    }
                    for turn in conv[f"session_{n}"]
                ],
                user_id="conv-26",
                session_id=f"session_{n}",
            )
            n += 1
    return path, data["qa"]


def _recall_at(path, embedder, qa, preset: str, k: int) -> float:
    found = total = 0
    with Memory(path=path, embedder=embedder, config=PRESETS[preset]) as memory:
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
