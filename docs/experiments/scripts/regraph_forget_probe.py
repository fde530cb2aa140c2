"""Recall@100 of a store's graph against the exact scan after a bulk forget, through the
store's own lifecycle: in the session that forgets, and after a close and a fresh open
(the graph saved at close, its removed nodes overwritten).

Opens ``STORE`` (a copy: it is changed), warms it up, forgets ``--share`` of its
episodes at random (``--chunk`` per forget; never the last one, whose forget alone
makes the next open build the graph afresh), searches once (the cue for the store's
background work on the graph), waits for that work, measures recall@100 of the dense
search through the graph against the exact scan for ``--queries`` queries (live rows'
vectors with a little noise), closes, opens again, warms up, and measures again. One
JSON line to stdout. Runs on any version of the code (what it reads of the graph is
read if present).

    cp -a STORE_DIR/. COPY_DIR/ && sync
    python docs/experiments/scripts/regraph_forget_probe.py COPY_DIR/memory.db --share 0.2
"""

from __future__ import annotations

import argparse
import json
import os
import time
from pathlib import Path

import numpy as np

from anamnesis.store.base import Selection
from anamnesis.store.sqlite import SQLiteStore
from anamnesis.types import Scope


def graph_facts(store: SQLiteStore) -> dict:
    """What the store's graph is now: rows, dead nodes (if this code counts them)."""
    graph = store._ann._graph
    if graph is None:
        return {"graph": None}
    facts: dict = {"graph_rows": len(graph), "view": graph.view}
    if hasattr(graph, "dead_nodes"):
        facts["dead_nodes"] = graph.dead_nodes()
    else:
        facts["free_nodes"] = graph.removed_nodes()
    return facts


def recall(store: SQLiteStore, user: str, queries: np.ndarray) -> dict:
    """Recall@100 of the dense search against the exact scan, and how many searches
    went through the graph."""
    values = []
    with store._lock:
        store._refresh_dense()
        dense = store._dense
        before = dense.graph_searches
        for query in queries:
            exact = {r for r, _ in dense.search(query, user_id=user, limit=100, exact=True)}
            found = {r for r, _ in dense.search(query, user_id=user, limit=100)}
            values.append(len(exact & found) / 100)
        through = dense.graph_searches - before
    return {"recall": round(float(np.mean(values)), 4), "graph_searches": through}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("store", type=Path)
    parser.add_argument("--share", type=float, default=0.2)
    parser.add_argument("--chunk", type=int, default=2000)
    parser.add_argument("--queries", type=int, default=100)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--dim", type=int, default=256)
    args = parser.parse_args()
    rng = np.random.default_rng(args.seed)
    out: dict = {"share": args.share}

    store = SQLiteStore(args.store, dim=args.dim)
    started = time.perf_counter()
    store.warm_up()
    out["warm_up_s"] = round(time.perf_counter() - started, 1)
    ((user,),) = store._read("SELECT DISTINCT user_id FROM episodes")
    ids = [row[0] for row in store._read("SELECT id FROM episodes ORDER BY rowid")]
    gone = set(rng.choice(len(ids) - 1, int(args.share * len(ids)), replace=False).tolist())
    chosen = [ids[n] for n in sorted(gone)]
    started = time.perf_counter()
    for start in range(0, len(chosen), args.chunk):
        store.forget(Scope(user), Selection(episode_ids=tuple(chosen[start : start + args.chunk])))
    out["forgotten"] = len(chosen)
    out["forget_s"] = round(time.perf_counter() - started, 1)
    with store._lock:
        store._refresh_dense()
        dense = store._dense
        live = np.flatnonzero(
            dense.live_mask(0, dense.size) if dense.removed else np.ones(dense.size, dtype=bool)
        )
        picked = rng.choice(live, args.queries, replace=False)
        queries = np.array(dense.vectors_at(np.sort(picked)))
    queries = queries + rng.normal(scale=0.02, size=queries.shape).astype(np.float32)
    queries /= np.linalg.norm(queries, axis=1, keepdims=True)
    started = time.perf_counter()
    worker = store._ann._worker
    if worker is not None:
        worker.join()
    out["background_s"] = round(time.perf_counter() - started, 1)
    out["session"] = {**graph_facts(store), **recall(store, user, queries)}
    started = time.perf_counter()
    store.close()
    out["close_s"] = round(time.perf_counter() - started, 1)
    state = json.loads(args.store.with_name(args.store.name + ".ann.json").read_text())
    out["saved"] = {k: state.get(k) for k in ("count", "placeholders")}

    store = SQLiteStore(args.store, dim=args.dim)
    started = time.perf_counter()
    store.warm_up()
    worker = store._ann._worker
    if worker is not None:
        worker.join()
    out["reopen_warm_up_s"] = round(time.perf_counter() - started, 1)
    out["reopened"] = {**graph_facts(store), **recall(store, user, queries)}
    store.close()
    out["load"] = os.getloadavg()[0]
    print(json.dumps(out), flush=True)


if __name__ == "__main__":
    main()
