"""How often an HNSW build leaves rows that their own vector cannot find: the vectors
of a store (its saved ``<store>.dense.<generation>.npy``, zero rows dropped) are built
into a graph BUILDS times with ``add(threads=0)`` (every core, as the store builds it)
and with ``threads=1``, and every row is searched for with its own vector, asking for
63 candidates (the dense channel's 50, oversampled). The study "ANN forced recall".

    python docs/experiments/scripts/ann_unreachable.py STORE.db.dense.GEN.npy [BUILDS]
"""

from __future__ import annotations

import sys

import numpy as np

from anamnesis.store.index.ann import AnnIndex

ASK = 63


def main(npy: str, builds: int) -> None:
    matrix = np.array(np.load(npy, mmap_mode="r"), dtype=np.float32)
    matrix = matrix[np.abs(matrix).sum(axis=1) > 0]  # the zeroed room for appends
    rowids = np.arange(1, len(matrix) + 1)
    print(f"{len(matrix)} rows, {builds} builds each")
    for threads in (0, 1):
        broken, worst = 0, 0
        for _ in range(builds):
            graph = AnnIndex(matrix.shape[1])
            graph.add(rowids, matrix, threads=threads)
            lost = sum(
                1 for i in range(len(matrix)) if i + 1 not in set(graph.search(matrix[i], ASK))
            )
            broken += lost > 0
            worst = max(worst, lost)
        print(f"threads={threads}: {broken} builds lose a row to its own vector; worst {worst}")


if __name__ == "__main__":
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    main(sys.argv[1], int(sys.argv[2]) if len(sys.argv) > 2 else 100)
