"""Recall@100 of a store's graph against the exact scan as a growing share of its rows
is removed (``AnnIndex.remove``, then ``scrub``, as a save does), and of a graph built
afresh over the rows left: where a rebuild pays. Reads a copy of a store's saved graph
and matrix, without opening the store.

Maps the graph saved beside ``STORE`` and, for each ``--shares`` share: copies it into
memory, removes that share of its rows at random, scrubs, and measures recall@100 for
``--queries`` queries (live rows' vectors with a little noise) against the exact scan
of the rows left; with ``--rebuild``, also builds a graph of the rows left (timed) and
measures it the same way. One JSON line per share to stdout.

    cp STORE_DIR/memory.db.ann.* STORE_DIR/memory.db.dense.* COPY_DIR/
    python docs/experiments/scripts/regraph_share_probe.py COPY_DIR/memory.db \
        --shares 0 0.05 0.1 0.2 --rebuild
"""

from __future__ import annotations

import argparse
import json
import os
import time
from pathlib import Path

import numpy as np
from scrub_probe import saved_graph

from anamnesis.store.index.ann import (
    MIN_SEARCH_EXPANSION,
    SEARCH_EXPANSION_FACTOR,
    AnnIndex,
)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("store", type=Path)
    parser.add_argument("--shares", type=float, nargs="+", default=[0.0, 0.05, 0.1, 0.2])
    parser.add_argument("--queries", type=int, default=100)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--rebuild", action="store_true")
    args = parser.parse_args()
    view, state, rowids, matrix, queries, rng = saved_graph(args.store, args.queries, args.seed)
    held = len(rowids)
    ask = max(100, MIN_SEARCH_EXPANSION // SEARCH_EXPANSION_FACTOR)
    for share in args.shares:
        graph = view.materialised()
        gone = np.sort(rng.choice(held, int(share * held), replace=False))
        graph.remove(rowids[gone])
        graph.scrub()
        live = np.ones(held, dtype=bool)
        live[gone] = False
        exact = [
            set(rowids[live][np.argpartition(-(matrix[live] @ q), 100)[:100]].tolist())
            for q in queries
        ]

        def recall(graph: AnnIndex, exact: list = exact) -> float:
            found = [set(graph.search(q, ask)[:100].tolist()) for q in queries]
            return float(np.mean([len(e & f) / 100 for e, f in zip(exact, found, strict=True)]))

        case: dict = {"share": share, "removed": int(gone.size), "recall": round(recall(graph), 4)}
        del graph
        if args.rebuild:
            started = time.perf_counter()
            fresh = AnnIndex(state.dim)
            kept = rowids[live]
            fresh.add(kept, matrix[live], threads=AnnIndex.build_threads(kept.size))
            case["rebuild_s"] = round(time.perf_counter() - started, 1)
            case["rebuilt_recall"] = round(recall(fresh), 4)
            del fresh
        case["load"] = os.getloadavg()[0]
        print(json.dumps(case), flush=True)


if __name__ == "__main__":
    main()
