"""Metadata-filtered searches on PostgreSQL: the code before the metadata index
against the code with it, in alternating rounds on one kept store.

    git archive 97edd3e anamnesis | tar -x -C /tmp/base      # the code before
    python docs/experiments/scripts/postgres_metadata_filters.py load URL [ROWS]
    python docs/experiments/scripts/postgres_metadata_filters.py compare URL /tmp/base [ROWS]
    python docs/experiments/scripts/postgres_metadata_filters.py writes URL [ROWS]

``load`` puts ``ROWS`` (default 200,000) synthetic episodes of ``postgres_scale``'s
corpus (one tenant owns half the rows, 50 tenants 1% each) into the schema
``bench_meta_<ROWS>``, each with the metadata ``{"n": row % 10, "kind": "note" |
"chat", "tag": "urgent" | "none"}``: ``kind`` is ``note`` on 30% of the rows (a common
value), ``tag`` is ``urgent`` on 0.1% (a rare one). ``compare`` runs ``measure`` in
child processes, alternating the code in ``OLD_SRC`` without the index (dropped) and
this checkout's code with it (built and analyzed when missing, timed): in each, the
store's dense search and lexical search (limit 50) for the same queries in the large
tenant and in the 1% tenants, unfiltered and with each filter. Reported per round
and cell: p50/p95/mean ms; per cell, whether the result lists (ids and scores) of the
two codes are identical; the index's build time and size; the indexes the plans of
the unfiltered statements read (the new index should not change them). ``writes``
times batches of 1,000 rows inserted with and without the index. Used by the study
"PostgreSQL metadata filters" (2026-11-27).
"""

from __future__ import annotations

import dataclasses
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any
from urllib.parse import quote

import numpy as np
import psycopg

from anamnesis.bench import postgres_scale
from anamnesis.store.base import Filters
from anamnesis.store.postgres import PostgresStore
from anamnesis.store.postgres import search as postgres_search
from anamnesis.types import Episode, Scope

DIM = 384
LIMIT = 50
QUERIES = 40
ROUNDS = ("without", "with", "without", "with")
#: The index, spelled out: the code before it does not know it.
INDEX = "episodes_user_metadata"
CREATE_INDEX = (
    f"CREATE INDEX {INDEX} ON episodes USING gin (user_id, (metadata::jsonb) jsonb_path_ops)"
)
FILTERS: dict[str, dict[str, Any]] = {
    "none": {},
    "rare (tag=urgent, 0.1%)": {"tag": "urgent"},
    "common (kind=note, 30%)": {"kind": "note"},
}


class Corpus(postgres_scale._Corpus):
    """The scale bench's corpus, with a common and a rare metadata value."""

    def batch(self, start: int, n: int) -> tuple[list[Episode], np.ndarray]:
        episodes, vectors = super().batch(start, n)
        tagged = []
        for offset, episode in enumerate(episodes):
            row = start + offset
            metadata = {
                "n": row % 10,
                "kind": "note" if row % 10 < 3 else "chat",
                "tag": "urgent" if row % 1000 == 7 else "none",
            }
            tagged.append(dataclasses.replace(episode, metadata=metadata))
        return tagged, vectors


