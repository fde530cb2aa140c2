"""Recall of PostgreSQL dense search under a filter, against exact search, and what
the choice between the exact scan and the HNSW walk costs.

    python docs/experiments/scripts/postgres_filtered_recall.py load URL [ROWS] [--clusters N]
    python docs/experiments/scripts/postgres_filtered_recall.py recall URL ROWS LIMIT [VARIANTS]
    python docs/experiments/scripts/postgres_filtered_recall.py count URL ROWS
    git archive 2e30c9d anamnesis | tar -x -C /tmp/base      # the code before
    python docs/experiments/scripts/postgres_filtered_recall.py compare URL ROWS /tmp/base LIMIT
    python docs/experiments/scripts/postgres_filtered_recall.py drop URL [ROWS]

``load`` puts ``postgres_metadata_filters``' corpus (``ROWS``, default 200,000; one
tenant owns half the rows; ``kind=note`` on 30% of the rows, ``n`` 0..9, ``tag=urgent``
on 0.1%) into the schema ``bench_recall_<ROWS>`` (``_c<N>`` with ``--clusters N``:
``postgres_scale``'s vectors around N centres instead of 2,000; every mode takes the
option to pick the schema). ``recall``: for each filter of ``filters`` in the large
tenant, the exact top ``LIMIT`` and each walk variant of ``VARIANTS`` (comma-separated
names, default all): recall@LIMIT, recall@10, the gap between the walk's last distance
and exact's, p50/p95 ms (a walk short of the limit falls back to exact, timed).
``count``: per filter, the bounded count that chose the path before, and the planner's
estimate. ``compare``: the store's ``dense_search`` per filter, in the large tenant
and the 1% tenants, in alternating child processes of the old code and this
checkout's (two rounds each): p50/p95 ms and whether the result lists are identical.
Used by the study "PostgreSQL: dense search under a filter" (2026-11-27).
"""

from __future__ import annotations

import json
import statistics
import sys
import time
from datetime import timedelta
from typing import Any
from urllib.parse import quote

import numpy as np
import psycopg

sys.path.insert(0, __file__.rsplit("/", 1)[0])
import postgres_metadata_filters as meta  # noqa: E402

from anamnesis.bench import postgres_scale  # noqa: E402
from anamnesis.store.base import TURN_COLUMNS, Filters  # noqa: E402
from anamnesis.store.postgres import PostgresStore  # noqa: E402
from anamnesis.store.postgres.sql import filters_sql, scope_sql  # noqa: E402
from anamnesis.store.postgres.store import register_vector  # noqa: E402
from anamnesis.types import Scope  # noqa: E402

DIM = meta.DIM
QUERIES = 30


def filters(rows: int) -> dict[str, Filters]:
    """Filters in the large tenant, by the share of its rows they pass."""
    t0 = meta.Corpus(rows, DIM).t0
    mid = rows // 2

    def window(share: float) -> dict[str, Any]:
        return {
            "event_after": t0 + timedelta(seconds=mid),
            "event_before": t0 + timedelta(seconds=mid + int(rows * share)),
        }

    return {
        "none (100%)": Filters(),
        "role=user (50%)": Filters(role="user"),
        "kind=note (30%)": Filters(metadata={"kind": "note"}),
        "n=1 (10%)": Filters(metadata={"n": 1}),
        "time window (3%)": Filters(**window(0.03)),
        "n=1 + window (1%)": Filters(metadata={"n": 1}, **window(0.1)),
        "tag=urgent (0.1%)": Filters(metadata={"tag": "urgent"}),
    }


def condition(scope: Scope, wanted: Filters) -> tuple[str, list[Any]]:
    where, params = scope_sql(scope)
    extra, extra_params = filters_sql(wanted)
    return f"{where} AND {extra} AND e.embedding IS NOT NULL", [*params, *extra_params]


