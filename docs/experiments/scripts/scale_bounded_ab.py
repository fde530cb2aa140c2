"""Two versions of the code on grown scale stores, interleaved question by question in
one process: search p50 and p95, wall clock and this thread's CPU time, per preset, and
how often the top 10 is the same (issue 34; study "A memory for a lifetime", "A
default bounded by its first stage").

The older version is a copy of the package renamed ``anamnesis_base`` (its absolute
imports rewritten), on ``PYTHONPATH`` beside the worktree:

    git archive BASE anamnesis | tar -x -C DIR && mv DIR/anamnesis DIR/basepkg/anamnesis_base
    find DIR/basepkg -name '*.py' -exec sed -i -E 's/\\bfrom anamnesis([. ])/from anamnesis_base\\1/g' {} +
    PYTHONPATH=$PWD:DIR/basepkg python docs/experiments/scripts/scale_bounded_ab.py \\
        --data ../shared/data/longmemeval_s_dev.json.gz --queries 60 STORE.db [STORE.db ...]

CPU time is what a search costs on a machine other jobs share (its wall time then
depends on how often it is descheduled); on a quiet machine the two agree. Each
(store, version, preset) has a Memory of its own, so no search profits from what
another left in memory.
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import time
from pathlib import Path

import numpy as np

from anamnesis.bench.scale import source_texts

parser = argparse.ArgumentParser()
parser.add_argument("stores", nargs="+")
parser.add_argument("--data", required=True)
parser.add_argument("--queries", type=int, default=60)
parser.add_argument("--user", default="scale")
parser.add_argument("--base-presets", default="fast,default")
parser.add_argument("--new-presets", default="fast,default,default-pool-4")
args = parser.parse_args()


def open_one(db: str, package: str, preset: str):
    memory = importlib.import_module(package + ".memory")
    embed = importlib.import_module(package + ".embed")
    presets = importlib.import_module(package + ".bench.presets").BENCH_PRESETS
    pipeline = importlib.import_module(package + ".retrieve.pipeline")
    base = importlib.import_module(package + ".store.base")
    types = importlib.import_module(package + ".types")
    embedder = embed.get_embedder("edge")
    embedder.embed_query("warm up")
    opened = memory.Memory(path=db, embedder=embedder, warm=False)
    opened.store.warm_up()
    scope = types.Scope(args.user)
    retriever = pipeline.Retriever(opened.store, opened.embedder, presets[preset])
    retriever.search("warm up", scope, base.Filters(), 10, False)
    # A filtered search loads the filter columns once (not part of the hot path).
    opened.store.lexical_search(["warm"], scope, base.Filters(not_role="user"), 5)

    def search(question: str) -> list[str]:
        hits = retriever.search(question, scope, base.Filters(), 10, False)
        return [hit.episode.id for hit in hits]

    return opened, search


_, questions = source_texts(Path(args.data))
questions = questions[: args.queries]
runs = [("base", "anamnesis_base", p) for p in args.base_presets.split(",")] + [
    ("new", "anamnesis", p) for p in args.new_presets.split(",")
]
opened = {
    (s, v, p): open_one(db, package, p)
    for s, db in enumerate(args.stores)
    for v, package, p in runs
}
wall: dict[tuple, list[float]] = {key: [] for key in opened}
cpu: dict[tuple, list[float]] = {key: [] for key in opened}
tops: dict[tuple, list[list[str]]] = {key: [] for key in opened}
for i, question in enumerate(questions):
    for key in list(opened) if i % 2 == 0 else list(reversed(opened)):
        start_cpu, start = time.thread_time(), time.perf_counter()
        tops[key].append(opened[key][1](question))
        wall[key].append((time.perf_counter() - start) * 1000)
        cpu[key].append((time.thread_time() - start_cpu) * 1000)

rows = {}
for s, v, p in opened:
    fast = (s, v, "fast")
    row = {
        "wall_p50_ms": round(float(np.percentile(wall[(s, v, p)], 50)), 2),
        "wall_p95_ms": round(float(np.percentile(wall[(s, v, p)], 95)), 2),
        "cpu_p50_ms": round(float(np.percentile(cpu[(s, v, p)], 50)), 2),
        "cpu_p95_ms": round(float(np.percentile(cpu[(s, v, p)], 95)), 2),
    }
    if fast in cpu:
        row["cpu_p50_over_fast"] = round(
            float(np.percentile(cpu[(s, v, p)], 50) / np.percentile(cpu[fast], 50)), 2
        )
    if v == "new" and (s, "base", p) in tops:
        row["same_top10_as_base"] = sum(
            a == b for a, b in zip(tops[(s, "new", p)], tops[(s, "base", p)], strict=True)
        )
    rows[f"{Path(args.stores[s]).parent.name} {v} {p}"] = row
print(json.dumps({"questions": len(questions), "load": os.getloadavg(), "rows": rows}, indent=1))
for memory, _ in opened.values():
    memory.close()