def percentiles(samples: list[float]) -> dict[str, float]:
    ordered = sorted(samples)
    return {
        "p50_ms": round(1000 * ordered[len(ordered) // 2], 2),
        "p95_ms": round(1000 * ordered[int(len(ordered) * 0.95)], 2),
        "mean_ms": round(1000 * statistics.fmean(ordered), 2),
    }


def indexes_read(plan: Any) -> set[str]:
    if isinstance(plan, dict):
        found = {plan["Index Name"]} if "Index Name" in plan else set()
        return found.union(*(indexes_read(v) for v in plan.values()))
    if isinstance(plan, list):
        return set().union(*(indexes_read(v) for v in plan))
    return set()


class Recording:
    """A connection that keeps each statement it runs."""

    def __init__(self, conn: Any) -> None:
        self.conn, self.statements = conn, []

    def execute(self, query: str, params: Any = None, **kwargs: Any) -> Any:
        self.statements.append((query, params))
        return self.conn.execute(query, params, **kwargs)


def plans(store: PostgresStore, scope: Scope, vector: np.ndarray, terms: list[str]) -> list:
    """The indexes read by each statement of an unfiltered lexical and dense search."""
    out = []
    with store._transaction() as conn:
        recording = Recording(conn)
        postgres_search.lexical_search(recording, terms, scope, Filters(), LIMIT)  # type: ignore[arg-type]
        postgres_search.dense_search(recording, vector, scope, Filters(), LIMIT)  # type: ignore[arg-type]
        for query, params in recording.statements:
            if query.lstrip().upper().startswith(("SELECT", "WITH")) and "episodes e" in query:
                explained = conn.execute(f"EXPLAIN (FORMAT JSON) {query}", params).fetchone()
                out.append(sorted(indexes_read(explained[0])))  # type: ignore[index]
    return out


def schema_url(url: str, rows: int) -> str:
    options = quote(f"-csearch_path=bench_meta_{rows},public", safe="")
    return f"{url}{'&' if '?' in url else '?'}options={options}"


def load(url: str, rows: int) -> None:
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(f'DROP SCHEMA IF EXISTS "bench_meta_{rows}" CASCADE')
        conn.execute(f'CREATE SCHEMA "bench_meta_{rows}"')
    store = PostgresStore(schema_url(url, rows), dim=DIM, max_connections=4)
    try:
        postgres_scale._ingest(store, Corpus(rows, DIM), schema_url(url, rows), True, 2, print)
    finally:
        store.close()


def queries(rows: int) -> dict[str, list[tuple[Scope, np.ndarray, list[str]]]]:
    corpus = Corpus(rows, DIM)
    rng = np.random.default_rng(99)
    groups = {"large tenant": [Scope(corpus.large)], "1% tenants": [Scope(t) for t in corpus.small]}
    return {
        name: [
            (group[i % len(group)], corpus.vectors(rng, 1)[0], corpus.query_terms(rng))
            for i in range(QUERIES)
        ]
        for name, group in groups.items()
    }


def set_index(admin: psycopg.Connection[Any], present: bool) -> tuple[float, int]:
    """Drop the index, or build and analyze it if missing: build seconds, bytes."""
    exists = admin.execute("SELECT to_regclass(%s)", (INDEX,)).fetchone()[0]  # type: ignore[index]
    if not present:
        admin.execute(f"DROP INDEX IF EXISTS {INDEX}")
        return 0.0, 0
    built = 0.0
    if exists is None:
        started = time.perf_counter()
        admin.execute(CREATE_INDEX)
        built = time.perf_counter() - started
        admin.execute("ANALYZE episodes")
    size = admin.execute("SELECT pg_relation_size(%s::regclass)", (INDEX,)).fetchone()[0]  # type: ignore[index]
    return built, size


def measure(url: str, state: str, rows: int) -> dict[str, Any]:
    """One round: this process's code, with or without the index."""
    admin = psycopg.connect(schema_url(url, rows), autocommit=True)
    built, size = set_index(admin, state == "with")
    store = PostgresStore(schema_url(url, rows), dim=DIM, max_connections=4)
    present = admin.execute("SELECT to_regclass(%s)", (INDEX,)).fetchone()[0]  # type: ignore[index]
    assert (present is not None) == (state == "with"), "the code under test built the index"
    report: dict[str, Any] = {
        "state": state,
        "code": str(Path(postgres_search.__file__).parents[3]),
        "build_seconds": round(built, 2),
        "index_bytes": size,
        "load_average": open("/proc/loadavg").read().split()[0],
        "cells": {},
        "results": {},
        "unfiltered_plans": {},
    }
    try:
        for scope_name, plan in queries(rows).items():
            s, v, t = plan[0]
            report["unfiltered_plans"][scope_name] = plans(store, s, v, t)
            for filter_name, wanted in FILTERS.items():
                filters = Filters(metadata=wanted)
                for s, v, t in plan[:5]:  # warm the cache
                    store.dense_search(v, s, filters, LIMIT)
                    store.lexical_search(t, s, filters, LIMIT)
                dense, lexical, found = [], [], []
                for s, v, t in plan:
                    started = time.perf_counter()
                    d = store.dense_search(v, s, filters, LIMIT)
                    middle = time.perf_counter()
                    lx = store.lexical_search(t, s, filters, LIMIT)
                    dense.append(middle - started)
                    lexical.append(time.perf_counter() - middle)
                    found.append(
                        [
                            [(c.episode_id, round(c.score, 6)) for c in d],
                            [(c.episode_id, round(c.score, 6)) for c in lx],
                        ]
                    )
                cell = f"{scope_name} / {filter_name}"
                report["cells"][cell] = {
                    "dense": percentiles(dense),
                    "lexical": percentiles(lexical),
                }
                report["results"][cell] = found
    finally:
        store.close()
        admin.close()
    return report


def compare(url: str, old_src: str, rows: int) -> None:
    """Alternate rounds of the old code without the index and this code with it."""
    rounds = []
    for state in ROUNDS:
        code = old_src if state == "without" else str(Path.cwd())
        child = subprocess.run(
            [sys.executable, __file__, "measure", url, state, str(rows)],
            env={**os.environ, "PYTHONPATH": code},
            capture_output=True,
            text=True,
            check=True,
        )
        report = json.loads(child.stdout.splitlines()[-1])
        rounds.append(report)
        print(
            f"round {len(rounds)}: {state} the index, code {report['code']}, load "
            f"{report['load_average']}, built {report['build_seconds']}s, "
            f"{report['index_bytes']:,} B"
        )
        for cell, figures in report["cells"].items():
            print(
                f"  {cell:42s} "
                + "  ".join(
                    f"{k} {v['p50_ms']:7.1f} / {v['p95_ms']:7.1f}" for k, v in figures.items()
                )
            )
    before, after = rounds[0], rounds[1]
    for cell in before["results"]:
        pairs = list(zip(before["results"][cell], after["results"][cell], strict=True))
        same_dense = sum(b[0] == a[0] for b, a in pairs)
        same_lexical = sum(b[1] == a[1] for b, a in pairs)
        shared = statistics.fmean(
            [len({e for e, _ in b[0]} & {e for e, _ in a[0]}) / len(b[0]) for b, a in pairs if b[0]]
            or [1.0]
        )
        print(
            f"  {cell:42s} identical lists: dense {same_dense}/{len(pairs)} "
            f"(ids shared {shared:.3f}), lexical {same_lexical}/{len(pairs)}"
        )
    print("unfiltered plans, old code without:", before["unfiltered_plans"])
    print("unfiltered plans, new code with:   ", after["unfiltered_plans"])


def writes(url: str, rows: int) -> None:
    """Insert batches of 1,000 rows into a new tenant, alternating without and with."""
    admin = psycopg.connect(schema_url(url, rows), autocommit=True)
    store = PostgresStore(schema_url(url, rows), dim=DIM, max_connections=4)
    corpus = Corpus(rows, DIM)
    inserts: dict[str, list[float]] = {"without": [], "with": []}
    try:
        drop_writes(admin, store)
        for n, state in enumerate(ROUNDS * 2):
            set_index(admin, state == "with")
            episodes, vectors = corpus.batch(rows + n * 1000, 1000)
            episodes = [dataclasses.replace(e, user_id="tenant-writes") for e in episodes]
            started = time.perf_counter()
            store.insert_episodes(episodes, vectors)
            inserts[state].append(round(time.perf_counter() - started, 2))
        print("insert 1,000 rows (s):", inserts)
        drop_writes(admin, store)
        set_index(admin, True)
    finally:
        store.close()
        admin.close()


def drop_writes(admin: psycopg.Connection[Any], store: PostgresStore) -> None:
    """The store as loaded: without the rows ``writes`` inserted."""
    admin.execute(
        "DELETE FROM episode_times t USING episodes e "
        "WHERE e.id = t.episode_id AND e.user_id = 'tenant-writes'"
    )
    admin.execute("DELETE FROM episodes WHERE user_id = 'tenant-writes'")
    store.rebuild_lexical_statistics()  # rows deleted with plain SQL


def main() -> None:
    mode, url = sys.argv[1], sys.argv[2]
    if mode == "load":
        load(url, int(sys.argv[3]) if len(sys.argv) > 3 else 200_000)
    elif mode == "measure":
        print(json.dumps(measure(url, sys.argv[3], int(sys.argv[4]))))
    elif mode == "compare":
        compare(url, sys.argv[3], int(sys.argv[4]) if len(sys.argv) > 4 else 200_000)
    elif mode == "writes":
        writes(url, int(sys.argv[3]) if len(sys.argv) > 3 else 200_000)
    else:
        raise SystemExit(__doc__)


if __name__ == "__main__":
    main()