def exact(
    conn: Any, q: np.ndarray, cond: str, params: list[Any], limit: int
) -> list[tuple[str, float]]:
    return [
        (r[0], float(r[1]))
        for r in conn.execute(
            f"""SELECT e.id, e.embedding <=> %s FROM episodes e WHERE {cond}
                ORDER BY (e.embedding <=> %s) + 0, e.id LIMIT %s""",
            [q, *params, q, limit],
            prepare=False,
        ).fetchall()
    ]


def walk(
    conn: Any, q: np.ndarray, cond: str, params: list[Any], limit: int, variant: dict[str, Any]
) -> list[tuple[str, float]]:
    """The walk of ``dense_search`` with the variant's settings."""
    conn.execute(
        "SELECT set_config('hnsw.iterative_scan', %s, true), "
        "set_config('hnsw.ef_search', %s, true), "
        "set_config('hnsw.max_scan_tuples', %s, true)",
        (variant["mode"], str(max(variant["ef"], limit)), str(variant["tuples"])),
    )
    fetch = int(limit * variant.get("fetch", 1))
    sql = f"""WITH hits AS MATERIALIZED (
                SELECT e.id, e.embedding <=> %s AS distance, {TURN_COLUMNS}
                FROM episodes e WHERE {cond} ORDER BY distance LIMIT %s)
            SELECT id, distance FROM hits ORDER BY distance LIMIT %s"""
    rows = conn.execute(sql, [q, *params, fetch, limit], prepare=False).fetchall()
    return [(r[0], float(r[1])) for r in rows]


VARIANTS: dict[str, dict[str, Any]] = {
    "now: relaxed ef200 t20k": {"mode": "relaxed_order", "ef": 200, "tuples": 20_000},
    "relaxed ef400 t20k": {"mode": "relaxed_order", "ef": 400, "tuples": 20_000},
    "relaxed ef1000 t20k": {"mode": "relaxed_order", "ef": 1000, "tuples": 20_000},
    "strict ef200 t20k": {"mode": "strict_order", "ef": 200, "tuples": 20_000},
    "strict ef1000 t20k": {"mode": "strict_order", "ef": 1000, "tuples": 20_000},
    "relaxed ef200 t20k fetch2": {"mode": "relaxed_order", "ef": 200, "tuples": 20_000, "fetch": 2},
    "relaxed ef1000 t50k": {"mode": "relaxed_order", "ef": 1000, "tuples": 50_000},
    "relaxed ef1000 t100k": {"mode": "relaxed_order", "ef": 1000, "tuples": 100_000},
}


def recall(url: str, rows: int, limit: int, names: list[str]) -> None:
    """Recall@limit of each walk variant against exact, per filter, with latency; a walk
    that comes back short falls back to exact, as ``dense_search`` does (time included)."""
    corpus = meta.Corpus(rows, DIM)
    rng = np.random.default_rng(99)
    vectors = corpus.vectors(rng, QUERIES)
    scope = Scope(corpus.large)
    conn = psycopg.connect(schema_url(url, rows))
    register_vector(conn)
    out: dict[str, Any] = {}
    for fname, wanted in filters(rows).items():
        cond, params = condition(scope, wanted)
        n = conn.execute(f"SELECT count(*) FROM episodes e WHERE {cond}", params).fetchone()[0]
        truth, exact_s = [], []
        for q in vectors:
            started = time.perf_counter()
            truth.append(exact(conn, q, cond, params, limit))
            exact_s.append(time.perf_counter() - started)
            conn.commit()
        line = {"rows": n, "exact": meta.percentiles(exact_s)}
        spread = statistics.fmean(b[-1][1] - b[0][1] for b in truth if b)
        print(
            f"{fname:24s} rows {n:6d}  exact p50 {line['exact']['p50_ms']:7.1f} ms, "
            f"first {statistics.fmean(b[0][1] for b in truth if b):.3f} "
            f"{limit}th-first {spread:.3f}",
            flush=True,
        )
        for vname in names:
            variant = VARIANTS[vname]
            found, top10, gap, took, short = [], [], [], [], 0
            for q, best in zip(vectors, truth, strict=True):
                started = time.perf_counter()
                hits = walk(conn, q, cond, params, limit, variant)
                if len(hits) < min(limit, n):
                    short += 1
                    hits = exact(conn, q, cond, params, limit)
                took.append(time.perf_counter() - started)
                conn.commit()
                ids, best_ids = [h[0] for h in hits], [b[0] for b in best]
                found.append(len(set(ids) & set(best_ids)) / max(len(best_ids), 1))
                top10.append(len(set(ids[:10]) & set(best_ids[:10])) / max(len(best_ids[:10]), 1))
                if hits and best:
                    gap.append(hits[-1][1] - best[-1][1])
            cell = {
                "recall": round(statistics.fmean(found), 4),
                "min": round(min(found), 3),
                "recall10": round(statistics.fmean(top10), 4),
                "last_gap": round(statistics.fmean(gap or [0.0]), 5),
                "short": short,
                **meta.percentiles(took),
            }
            line[vname] = cell
            print(
                f"    {vname:28s} recall {cell['recall']:.4f} (min {cell['min']:.2f}) "
                f"@10 {cell['recall10']:.3f} gap {cell['last_gap']:.4f} "
                f"short {short:2d}  p50 {cell['p50_ms']:7.1f}  p95 {cell['p95_ms']:7.1f}",
                flush=True,
            )
        out[fname] = line
    conn.close()
    print(json.dumps(out))


