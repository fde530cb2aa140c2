"""What overwriting a graph's removed nodes costs (``AnnIndex.scrub``), on a copy of a
store's saved graph and matrix, without opening the store.

Maps the graph saved beside ``STORE`` (``<store>.ann.*``), and for each ``--removed``
count: copies it into memory, removes that many random rows, times ``scrub`` and the
save that follows, checks that the saved file holds none of the removed rows'
half-float vectors (of the first 200, those no live row has too), and measures
recall@100 against the exact scan of the saved matrix (of the rows left), for
``--queries`` queries (live rows' vectors with a little noise), before and after the
scrub. One JSON line per count to stdout.

    cp STORE_DIR/memory.db.ann.* STORE_DIR/memory.db.dense.* COPY_DIR/
    python docs/experiments/scripts/scrub_probe.py COPY_DIR/memory.db --removed 1 100 2048
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import time
from pathlib import Path

import numpy as np

from anamnesis.store.index.ann import (
    MIN_SEARCH_EXPANSION,
    SEARCH_EXPANSION_FACTOR,
    AnnIndex,
    AnnState,
)


def saved_graph(
    store: Path, queries: int, seed: int
) -> tuple[AnnIndex, AnnState, np.ndarray, np.ndarray, np.ndarray, np.random.Generator]:
    """The graph saved beside ``store`` (mapped) and its state, the rows it holds with their vectors
    (read from the saved dense index), ``queries`` of them moved a little as queries,
    and the random generator that drew them; prints the graph's row and free-node
    counts."""
    loaded = AnnIndex.load(store, view=True)
    assert loaded is not None, "no graph saved beside the store"
    view, state = loaded
    dense = json.loads(store.with_name(store.name + ".dense.json").read_text())
    prefix = f"{store.name}.dense.{dense['generation']}"
    matrix = np.load(store.with_name(prefix + ".npy"), mmap_mode="r")
    rowids = np.load(store.with_name(prefix + ".npz"))["rowids"]
    held = int(np.searchsorted(rowids, state.max_rowid, side="right"))
    rowids, matrix = rowids[:held], np.asarray(matrix[:held])
    rng = np.random.default_rng(seed)
    asked = matrix[rng.choice(held, queries, replace=False)]
    asked = asked + rng.normal(scale=0.02, size=asked.shape).astype(np.float32)
    asked /= np.linalg.norm(asked, axis=1, keepdims=True)
    print(json.dumps({"rows": len(view), "removed_nodes_in_file": view.removed_nodes()}))
    return view, state, rowids, matrix, asked, rng


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("store", type=Path)
    parser.add_argument("--removed", type=int, nargs="+", default=[1, 100, 2048])
    parser.add_argument("--queries", type=int, default=100)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    view, state, rowids, matrix, queries, rng = saved_graph(args.store, args.queries, args.seed)
    held = len(rowids)
    for count in args.removed:
        started = time.perf_counter()
        graph = view.materialised()
        copy_s = time.perf_counter() - started
        gone = np.sort(rng.choice(held, count, replace=False))
        graph.remove(rowids[gone])
        live = np.ones(held, dtype=bool)
        live[gone] = False
        exact = [
            set(rowids[live][np.argpartition(-(matrix[live] @ q), 100)[:100]].tolist())
            for q in queries
        ]

        def recall(graph: AnnIndex = graph, exact: list = exact) -> float:
            ask = max(100, MIN_SEARCH_EXPANSION // SEARCH_EXPANSION_FACTOR)
            found = [set(graph.search(q, ask)[:100].tolist()) for q in queries]
            return float(np.mean([len(e & f) / 100 for e, f in zip(exact, found, strict=True)]))

        before = recall()
        started = time.perf_counter()
        graph.scrub()
        scrub_s = time.perf_counter() - started
        after = recall()
        with tempfile.TemporaryDirectory(dir=args.store.parent) as folder:
            target = Path(folder) / "memory.db"
            started = time.perf_counter()
            graph.save(target, AnnState(state.dim, "probe", state.max_rowid, len(graph), "-"))
            save_s = time.perf_counter() - started
            (saved,) = [p for p in Path(folder).iterdir() if not p.name.endswith(".json")]
            data = saved.read_bytes()
            # A removed row whose half-float vector a live row also has is not a leak.
            kept = {matrix[i].astype(np.float16).tobytes() for i in np.flatnonzero(live)}
            checked = [matrix[i].astype(np.float16).tobytes() for i in gone[:200]]
            checked = [needle for needle in checked if needle not in kept]
            leaked = sum(needle in data for needle in checked)
            size = os.path.getsize(saved)
        print(
            json.dumps(
                {
                    "removed": count,
                    "copy_s": round(copy_s, 3),
                    "scrub_s": round(scrub_s, 3),
                    "save_s": round(save_s, 3),
                    "file_bytes": size,
                    "leaked_of_checked": [leaked, len(checked)],
                    "recall_before": round(before, 4),
                    "recall_after": round(after, 4),
                    "load": os.getloadavg()[0],
                }
            ),
            flush=True,
        )


if __name__ == "__main__":
    main()
