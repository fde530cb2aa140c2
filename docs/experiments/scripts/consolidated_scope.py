"""A consolidated scope, before and after a change (study "A consolidated scope").

    python docs/experiments/scripts/consolidated_scope.py build SIZE STORE.db
    python docs/experiments/scripts/consolidated_scope.py consolidate STORE.db
    python docs/experiments/scripts/consolidated_scope.py search STORE.db USER QUERIES OUT.json

``build``: one user (``u``) with the first SIZE distinct LongMemEval S turns, ``edge``
embedder, not consolidated (as ``scale_default.py`` fills its store). ``consolidate``:
consolidates user ``u`` of STORE (run it on a copy), prints its CPU and wall time and a
digest of the results that ignores what is not deterministic (fact ids, and the order
of a profile's facts that tie on predicate and start). ``search``: the first QUERIES
LongMemEval questions asked of ``fast`` then of the default, interleaved, 50 hits with
``explain`` (as ``scale_default.py`` does), p50 thread CPU time of each, and each
search's hits (ids and scores to 9 digits) written to OUT to compare two runs.
"""

from __future__ import annotations

import hashlib
import json
import re
import statistics
import sys
import time
from pathlib import Path

from scale_default import distinct_turns  # the script beside this one

from anamnesis import Memory
from anamnesis.bench import datasets
from anamnesis.bench.presets import BENCH_PRESETS
from anamnesis.embed import get_embedder
from anamnesis.retrieve.pipeline import Retriever
from anamnesis.store.base import Filters
from anamnesis.types import Scope

DATA = Path(__file__).parents[3] / ".." / "shared" / "data" / "longmemeval_s_dev.json.gz"


def build(size: int, path: str) -> None:
    with Memory(path=path, embedder=get_embedder("edge")) as memory:
        memory.add_many(distinct_turns(str(DATA), size), user_id="u")


def consolidate(path: str) -> None:
    with Memory(path=path, embedder=get_embedder("edge")) as memory:
        wall, cpu = time.perf_counter(), time.process_time()
        memory.consolidate(user_id="u")
        wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
        parts = []
        for row, vector in memory.store.find_derived(Scope("u")):
            if row.kind == "profile":
                current, _, before = row.text.partition(". Previously: ")
                entries = [
                    {k: v for k, v in e.items() if k != "fact_id"} for e in row.body["entries"]
                ]
                parts.append(
                    json.dumps(
                        [
                            row.id,
                            sorted(current.split("; ")),
                            sorted(before.split("; ")),
                            sorted(json.dumps(e, sort_keys=True) for e in entries),
                            sorted(row.provenance),
                            str(row.start_time),
                        ],
                    )
                )
            else:
                rounded = None if vector is None else vector.round(6).tolist()
                parts.append(
                    json.dumps(
                        [
                            row.id,
                            row.text,
                            row.body,
                            row.provenance,
                            str(row.start_time),
                            str(row.end_time),
                            row.fingerprint,
                            rounded,
                        ],
                        default=str,
                    )
                )
        facts = memory.facts(user_id="u", limit=10**6, include_superseded=True)
        for fact in facts:
            text = re.sub(r"fact_[0-9a-z]+", "F", repr(fact))
            parts.append(
                re.sub(r"(recorded_at|consolidated_at)=datetime\.datetime\([^)]*\)", "", text)
            )
    digest = hashlib.sha256("\n".join(sorted(parts)).encode()).hexdigest()[:16]
    print(
        f"consolidate CPU {cpu:.1f} s, wall {wall:.1f} s; {len(parts) - len(facts)} derived "
        f"items, {len(facts)} facts, digest {digest}"
    )


def search(path: str, user: str, queries: int, out: str) -> None:
    dataset = datasets.load("longmemeval", str(DATA))
    questions = [case.questions[0].text for case in dataset.cases[:queries]]
    scope = Scope(user)
    with Memory(path=path, embedder=get_embedder("edge")) as memory:
        retrievers = {
            name: Retriever(memory.store, memory.embedder, BENCH_PRESETS[name])
            for name in ("fast", "default")
        }
        for retriever in retrievers.values():
            retriever.search("warm up", scope, Filters(), 1, False)
        cpu: dict[str, list[float]] = {name: [] for name in retrievers}
        hits: dict[str, list] = {name: [] for name in retrievers}
        for question in questions:
            for name, retriever in retrievers.items():
                start = time.thread_time()
                found = retriever.search(question, scope, Filters(), 50, True)
                cpu[name].append(time.thread_time() - start)
                hits[name].append([(h.episode.id, round(h.score, 9)) for h in found])
    Path(out).write_text(json.dumps(hits))
    p50 = {name: statistics.median(times) * 1e3 for name, times in cpu.items()}
    print(
        f"p50 CPU ms: fast {p50['fast']:.2f}, default {p50['default']:.2f} "
        f"({p50['default'] / p50['fast']:.2f}×)"
    )


if __name__ == "__main__":
    command, *args = sys.argv[1:]
    if command == "build":
        build(int(args[0]), args[1])
    elif command == "consolidate":
        consolidate(args[0])
    else:
        search(args[0], args[1], int(args[2]), args[3])