def schema(rows: int) -> str:
    clusters = postgres_scale.CLUSTERS
    return f"bench_recall_{rows}" + ("" if clusters == 2000 else f"_c{clusters}")


def schema_url(url: str, rows: int) -> str:
    options = quote(f"-csearch_path={schema(rows)},public", safe="")
    return f"{url}{'&' if '?' in url else '?'}options={options}"


def load(url: str, rows: int) -> None:
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(f'DROP SCHEMA IF EXISTS "{schema(rows)}" CASCADE')
        conn.execute(f'CREATE SCHEMA "{schema(rows)}"')
    store = PostgresStore(schema_url(url, rows), dim=DIM, max_connections=4)
    try:
        postgres_scale._ingest(store, meta.Corpus(rows, DIM), schema_url(url, rows), True, 2, print)
    finally:
        store.close()


def count(url: str, rows: int) -> None:
    """Per filter: the bounded count that chooses the path (as ``dense_search`` runs it),
    the planner's estimate of the rows in scope and what asking for it costs."""
    corpus = meta.Corpus(rows, DIM)
    conn = psycopg.connect(schema_url(url, rows), autocommit=True)
    bound = 20_000
    scopes = {"large tenant": Scope(corpus.large), "1% tenant": Scope(corpus.small[3])}
    for sname, scope in scopes.items():
        for fname, wanted in filters(rows).items():
            where, params = scope_sql(scope)
            extra, extra_params = filters_sql(wanted)
            inner = f"SELECT 1 FROM episodes e WHERE {where} AND {extra}"
            allp = [*params, *extra_params]
            n = conn.execute(f"SELECT count(*) FROM ({inner}) AS s", allp).fetchone()[0]
            counted, estimated, estimate = [], [], 0.0
            for _ in range(7):
                started = time.perf_counter()
                conn.execute(
                    f"SELECT count(*) FROM ({inner} LIMIT %s) AS bounded",
                    [*allp, bound + 1],
                    prepare=False,
                ).fetchone()
                counted.append(time.perf_counter() - started)
                started = time.perf_counter()
                plan = conn.execute(f"EXPLAIN (FORMAT JSON) {inner}", allp, prepare=False)
                estimate = float(plan.fetchone()[0][0]["Plan"]["Plan Rows"])
                estimated.append(time.perf_counter() - started)
            print(
                f"{sname:13s} {fname:24s} rows {n:6d} estimate {estimate:8.0f}  "
                f"bounded count p50 {1000 * sorted(counted)[3]:6.1f} ms  "
                f"estimate p50 {1000 * sorted(estimated)[3]:5.2f} ms",
                flush=True,
            )
    conn.close()


