"""Dense recall and latency of one tenant of a kept postgres_scale schema, by HNSW setting.

    python docs/experiments/scripts/postgres_dense_grid.py URL SCHEMA QUERIES[:SEED] TENANT \
        relaxed_order:100:10 relaxed_order:400:100 ...

Each setting is ``iterative_scan:ef_search:limit``. The query vectors are drawn as
postgres_scale draws them (seeded, 1234 unless SEED is given, so every run and schema
gets the same ones); the
reference is the exact top 100 of the tenant (a scan of every one of its vectors),
computed once per run. Reported per setting: recall@limit against that reference, and
p50/p95 of the approximate query alone, with the settings applied by SET LOCAL as the
store applies them. Used by the study "PostgreSQL at 1M" (2026-11-26).
"""

from __future__ import annotations

import statistics
import sys
import time

import numpy as np
import psycopg

from anamnesis.bench.postgres_scale import _Corpus
from anamnesis.store.postgres.vector import register_vector


def main() -> None:
    url, schema, queries, tenant, *settings = sys.argv[1:]
    count, _, seed = queries.partition(":")
    vectors = _Corpus(1_000_000, 384).vectors(np.random.default_rng(int(seed or 1234)), int(count))
    with psycopg.connect(url, options=f"-csearch_path={schema},public") as conn:
        register_vector(conn)
        exact = [
            [
                r[0]
                for r in conn.execute(
                    "SELECT id FROM episodes e WHERE user_id = %s "
                    "ORDER BY (embedding <=> %s) + 0, id LIMIT 100",
                    (tenant, vector),
                )
            ]
            for vector in vectors
        ]
        for setting in settings:
            mode, ef_search, limit_text = setting.split(":")
            limit = int(limit_text)
            times, hits = [], 0
            for vector, reference in zip(vectors, exact, strict=True):
                with conn.transaction():
                    conn.execute(
                        "SELECT set_config('hnsw.iterative_scan', %s, true), "
                        "set_config('hnsw.ef_search', %s, true)",
                        (mode, ef_search),
                    )
                    start = time.perf_counter()
                    found = conn.execute(
                        "SELECT e.id FROM episodes e WHERE user_id = %s "
                        "AND e.embedding IS NOT NULL ORDER BY e.embedding <=> %s LIMIT %s",
                        (tenant, vector, limit),
                    ).fetchall()
                    times.append(time.perf_counter() - start)
                hits += len({r[0] for r in found} & set(reference[:limit]))
            ordered = sorted(times)
            print(
                f"{setting}: recall@{limit} {hits / (limit * len(vectors)):.3f}, "
                f"p50 {1000 * statistics.median(ordered):.1f} ms, "
                f"p95 {1000 * ordered[int(0.95 * len(ordered))]:.1f} ms",
                flush=True,
            )


if __name__ == "__main__":
    main()
