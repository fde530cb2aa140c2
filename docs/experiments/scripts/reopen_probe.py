"""Open a store as a fresh process would and say whether its saved graph was used as is.

Opens ``DB`` with a ``Memory`` (``edge`` embedder), searches once, waits for the
Memory's own background warm-up, then prints the first search's wall seconds, whether
the graph is still the mapped file, its rows, and how many graphs were built or copied
into memory meanwhile (a graph saved in step with the store needs neither).

    python docs/experiments/scripts/reopen_probe.py COPY_DIR/memory.db
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path
from typing import Any

from anamnesis import Memory
from anamnesis.embed import get_embedder
from anamnesis.store.index.ann import AnnIndex
from anamnesis.store.sqlite.ann import SQLiteAnn


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("db", type=Path)
    args = parser.parse_args()
    built: list[int] = []
    copied: list[int] = []
    build, materialised = SQLiteAnn._build, AnnIndex.materialised

    def counted_build(self: SQLiteAnn, *rest: Any) -> None:
        built.append(1)
        build(self, *rest)

    def counted_copy(self: AnnIndex) -> AnnIndex:
        if self.view:
            copied.append(1)
        return materialised(self)

    SQLiteAnn._build = counted_build  # type: ignore[method-assign]
    AnnIndex.materialised = counted_copy  # type: ignore[method-assign]
    embedder = get_embedder("edge")
    embedder.embed_query("warm up")
    started = time.perf_counter()
    memory = Memory(path=args.db, embedder=embedder)
    memory.search("What did I say about the locker at the gym?", user_id="scale", limit=10)
    first = time.perf_counter() - started
    if memory._warm_thread is not None:
        memory._warm_thread.join()
    graph = memory.store._ann._graph
    print(
        f"first search {first:.2f} s; graph mapped: {graph is not None and graph.view}, "
        f"rows {len(graph) if graph is not None else 0}, built {len(built)}, copied {len(copied)}"
    )
    memory.close()


if __name__ == "__main__":
    main()