def paths(url: str, rows: int, limit: int) -> dict[str, Any]:
    """This process's code: the store's dense search per filter, in the large tenant and
    the 1% tenants, after warm-up; p50/p95 ms, the result lists and the statements."""
    corpus = meta.Corpus(rows, DIM)
    rng = np.random.default_rng(99)
    vectors = corpus.vectors(rng, QUERIES)
    store = PostgresStore(schema_url(url, rows), dim=DIM, max_connections=2)
    scopes = {"large tenant": [Scope(corpus.large)], "1% tenants": [Scope(t) for t in corpus.small]}
    out: dict[str, Any] = {"load_average": open("/proc/loadavg").read().split()[0], "cells": {}}
    try:
        for sname, group in scopes.items():
            for fname, wanted in filters(rows).items():
                for i, q in enumerate(vectors[:5]):
                    store.dense_search(q, group[i % len(group)], wanted, limit)
                took, found = [], []
                for i, q in enumerate(vectors):
                    started = time.perf_counter()
                    hits = store.dense_search(q, group[i % len(group)], wanted, limit)
                    took.append(time.perf_counter() - started)
                    found.append([(h.episode_id, round(h.score, 6)) for h in hits])
                out["cells"][f"{sname} / {fname}"] = {**meta.percentiles(took), "found": found}
    finally:
        store.close()
    return out


def compare(url: str, old_src: str, rows: int, limit: int) -> None:
    """Alternate rounds of the code in ``old_src`` and this checkout's, two each."""
    import os
    import subprocess
    from pathlib import Path

    rounds = []
    for state in ("old", "new", "old", "new"):
        code = old_src if state == "old" else str(Path.cwd())
        args = [sys.executable, __file__, "paths", url, str(rows), str(limit)]
        if postgres_scale.CLUSTERS != 2000:
            args += ["--clusters", str(postgres_scale.CLUSTERS)]
        child = subprocess.run(
            args,
            env={**os.environ, "PYTHONPATH": code},
            capture_output=True,
            text=True,
            check=True,
        )
        rounds.append((state, json.loads(child.stdout.splitlines()[-1])))
    cells = list(rounds[0][1]["cells"])
    print("loads:", [r["load_average"] for _, r in rounds])
    for cell in cells:
        figures = "  ".join(
            f"{state} {r['cells'][cell]['p50_ms']:6.1f}/{r['cells'][cell]['p95_ms']:6.1f}"
            for state, r in rounds
        )
        old, new = rounds[0][1]["cells"][cell]["found"], rounds[1][1]["cells"][cell]["found"]
        same = sum(a == b for a, b in zip(old, new, strict=True))
        print(f"  {cell:40s} {figures}  identical {same}/{len(old)}")


def drop(url: str, rows: int) -> None:
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(f'DROP SCHEMA IF EXISTS "{schema(rows)}" CASCADE')


def main() -> None:
    if "--clusters" in sys.argv:
        at = sys.argv.index("--clusters")
        postgres_scale.CLUSTERS = int(sys.argv[at + 1])
        del sys.argv[at : at + 2]
    mode, url = sys.argv[1], sys.argv[2]
    rows = int(sys.argv[3]) if len(sys.argv) > 3 else 200_000
    if mode == "load":
        load(url, rows)
    elif mode == "recall":
        names = sys.argv[5].split(",") if len(sys.argv) > 5 else list(VARIANTS)
        recall(url, rows, int(sys.argv[4]), names)
    elif mode == "count":
        count(url, rows)
    elif mode == "paths":
        print(json.dumps(paths(url, rows, int(sys.argv[4]))))
    elif mode == "compare":
        compare(url, sys.argv[4], rows, int(sys.argv[5]))
    elif mode == "drop":
        drop(url, rows)
    else:
        raise SystemExit(__doc__)


if __name__ == "__main__":
    main()
