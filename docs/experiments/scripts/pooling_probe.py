"""Long turns and MiniLM's 256-token limit: first window, mean or max over windows.

MiniLM reads at most 256 tokens, so the dense vector of a longer turn sees only its
start. This probe embeds every turn as consecutive windows of ``WINDOW`` word pieces
and ranks each question's turns by dense similarity alone, pooling a turn's windows
five ways: the first window (what the store keeps), their normalised mean, their
maximum, and max plus mean or first. It prints mean evidence recall@K per case as it
goes, and by category at the end (questions with evidence, abstention excluded).

    python docs/experiments/scripts/pooling_probe.py beam ../shared/data/beam_128k.json.gz [WINDOW] [K]

Nothing is cached: it embeds every window (BEAM 128K: about 13k windows, ~20 minutes
on 2 CPUs).
"""

from __future__ import annotations

import sys
import time
from collections import defaultdict
from pathlib import Path

import numpy as np
from tokenizers import BertWordPieceTokenizer

from anamnesis.bench import datasets
from anamnesis.embed.minilm import MAX_TOKENS, MiniLMEmbedder, _vocab_path


class _Encoding:
    """The part of a ``tokenizers.Encoding`` that ``MiniLMEmbedder._run`` reads."""

    def __init__(self, ids: list[int]) -> None:
        self.ids = ids


def main(kind: str, path: Path, window: int = MAX_TOKENS - 2, k: int = 20) -> None:
    embedder = MiniLMEmbedder()
    embedder._ensure_loaded()
    tokenizer = BertWordPieceTokenizer(str(_vocab_path()), lowercase=True)  # no truncation
    cls, sep = tokenizer.token_to_id("[CLS]"), tokenizer.token_to_id("[SEP]")
    dataset = datasets.load(kind, path)
    recalls: dict[str, list[float]] = defaultdict(list)
    by_category: dict[str, dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
    started = time.perf_counter()
    for case in dataset.cases:
        windows, owner = [], []
        for index, message in enumerate(case.messages):
            ids = tokenizer.encode(message["content"], add_special_tokens=False).ids or [sep]
            for start in range(0, len(ids), window):
                windows.append(_Encoding([cls, *ids[start : start + window], sep]))
                owner.append(index)
        order = sorted(range(len(windows)), key=lambda i: len(windows[i].ids))
        vectors = np.empty((len(windows), embedder.dim), dtype=np.float32)
        for start in range(0, len(order), 32):
            batch = order[start : start + 32]
            vectors[batch] = embedder._run([windows[i] for i in batch])
        owners = np.asarray(owner)
        n = len(case.messages)
        first = np.zeros((n, embedder.dim), dtype=np.float32)
        mean = np.zeros((n, embedder.dim), dtype=np.float32)
        turns, first_window = np.unique(owners, return_index=True)
        first[turns] = vectors[first_window]
        np.add.at(mean, owners, vectors)
        mean /= np.linalg.norm(mean, axis=1, keepdims=True)
        keys = [str(m["metadata"][dataset.evidence_key]) for m in case.messages]
        for question in case.questions:
            evidence = set(question.evidence)
            if not evidence or question.abstention:
                continue
            query = embedder.embed_query(question.text)
            best = np.full(n, -np.inf)
            np.maximum.at(best, owners, vectors @ query)
            pooled = {
                "first": first @ query,
                "mean": mean @ query,
                "max": best,
                "max+mean": best + mean @ query,
                "max+first": best + first @ query,
            }
            for name, scores in pooled.items():
                top = {keys[i] for i in np.argsort(-scores, kind="stable")[:k]}
                recall = len(evidence & top) / len(evidence)
                recalls[name].append(recall)
                by_category[question.category][name].append(recall)
        elapsed = time.perf_counter() - started
        summary = {name: round(100 * float(np.mean(v)), 1) for name, v in recalls.items()}
        print(f"case {case.id}: {n} turns, {len(windows)} windows, {elapsed:.0f}s, R@{k} {summary}")
    for category, values in sorted(by_category.items()):
        summary = {name: round(100 * float(np.mean(v)), 1) for name, v in values.items()}
        print(f"{category}: {summary}")


if __name__ == "__main__":
    args = sys.argv[1:]
    main(
        args[0],
        Path(args[1]),
        int(args[2]) if len(args) > 2 else MAX_TOKENS - 2,
        int(args[3]) if len(args) > 3 else 20,
    )
