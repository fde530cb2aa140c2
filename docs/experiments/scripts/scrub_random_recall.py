"""Recall@100 of a graph against the exact scan before and after ``AnnIndex.scrub``,
on random unit vectors (the store's graph settings), for a few removed shares and
seeds. One JSON line per case to stdout.

    python docs/experiments/scripts/scrub_random_recall.py --rows 30000 --dims 16 256
"""

from __future__ import annotations

import argparse
import json
import time

import numpy as np

from anamnesis.store.index.ann import AnnIndex


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rows", type=int, default=30_000)
    parser.add_argument("--dims", type=int, nargs="+", default=[16, 256])
    parser.add_argument("--shares", type=float, nargs="+", default=[0.01, 0.1])
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--queries", type=int, default=100)
    args = parser.parse_args()
    for dim in args.dims:
        for seed in range(args.seeds):
            rng = np.random.default_rng(seed)
            vectors = rng.normal(size=(args.rows, dim)).astype(np.float32)
            vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
            queries = rng.normal(size=(args.queries, dim)).astype(np.float32)
            queries /= np.linalg.norm(queries, axis=1, keepdims=True)
            rowids = np.arange(1, args.rows + 1)
            built = AnnIndex(dim)
            built.add(rowids, vectors, threads=AnnIndex.build_threads(args.rows))
            for share in args.shares:
                graph = AnnIndex(dim, built._index.copy())
                removed = np.sort(rng.choice(rowids, int(share * args.rows), replace=False))
                graph.remove(removed)
                live = np.setdiff1d(rowids, removed)
                scores = queries @ vectors[live - 1].T
                exact = [set(live[np.argpartition(-s, 100)[:100]].tolist()) for s in scores]

                def recall(graph: AnnIndex = graph, exact: list = exact, queries=queries) -> float:
                    found = [set(graph.search(q, 100).tolist()) for q in queries]
                    pairs = zip(exact, found, strict=True)
                    return float(np.mean([len(e & f) / 100 for e, f in pairs]))

                before = recall()
                started = time.perf_counter()
                graph.scrub()
                scrub_s = time.perf_counter() - started
                case = {"dim": dim, "seed": seed, "rows": args.rows, "removed": len(removed)}
                print(
                    json.dumps(
                        {
                            **case,
                            "scrub_s": round(scrub_s, 3),
                            "recall_before": round(before, 4),
                            "recall_after": round(recall(), 4),
                        }
                    ),
                    flush=True,
                )


if __name__ == "__main__":
    main()
