"""The scale benchmark on a tiny slice: it grows one store and measures every point."""

from __future__ import annotations

import json

import numpy as np

from anamnesis.bench.scale import PoolEmbedder, ScaleOptions, messages, run_scale, write_scale

from .test_smoke import FIXTURES


class _Counting:
    name = "fake"
    dim = 4

    def __init__(self) -> None:
        self.seen: list[str] = []

    def embed_documents(self, texts):
        self.seen.extend(texts)
        return np.ones((len(texts), self.dim), dtype=np.float32)

    def embed_query(self, text):
        return np.ones(self.dim, dtype=np.float32)


def test_pool_embeds_only_the_pool_then_rotates():
    inner = _Counting()
    pool = PoolEmbedder(inner, size=3)
    first = pool.embed_documents(["a", "b"])
    second = pool.embed_documents(["c", "d", "e"])
    assert inner.seen == ["a", "b", "c"]
    assert first.shape == (2, 4) and second.shape == (3, 4)


def test_messages_cycle_with_new_sessions_and_later_dates():
    from datetime import UTC, datetime

    turns = [("hello", "s1", datetime(2023, 5, 1, tzinfo=UTC), "user")]
    first, second = list(messages(turns, 0, 2))
    assert first["session_id"] == "s1" and second["session_id"] == "s1#c1"
    assert second["event_time"].year == 2024 and second["content"] == "hello"


def test_scale_run_end_to_end(tmp_path):
    options = ScaleOptions(sizes=(60, 150), embedder="edge", pool=40, queries=3, single_adds=3)
    result = run_scale(FIXTURES / "longmemeval_smoke.json.gz", options, tmp_path / "stores")
    assert [p.episodes for p in result.points] == [63, 153]
    first, second = result.points
    assert first.embedded_texts == 60  # texts that needed a vector (40 real, 20 pooled)
    assert second.segment_messages == 87 and second.ingest_per_second > 0
    assert set(second.search_ms) == {"bm25", "dense", "hybrid"}
    assert second.file_bytes > first.file_bytes > 0
    assert set(second.fresh_process) == {"bm25", "dense", "hybrid"}
    assert all("first_search_ms" in run for run in second.fresh_process.values())
    assert second.forget["removed"] == 1 and second.forget["forget_ms"] > 0
    assert second.forget["next_search_ms"] > 0
    # The probe's word is found in the files before forget and nowhere after it.
    assert second.forget["occurrences_before"] > 0 == second.forget["occurrences_after"]
    assert first.load_average[0] >= 0 and second.segment_cpu_seconds > 0
    assert not list((tmp_path / "stores").iterdir())  # the grown store is removed
    data = write_scale(result, tmp_path / "out", "anamnesis bench scale ...")
    assert (tmp_path / "out" / "report.md").read_text().count("\n| 153 |") == 2
    assert json.loads((tmp_path / "out" / "scale.json").read_text())["points"][1]["episodes"] == 153
    assert data["environment"]["vectors"].startswith("pool of 40")
