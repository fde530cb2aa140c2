"""Scale benchmark of the PostgreSQL store: bulk ingest, then search latency by tenant size.

    python -m anamnesis.bench.postgres_scale --url postgresql://... --rows 100000

The store is measured in isolation from the embedder: vectors are synthetic (random
unit vectors around ``CLUSTERS`` random centres, so that nearest neighbours exist as
they do for real embeddings), and text is drawn from the BERT vocabulary with a Zipf
distribution. Rows are spread over tenants the way a multi-tenant service sees them,
interleaved in time: one large tenant owns ``LARGE_TENANT_SHARE`` of the rows and
``SMALL_TENANTS`` tenants own 1% each. Everything goes into a fresh schema
(``bench_<rows>``) that is dropped unless ``--keep`` is given.

Reported per scenario: p50/p95/mean latency of dense search, lexical search and a full
store round (lexical + dense + fetching the top 10 + their neighbours, i.e. what
``Memory.search`` asks of the store, minus embedding the query), single client, warm
cache; and recall@10 of dense search against exact search. ``run_postgres_bench`` is
the entry point for the benchmark harness.
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import json
import statistics
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime, timedelta
from importlib import resources
from typing import Any
from urllib.parse import quote

import numpy as np

from ..store.base import Filters
from ..store.postgres import PostgresStore
from ..types import Episode, Scope

#: Share of all rows owned by the one large tenant; the rest are 1% tenants.
LARGE_TENANT_SHARE = 0.5
#: How many tenants own 1% of the rows each.
SMALL_TENANTS = 50
#: Cluster centres of the synthetic vectors, and the noise around them.
CLUSTERS = 2000
CLUSTER_NOISE = 0.6
#: Candidates per channel, as SearchConfig.candidates.
CANDIDATES = 50
INSERT_BATCH = 1000


@dataclass
class BenchResult:
    """What one run measured."""

    rows: int
    dim: int
    writers: int
    ingest_seconds: float
    ingest_rows_per_second: float
    bulk: bool
    index_build_seconds: float
    analyze_vacuum_seconds: float
    table_bytes: int
    searches: dict[str, dict[str, float]] = field(default_factory=dict)
    recall_at_10: dict[str, float] = field(default_factory=dict)
    server: str = ""


def _vocabulary() -> list[str]:
    text = resources.files("anamnesis").joinpath("data/bert-base-uncased-vocab.txt").read_text()
    return [w for w in text.split() if w.isalpha() and w.isascii() and len(w) >= 3]


class _Corpus:
    """Deterministic synthetic episodes: text, vectors and tenants."""

    def __init__(self, rows: int, dim: int, seed: int = 7) -> None:
        self.rows, self.dim = rows, dim
        rng = np.random.default_rng(seed)
        self.words = np.array(_vocabulary())
        ranks = np.arange(1, len(self.words) + 1)
        self.word_p = (1 / ranks) / (1 / ranks).sum()
        rng.shuffle(self.words)
        self.centres = rng.normal(size=(CLUSTERS, dim)).astype(np.float32)
        self.centres /= np.linalg.norm(self.centres, axis=1, keepdims=True)
        self.small = [f"tenant{n:03d}" for n in range(SMALL_TENANTS)]
        self.large = "tenant-large"
        share = (1 - LARGE_TENANT_SHARE) / SMALL_TENANTS
        self.tenant_p = np.array([LARGE_TENANT_SHARE] + [share] * SMALL_TENANTS)
        self.tenant_p /= self.tenant_p.sum()
        self.t0 = datetime(2024, 1, 1, tzinfo=UTC)

    def vectors(self, rng: np.random.Generator, n: int) -> np.ndarray:
        centres = self.centres[rng.integers(0, CLUSTERS, n)]
        noise = rng.normal(size=(n, self.dim)).astype(np.float32) / np.sqrt(self.dim)
        out = centres + CLUSTER_NOISE * noise
        return out / np.linalg.norm(out, axis=1, keepdims=True)

    def batch(self, start: int, n: int) -> tuple[list[Episode], np.ndarray]:
        rng = np.random.default_rng(start + 1)
        tenants = [self.large, *self.small]
        owner = rng.choice(len(tenants), size=n, p=self.tenant_p)
        lengths = rng.integers(8, 30, n)
        words = rng.choice(len(self.words), size=int(lengths.sum()), p=self.word_p)
        episodes, offset = [], 0
        for i in range(n):
            text = " ".join(self.words[words[offset : offset + lengths[i]]])
            offset += lengths[i]
            row = start + i
            when = self.t0 + timedelta(seconds=row)
            user = tenants[owner[i]]
            episodes.append(
                Episode(
                    id=f"bench_{row:09d}",
                    user_id=user,
                    agent_id=None,
                    session_id=f"{user}-s{row // 200}",
                    role="user" if row % 2 else "assistant",
                    speaker=None,
                    content=text,
                    modality="text",
                    event_time=when,
                    recorded_at=when,
                    metadata={"n": row % 10},
                    content_hash=f"bench-{row}",
                    turn_index=row,
                )
            )
        return episodes, self.vectors(rng, n)

    def query_terms(self, rng: np.random.Generator) -> list[str]:
        # Mid-frequency words, as content words of a question are.
        return [str(w) for w in self.words[rng.integers(50, 3000, 3)]]


def _percentiles(samples: list[float]) -> dict[str, float]:
    ordered = sorted(samples)
    return {
        "p50_ms": 1000 * ordered[len(ordered) // 2],
        "p95_ms": 1000 * ordered[min(len(ordered) - 1, int(len(ordered) * 0.95))],
        "mean_ms": 1000 * statistics.fmean(ordered),
        "n": len(ordered),
    }


def _on_store(fn: Callable[..., Any], store: Any, args: tuple[Any, ...]) -> Any:
    """``fn(store, *args)``: one timed call of a plan."""
    return fn(store, *args)


def _timed(fn: Callable[[Any], Any], plan: list[Any]) -> list[float]:
    out = []
    for args in plan:
        start = time.perf_counter()
        fn(args)
        out.append(time.perf_counter() - start)
    return out


def _dense(store: PostgresStore, scope: Scope, vector: np.ndarray, terms: list[str]) -> None:
    store.dense_search(vector, scope, Filters(), CANDIDATES)


def _lexical(store: PostgresStore, scope: Scope, vector: np.ndarray, terms: list[str]) -> None:
    store.lexical_search(terms, scope, Filters(), CANDIDATES)


def _store_round(store: PostgresStore, scope: Scope, vector: np.ndarray, terms: list[str]) -> None:
    """What Memory.search asks of the store, minus embedding the query."""
    found = store.lexical_search(terms, scope, Filters(), CANDIDATES)
    found += store.dense_search(vector, scope, Filters(), CANDIDATES)
    top = list(dict.fromkeys(c.episode_id for c in found))[:10]
    store.neighbours(store.get_episodes(top, scope), 1)


def _ingest(
    store: PostgresStore,
    corpus: _Corpus,
    schema_url: str,
    bulk: bool,
    writers: int,
    log: Callable[[str], None],
) -> tuple[float, float, float]:
    """Load the corpus; returns seconds for ingest (with index build), build, VACUUM."""
    import psycopg

    rows = corpus.rows
    mode = "bulk_load (index built after)" if bulk else "live HNSW index"
    log(f"ingesting {rows:,} rows, {writers} writers, batches of {INSERT_BATCH}, {mode}")
    started = time.perf_counter()
    done = 0
    index_build = 0.0

    def load(start: int) -> int:
        episodes, vectors = corpus.batch(start, min(INSERT_BATCH, rows - start))
        store.insert_episodes(episodes, vectors)
        return len(episodes)

    with store.bulk_load(build_memory="6GB") if bulk else contextlib.nullcontext():
        with ThreadPoolExecutor(max_workers=writers) as pool:
            for n in pool.map(load, range(0, rows, INSERT_BATCH)):
                done += n
                if done % (rows // 10 or 1) < INSERT_BATCH:
                    elapsed = time.perf_counter() - started
                    log(f"  {done:,} rows, {done / elapsed:,.0f} rows/s")
        index_build = time.perf_counter()
        log("building the HNSW index" if bulk else "loaded")
    index_build = time.perf_counter() - index_build
    ingest = time.perf_counter() - started
    started = time.perf_counter()
    with psycopg.connect(schema_url, autocommit=True) as conn:
        conn.execute("VACUUM (ANALYZE) episodes")
    maintenance = time.perf_counter() - started
    rate = rows / ingest
    log(
        f"ingest: {rate:,.0f} rows/s overall ({ingest:.0f}s, of which index build "
        f"{index_build:.0f}s); VACUUM ANALYZE {maintenance:.1f}s"
    )
    return ingest, index_build, maintenance


def run_postgres_bench(
    url: str,
    *,
    rows: int = 100_000,
    dim: int = 384,
    writers: int = 4,
    queries: int = 200,
    keep: bool = False,
    bulk: bool = False,
    reuse: bool = False,
    log: Callable[[str], None] = print,
) -> BenchResult:
    """Load ``rows`` synthetic episodes into a fresh schema and measure ingest and search.

    With ``bulk=True`` the load runs inside ``PostgresStore.bulk_load`` (HNSW index
    built once at the end, included in the ingest time); otherwise every row goes
    into the live index, as ``Memory.add`` does. With ``reuse=True`` a schema kept
    by an earlier run (``keep=True``) is searched again without reloading it.
    """
    import psycopg

    from ..store.postgres import search as postgres_search

    schema = f"bench_{rows}"
    with psycopg.connect(url, autocommit=True) as conn:
        reusing = (
            reuse
            and conn.execute(
                "SELECT 1 FROM pg_tables WHERE schemaname = %s AND tablename = 'episodes'",
                (schema,),
            ).fetchone()
            is not None
        )
        if not reusing:
            conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')
            conn.execute(f'CREATE SCHEMA "{schema}"')
        server = conn.execute("SELECT version()").fetchone()[0]  # type: ignore[index]
    options = quote(f"-csearch_path={schema},public", safe="")
    schema_url = f"{url}{'&' if '?' in url else '?'}options={options}"
    store = PostgresStore(schema_url, dim=dim, max_connections=writers + 2)
    corpus = _Corpus(rows, dim)
    try:
        ingest = index_build = maintenance = float("nan")
        if not reusing:
            ingest, index_build, maintenance = _ingest(
                store, corpus, schema_url, bulk, writers, log
            )
        result = BenchResult(
            rows=rows,
            dim=dim,
            writers=writers,
            ingest_seconds=ingest,
            ingest_rows_per_second=rows / ingest,
            bulk=bulk,
            index_build_seconds=index_build,
            analyze_vacuum_seconds=maintenance,
            table_bytes=store.stats(None)["table_bytes"],
            server=server,
        )

        rng = np.random.default_rng(99)
        scenarios = {
            "1% tenant": [Scope(t) for t in corpus.small],
            f"{LARGE_TENANT_SHARE:.0%} tenant": [Scope(corpus.large)],
        }
        for name, scopes in scenarios.items():
            plan = [
                (scopes[i % len(scopes)], corpus.vectors(rng, 1)[0], corpus.query_terms(rng))
                for i in range(queries)
            ]
            for scope, vector, terms in plan[:20]:  # warm the cache
                store.dense_search(vector, scope, Filters(), CANDIDATES)
                store.lexical_search(terms, scope, Filters(), CANDIDATES)
            for label, fn in (
                ("dense", _dense),
                ("lexical", _lexical),
                ("store round", _store_round),
            ):
                samples = _timed(functools.partial(_on_store, fn, store), plan)
                result.searches[f"{name}: {label}"] = _percentiles(samples)
                log(f"  {name} {label}: {result.searches[f'{name}: {label}']}")

            hits = total = 0
            saved = postgres_search.EXACT_SCAN_MAX_ROWS
            for scope, vector, _ in plan[:50]:
                approx = store.dense_search(vector, scope, Filters(), 10)
                postgres_search.EXACT_SCAN_MAX_ROWS = rows + 1
                try:
                    exact = store.dense_search(vector, scope, Filters(), 10)
                finally:
                    postgres_search.EXACT_SCAN_MAX_ROWS = saved
                hits += len({c.episode_id for c in approx} & {c.episode_id for c in exact})
                total += len(exact)
            result.recall_at_10[name] = hits / total
            log(f"  {name} dense recall@10 vs exact: {hits / total:.3f}")
        return result
    finally:
        store.close()
        if not keep:
            with psycopg.connect(url, autocommit=True) as conn:
                conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')


def main(argv: list[str] | None = None) -> None:
    """Command-line entry point; prints the result as JSON on the last line."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--url", required=True, help="postgresql://... (pgvector installed)")
    parser.add_argument("--rows", type=int, default=100_000)
    parser.add_argument("--dim", type=int, default=384)
    parser.add_argument("--writers", type=int, default=4)
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--keep", action="store_true", help="keep the bench schema")
    parser.add_argument("--bulk", action="store_true", help="load inside bulk_load()")
    parser.add_argument("--reuse", action="store_true", help="search a kept schema again")
    args = parser.parse_args(argv)
    result = run_postgres_bench(
        args.url,
        rows=args.rows,
        dim=args.dim,
        writers=args.writers,
        queries=args.queries,
        keep=args.keep,
        bulk=args.bulk,
        reuse=args.reuse,
    )
    print(json.dumps(asdict(result)))


if __name__ == "__main__":
    main()
