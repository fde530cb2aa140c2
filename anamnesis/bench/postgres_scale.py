"""Scale benchmark of the PostgreSQL store: bulk ingest, then search latency by tenant size.

    python -m anamnesis.bench.postgres_scale --url postgresql://... --rows 100000

The store is measured in isolation from the embedder: vectors are synthetic (random
unit vectors around ``CLUSTERS`` random centres, so that nearest neighbours exist as
they do for real embeddings). Text is drawn from the BERT vocabulary with a Zipf
distribution and queried with three mid-frequency words; or, with ``--text DIR``, each
episode is a distinct sentence of the dev data sets in ``DIR`` (``scale_text``) and each
query is the lexical terms of one of their questions, as ``Memory.search`` derives them
(schema ``bench_<rows>_text``). Rows are spread over tenants the way a multi-tenant
service sees them, interleaved in time: one large tenant owns ``LARGE_TENANT_SHARE``
of the rows and ``SMALL_TENANTS`` tenants own 1% each. Everything goes into a fresh
schema (``bench_<rows>``) that is dropped unless ``--keep`` is given.

Reported per scenario: p50/p95/mean latency of dense search, lexical search and a full
store round (lexical + dense + fetching the top 10 + their neighbours, i.e. what
``Memory.search`` asks of the store, minus embedding the query), single client, warm
cache; recall@10 and recall@100 of dense search (limit 10, limit 100) against an exact
search of the same tenant; and, per scenario, how many of lexical search's top 10 and
top ``CANDIDATES`` are those of BM25 scored over every matching row of the tenant.
``run_postgres_bench`` is the entry point for the benchmark harness.
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
from pathlib import Path
from typing import Any
from urllib.parse import quote

import numpy as np

from ..errors import InvalidInputError
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
    recall_at_100: dict[str, float] = field(default_factory=dict)
    lexical_agreement: dict[str, dict[str, float]] = field(default_factory=dict)
    text: str = "synthetic (Zipf over the BERT vocabulary)"
    server: str = ""


def _vocabulary() -> list[str]:
    text = resources.files("anamnesis").joinpath("data/bert-base-uncased-vocab.txt").read_text()
    return [w for w in text.split() if w.isalpha() and w.isascii() and len(w) >= 3]


class _Corpus:
    """Deterministic synthetic episodes: text, vectors and tenants."""

    def __init__(
        self,
        rows: int,
        dim: int,
        seed: int = 7,
        texts: list[str] | None = None,
        questions: list[list[str]] | None = None,
    ) -> None:
        self.rows, self.dim = rows, dim
        #: Real texts (one per row) and the lexical terms of real questions, if given.
        self.texts, self.questions = texts, questions
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
            if self.texts is not None:
                text = self.texts[row]
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
        if self.questions is not None:
            return self.questions[int(rng.integers(0, len(self.questions)))]
        # Mid-frequency words, as content words of a question are.
        return [str(w) for w in self.words[rng.integers(50, 3000, 3)]]


def _real_text(data_dir: Path, rows: int) -> tuple[list[str], list[list[str]], str]:
    """``rows`` distinct sentences of the data sets in ``data_dir``, the lexical terms
    of their questions, and a description of both."""
    from ..retrieve.query import search_terms
    from . import scale_text

    files = scale_text.default_files(data_dir)
    if not files:
        raise InvalidInputError(
            f"no data set of {[f for _, f in scale_text.SOURCES]} in {data_dir}: "
            "point --text at the shared data folder"
        )
    source = scale_text.distinct_sentences(files, need=rows)
    questions = [t for t in map(search_terms, source.questions) if t]
    texts = [t.content for t in source.texts[:rows]]
    return texts, questions, f"{source.describe()}; {len(questions):,} questions"


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


@contextlib.contextmanager
def _every_match_scored() -> Any:
    """Within: lexical search scores every match in scope (no pruning), as before."""
    from ..store.postgres import search as postgres_search

    saved = postgres_search.PRUNE_MIN_POSTINGS
    postgres_search.PRUNE_MIN_POSTINGS = 2**62
    try:
        yield
    finally:
        postgres_search.PRUNE_MIN_POSTINGS = saved


def _lexical_against_every_match(store: PostgresStore, plan: list[Any]) -> dict[str, float]:
    """Lexical search against BM25 scored over every match, query by query, in turn
    first and second: latency of each and agreement of their top 10 and top ``CANDIDATES``."""
    pruned: list[float] = []
    every: list[float] = []
    shared = {10: 0, CANDIDATES: 0}
    expected_count = {10: 0, CANDIDATES: 0}
    identical = total = 0
    for i, (scope, _, terms) in enumerate(plan):
        found = {}
        for prune in (True, False) if i % 2 else (False, True):
            with contextlib.nullcontext() if prune else _every_match_scored():
                start = time.perf_counter()
                found[prune] = store.lexical_search(terms, scope, Filters(), CANDIDATES)
                (pruned if prune else every).append(time.perf_counter() - start)
        got = [(c.episode_id, c.score) for c in found[True]]
        expected = [(c.episode_id, c.score) for c in found[False]]
        identical += got == expected
        for k in shared:
            shared[k] += len({e for e, _ in got[:k]} & {e for e, _ in expected[:k]})
            expected_count[k] += len(expected[:k])
        total += 1
    return {
        "pruned_p50_ms": _percentiles(pruned)["p50_ms"],
        "pruned_p95_ms": _percentiles(pruned)["p95_ms"],
        "every_match_p50_ms": _percentiles(every)["p50_ms"],
        "every_match_p95_ms": _percentiles(every)["p95_ms"],
        "identical_lists": identical / max(total, 1),
        **{f"overlap_at_{k}": shared[k] / max(expected_count[k], 1) for k in shared},
    }


def _dense_recall(store: PostgresStore, plan: list[Any], k: int, rows: int) -> float:
    """Share of the exact top ``k`` of the query's tenant that dense search returns."""
    from ..store.postgres import search as postgres_search

    hits = total = 0
    saved = postgres_search.EXACT_SCAN_MAX_ROWS
    for scope, vector, _ in plan:
        approx = store.dense_search(vector, scope, Filters(), k)
        postgres_search.EXACT_SCAN_MAX_ROWS = rows + 1  # every tenant scanned exactly
        try:
            exact = store.dense_search(vector, scope, Filters(), k)
        finally:
            postgres_search.EXACT_SCAN_MAX_ROWS = saved
        hits += len({c.episode_id for c in approx} & {c.episode_id for c in exact})
        total += len(exact)
    return hits / total


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
    text: Path | None = None,
    log: Callable[[str], None] = print,
) -> BenchResult:
    """Load ``rows`` synthetic episodes into a fresh schema and measure ingest and search.

    With ``bulk=True`` the load runs inside ``PostgresStore.bulk_load`` (HNSW index
    built once at the end, included in the ingest time); otherwise every row goes
    into the live index, as ``Memory.add`` does. With ``reuse=True`` a schema kept
    by an earlier run (``keep=True``) is searched again without reloading it. With
    ``text`` (the folder of the dev data sets) episodes and queries are real text.
    """
    import psycopg

    schema = f"bench_{rows}" if text is None else f"bench_{rows}_text"
    texts = questions = None
    described = BenchResult.text
    if text is not None:
        texts, questions, described = _real_text(text, rows)
        log(f"text: {described}")
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
    corpus = _Corpus(rows, dim, texts=texts, questions=questions)
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
            text=described,
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

            agreement = _lexical_against_every_match(store, plan)
            result.lexical_agreement[name] = agreement
            log(f"  {name} lexical, pruned vs every match scored: {agreement}")
            for k in (10, 100):
                recall = _dense_recall(store, plan[:50], k, rows)
                getattr(result, f"recall_at_{k}")[name] = recall
                log(f"  {name} dense recall@{k} vs exact: {recall:.3f}")
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
    parser.add_argument(
        "--text",
        type=Path,
        metavar="DIR",
        help="real text: sentences and questions of the data sets in DIR (../shared/data)",
    )
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
        text=args.text,
    )
    print(json.dumps(asdict(result)))


if __name__ == "__main__":
    main()
