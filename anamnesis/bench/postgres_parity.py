"""Retrieval parity of the two backends: the same LoCoMo pipeline over SQLite and PostgreSQL.

    python -m anamnesis.bench.postgres_parity --url postgresql://... \\
        --data shared/data/locomo10.json.gz

Each LoCoMo conversation goes into a fresh SQLite file and a fresh Postgres schema
(BM25 statistics are per store, so each conversation is its own corpus on both) with
``Memory.add_many``; every category 1-4 question is searched with each preset at
depth 50. Every text is embedded once and its vector served to both stores, queries
included, so the dense channel sees identical vectors and only the store differs.

Reported per preset and backend: turn-level evidence recall@10 and @50 (the mean over
questions of the share of evidence turns retrieved, as the benchmark harness computes
it), the share of questions whose top 10 is identical (same turns, same order) and the
mean top-10 overlap (Jaccard) between the backends, and the paired difference in
recall@10 (PostgreSQL minus SQLite) with a bootstrap 95% interval.
"""

from __future__ import annotations

import argparse
import math
import statistics
import tempfile
import time
import uuid
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import quote

import numpy as np

from ..embed import get_embedder
from ..embed.base import Embedder
from ..memory import Memory
from ..retrieve.pipeline import Retriever
from ..store.base import Filters
from ..types import Scope
from .datasets import Case, load_locomo
from .metrics import paired_bootstrap, recall_at_k
from .presets import BENCH_PRESETS

#: Search depth, and the cut-offs reported.
DEPTH = 50
KS = (10, 50)
#: LoCoMo's answerable categories (5 is adversarial: no evidence to retrieve).
CATEGORIES = (1, 2, 3, 4)
USER = "bench"


class EmbedOnce:
    """An Embedder that embeds each document text and each query once, for every store."""

    def __init__(self, inner: Embedder) -> None:
        self.inner = inner
        self.name = inner.name
        self.dim = inner.dim
        self._documents: dict[str, np.ndarray] = {}
        self._queries: dict[str, np.ndarray] = {}

    def embed_documents(self, texts: Sequence[str]) -> np.ndarray:
        """Vectors for ``texts``, embedding only those not seen before."""
        todo = list(dict.fromkeys(t for t in texts if t not in self._documents))
        if todo:
            self._documents.update(zip(todo, self.inner.embed_documents(todo), strict=True))
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        return np.stack([self._documents[t] for t in texts])

    def embed_query(self, text: str) -> np.ndarray:
        """The query vector, computed on first use."""
        if text not in self._queries:
            self._queries[text] = self.inner.embed_query(text)
        return self._queries[text]


@dataclass
class Tally:
    """Per-question results of one preset, for both backends."""

    recall: dict[str, dict[int, list[float]]] = field(
        default_factory=lambda: {b: {k: [] for k in KS} for b in ("sqlite", "postgres")}
    )
    identical_top10: list[bool] = field(default_factory=list)
    overlap_top10: list[float] = field(default_factory=list)


@contextmanager
def _schema(url: str) -> Iterator[str]:
    """A URL whose tables go into a fresh schema, dropped afterwards."""
    import psycopg

    name = f"parity_{uuid.uuid4().hex[:10]}"
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(f'CREATE SCHEMA "{name}"')
    try:
        options = quote(f"-csearch_path={name},public", safe="")
        yield f"{url}{'&' if '?' in url else '?'}options={options}"
    finally:
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute(f'DROP SCHEMA "{name}" CASCADE')


def run_case(case: Case, url: str, embedder: EmbedOnce, tallies: dict[str, Tally]) -> None:
    """Build ``case`` in both backends and search every answerable question in each."""
    questions = [q for q in case.questions if q.extra.get("category_number") in CATEGORIES]
    with tempfile.TemporaryDirectory(prefix="parity-") as directory, _schema(url) as pg_url:
        memories = {
            "sqlite": Memory(Path(directory) / "memory.db", embedder=embedder, warm=False),
            "postgres": Memory(url=pg_url, embedder=embedder, warm=False),
        }
        try:
            for memory in memories.values():
                memory.add_many(case.messages, user_id=USER)
            for preset, tally in tallies.items():
                retrievers = {
                    name: Retriever(memory.store, embedder, BENCH_PRESETS[preset])
                    for name, memory in memories.items()
                }
                for question in questions:
                    ranked = {
                        name: [
                            str(hit.episode.metadata["dia_id"])
                            for hit in retriever.search(
                                question.text, Scope(USER), Filters(), DEPTH, False
                            )
                        ]
                        for name, retriever in retrievers.items()
                    }
                    for name, keys in ranked.items():
                        for k in KS:
                            tally.recall[name][k].append(recall_at_k(keys, question.evidence, k))
                    top = ranked["sqlite"][:10], ranked["postgres"][:10]
                    tally.identical_top10.append(top[0] == top[1])
                    union = set(top[0]) | set(top[1])
                    tally.overlap_top10.append(
                        len(set(top[0]) & set(top[1])) / len(union) if union else 1.0
                    )
        finally:
            for memory in memories.values():
                memory.close()


def _mean(values: list[float]) -> float:
    """Mean over the questions that have evidence (recall is nan without)."""
    return statistics.fmean(v for v in values if not math.isnan(v))


def report(tallies: dict[str, Tally]) -> str:
    """A markdown table of the tallies."""
    lines = [
        "| preset | backend | recall@10 | recall@50 | identical top-10 | top-10 Jaccard "
        "| recall@10 PG - SQLite (95% CI) |",
        "|---|---|---|---|---|---|---|",
    ]
    for preset, tally in tallies.items():
        for backend in ("sqlite", "postgres"):
            recall = [_mean(tally.recall[backend][k]) for k in KS]
            cells = ["", "", ""]
            if backend == "postgres":
                diff = paired_bootstrap(tally.recall["postgres"][10], tally.recall["sqlite"][10])
                cells = [
                    f"{statistics.fmean(tally.identical_top10):.3f}",
                    f"{statistics.fmean(tally.overlap_top10):.3f}",
                    f"{diff['diff']:+.4f} ({diff['low']:+.4f}, {diff['high']:+.4f})",
                ]
            lines.append(
                f"| {preset} | {backend} | {recall[0]:.4f} | {recall[1]:.4f} | "
                + " | ".join(cells)
                + " |"
            )
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--url", required=True, help="postgresql://... (pgvector installed)")
    parser.add_argument("--data", default="shared/data/locomo10.json.gz")
    parser.add_argument("--embedder", default="minilm")
    parser.add_argument("--presets", default="hybrid,bm25,dense")
    parser.add_argument("--limit", type=int, default=None, help="first N conversations")
    args = parser.parse_args(argv)
    dataset = load_locomo(Path(args.data), limit=args.limit)
    embedder = EmbedOnce(get_embedder(args.embedder))
    tallies = {preset: Tally() for preset in args.presets.split(",")}
    start = time.perf_counter()
    for case in dataset.cases:
        run_case(case, args.url, embedder, tallies)
        done = len(next(iter(tallies.values())).identical_top10)
        print(f"{case.id}: {done} questions, {time.perf_counter() - start:.0f}s", flush=True)
    print(report(tallies))


if __name__ == "__main__":
    main()
