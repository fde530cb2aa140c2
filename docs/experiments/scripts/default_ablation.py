"""Leave-one-out rows around ``full-temporal`` (the default before the role channels).

    python docs/experiments/scripts/default_ablation.py locomo ../shared/data/locomo10.json.gz OUT minilm
    python docs/experiments/scripts/default_ablation.py beam ../shared/data/beam_128k.json.gz OUT minilm
    python docs/experiments/scripts/default_ablation.py longmemeval \
        ../shared/data/longmemeval_s_dev.json.gz OUT edge 100

Arguments: dataset, data file, results folder, embedder, optional case limit. Runs
hybrid, full-temporal and three variants (without the session channel, without
pseudo-relevance feedback, lexical weight 1 instead of 0.25) on the same stores.
Set ANAMNESIS_VECTOR_CACHE to a folder to reuse document vectors across runs.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

from anamnesis.bench.api import run_benchmark
from anamnesis.bench.presets import BENCH_PRESETS
from anamnesis.bench.runner import BenchOptions
from anamnesis.config import SearchConfig


def without(config: SearchConfig, channel: str) -> SearchConfig:
    """``config`` with one channel (and its weight) left out."""
    channels = tuple(c for c in config.channels if c != channel)
    weights = {c: w for c, w in config.weights.items() if c in channels}
    return config.with_(channels=channels, weights=weights)


def main(argv: list[str]) -> None:
    dataset, data, out, embedder, *rest = argv
    base = BENCH_PRESETS["full-temporal"]
    BENCH_PRESETS["ft-nosession"] = without(base, "session")
    BENCH_PRESETS["ft-noprf"] = without(base, "prf")
    BENCH_PRESETS["ft-lex1"] = base.with_(weights={**base.weights, "lexical": 1.0})
    cache = os.environ.get("ANAMNESIS_VECTOR_CACHE")
    options = BenchOptions(
        configs=("hybrid", "full-temporal", "ft-nosession", "ft-noprf", "ft-lex1"),
        embedder=embedder,
        embedding_cache_dir=Path(cache) if cache else None,
    )
    limit = int(rest[0]) if rest else None
    run_benchmark(dataset, Path(data), options=options, out_dir=Path(out), limit=limit)


if __name__ == "__main__":
    main(sys.argv[1:])
