"""What a save's scrub costs once a graph already holds many removed nodes: maps the
graph saved beside ``STORE``, copies it into memory, removes ``--first`` random rows
and scrubs (as the save after a bulk forget does), then ``--rounds`` times removes
``--then`` more rows and times the scrub again (a save after each small forget). One
JSON line to stdout. Runs on any version of the code.

    cp STORE_DIR/memory.db.ann.* COPY_DIR/
    python docs/experiments/scripts/regraph_scrub_cost.py COPY_DIR/memory.db --first 9000
"""

from __future__ import annotations

import argparse
import json
import os
import time
from pathlib import Path

import numpy as np

from anamnesis.store.index.ann import AnnIndex


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("store", type=Path)
    parser.add_argument("--first", type=int, default=9000)
    parser.add_argument("--then", type=int, default=5)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    loaded = AnnIndex.load(args.store, view=True)
    assert loaded is not None, "no graph saved beside the store"
    graph = loaded[0].materialised()
    keys = np.array(graph._index.keys, dtype=np.uint64)
    rowids = np.sort(keys[keys < 2**63].astype(np.int64))
    order = np.random.default_rng(args.seed).permutation(rowids)
    graph.remove(order[: args.first])
    started = time.perf_counter()
    graph.scrub()
    out: dict = {"rows": int(rowids.size), "first": args.first}
    out["first_scrub_s"] = round(time.perf_counter() - started, 3)
    later = []
    at = args.first
    for _ in range(args.rounds):
        graph.remove(order[at : at + args.then])
        at += args.then
        started = time.perf_counter()
        graph.scrub()
        later.append(round(time.perf_counter() - started, 3))
    out["then"] = args.then
    out["later_scrubs_s"] = later
    out["free_nodes_left"] = graph.removed_nodes()
    out["load"] = os.getloadavg()[0]
    print(json.dumps(out), flush=True)


if __name__ == "__main__":
    main()
