"""Lexical search of the code at an older commit against the present one, alternated
query by query, in a kept ``postgres_scale --text`` schema (1M rows).

    python docs/experiments/scripts/postgres_lexical_ab.py URL OLD_COMMIT QUERIES [large] [small]

The older ``store/postgres/search.py`` and ``lexical.py`` are read from git and imported
beside the present ones. Variants, each query run by all of them in a rotating order:
the old and the new code, each with the episodes' GIN index on ``(user_id,
content_tsv)`` and without it (dropped inside the query's transaction, rolled back,
so only ``episodes_fts`` serves: what a database without ``btree_gin`` has), and
BM25 scored over every match (the new code, pruning off) as the reference. The
questions are the bench's (``postgres_scale``, seed 99: the 1% tenants' plan, then
the 50% tenant's). Reported per variant: p50/p95/mean, rows scored per query (the
rows each pass's WHERE selects, counted afterwards; median and mean), rows the index
scan hands to the heap (the tenant's matching rows with the composite index, every
tenant's with ``episodes_fts``), passes per query, and how many top-50 lists (ids
and scores) equal the reference. The schema must hold both indexes
(``episodes_fts`` and ``episodes_user_fts``). Used by the study "PostgreSQL at 1M".
"""

from __future__ import annotations

import importlib.util
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from types import ModuleType
from typing import Any
from urllib.parse import quote

import numpy as np
import psycopg

from anamnesis.bench import postgres_scale, scale_text
from anamnesis.retrieve.query import search_terms
from anamnesis.store.base import Filters
from anamnesis.store.postgres import search
from anamnesis.types import Scope

SCHEMA = "bench_1000000_text"
LIMIT = 50
IMPORTS = {
    "from ...types import": "from anamnesis.types import",
    "from ..base import": "from anamnesis.store.base import",
    "from ..episode_times import": "from anamnesis.store.episode_times import",
    "from ..index.lexical import": "from anamnesis.store.index.lexical import",
    "from .sql import": "from anamnesis.store.postgres.sql import",
    "from .lexical import": "from old_lexical import",
}


def old_modules(commit: str) -> ModuleType:
    """The search module of ``commit``, with its own lexical module."""
    folder = Path(tempfile.mkdtemp())
    for name in ("lexical", "search"):
        text = subprocess.run(
            ["git", "show", f"{commit}:anamnesis/store/postgres/{name}.py"],
            check=True,
            capture_output=True,
            text=True,
        ).stdout
        for old, new in IMPORTS.items():
            text = text.replace(old, new)
        (folder / f"old_{name}.py").write_text(text)
    sys.path.insert(0, str(folder))
    spec = importlib.util.spec_from_file_location("old_search", folder / "old_search.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def main() -> None:
    url, commit, count, *scenarios = sys.argv[1:]
    queries = int(count)
    scenarios = scenarios or ["large", "small"]
    schema_url = f"{url}?options=" + quote(f"-csearch_path={SCHEMA},public", safe="")
    data = Path(__file__).resolve().parents[3].parent / "shared" / "data"
    source = scale_text.distinct_sentences(scale_text.default_files(data), need=1000)
    questions = [t for t in map(search_terms, source.questions) if t]
    corpus = postgres_scale._Corpus(1_000_000, 384, questions=questions)
    rng = np.random.default_rng(99)
    plans: dict[str, list[Any]] = {}
    for name, scopes in (
        ("small", [Scope(t) for t in corpus.small]),
        ("large", [Scope(corpus.large)]),
    ):
        plans[name] = [
            (scopes[i % len(scopes)], corpus.vectors(rng, 1)[0], corpus.query_terms(rng))
            for i in range(queries)
        ]

    old = old_modules(commit)
    passes: list[tuple[str, list[Any]]] = []

    def spying(module: ModuleType) -> None:
        original = module.bm25_query

        def spy(weights: Any, candidates: str, params: list[Any], limit: int) -> Any:
            passes.append((candidates, list(params)))
            return original(weights, candidates, params, limit)

        module.bm25_query = spy

    spying(old)
    spying(search)
    variants = {  # name: (search function, composite index visible, prune)
        f"old code ({commit[:7]}), tsvector GIN": (old.lexical_search, False, True),
        f"old code ({commit[:7]}), composite GIN": (old.lexical_search, True, True),
        "new code, tsvector GIN": (search.lexical_search, False, True),
        "new code, composite GIN": (search.lexical_search, True, True),
        "every match, composite GIN": (search.lexical_search, True, False),
    }
    names = list(variants)
    conn = psycopg.connect(schema_url)

    def run(variant: str, terms: list[str], scope: Scope) -> tuple[float, list[Any], list[Any]]:
        function, composite, prune = variants[variant]
        search.PRUNE_MIN_POSTINGS = 20_000 if prune else 2**62
        if not composite:
            conn.execute("DROP INDEX episodes_user_fts")  # rolled back below
        passes.clear()
        start = time.perf_counter()
        found = function(conn, terms, scope, Filters(), LIMIT)
        elapsed = time.perf_counter() - start
        conn.rollback()
        return elapsed, [(c.episode_id, c.score) for c in found], list(passes)

    print("loadavg before", Path("/proc/loadavg").read_text().strip(), flush=True)
    for name in scenarios:
        plan = plans[name]
        for scope, _, terms in plan[:20]:  # warm the cache
            for variant in names:
                run(variant, terms, scope)
        times: dict[str, list[float]] = {v: [] for v in names}
        lists: dict[str, list[Any]] = {v: [] for v in names}
        seen: dict[str, list[Any]] = {v: [] for v in names}
        for i, (scope, _, terms) in enumerate(plan):
            for variant in names[i % len(names) :] + names[: i % len(names)]:
                elapsed, found, used = run(variant, terms, scope)
                times[variant].append(elapsed)
                lists[variant].append(found)
                seen[variant].append(used)
        load = Path("/proc/loadavg").read_text().strip()
        scored: dict[str, list[int]] = {v: [] for v in names}
        handed: dict[str, list[int]] = {v: [] for v in names}
        for variant in names:
            composite = variants[variant][1]
            for (scope, _, _), used in zip(plan, seen[variant], strict=True):
                rows = index_rows = 0
                for candidates, params in used:
                    rows += conn.execute(
                        f"SELECT count(*) FROM episodes e WHERE {candidates}", params
                    ).fetchone()[0]
                    match = candidates.split(" AND e.user_id")[0]
                    match_params = params[: match.count("%s")]
                    if composite:
                        match += " AND e.user_id = %s"
                        match_params.append(scope.user_id)
                    index_rows += conn.execute(
                        f"SELECT count(*) FROM episodes e WHERE {match}", match_params
                    ).fetchone()[0]
                scored[variant].append(rows)
                handed[variant].append(index_rows)
            conn.rollback()
        reference = lists["every match, composite GIN"]
        print(name, f"({len(plan)} queries), loadavg after", load)
        for variant in names:
            ordered = sorted(times[variant])
            summary = {
                "p50_ms": round(1000 * ordered[len(ordered) // 2], 1),
                "p95_ms": round(1000 * ordered[min(len(ordered) - 1, int(len(ordered) * 0.95))], 1),
                "mean_ms": round(1000 * statistics.fmean(ordered), 1),
                "rows_scored_median": statistics.median(scored[variant]),
                "rows_scored_mean": round(statistics.fmean(scored[variant])),
                "index_rows_median": statistics.median(handed[variant]),
                "passes_mean": round(statistics.fmean(len(p) for p in seen[variant]), 2),
                "identical": sum(a == b for a, b in zip(lists[variant], reference, strict=True)),
            }
            print(f"  {variant}: {json.dumps(summary)}", flush=True)
    conn.close()


if __name__ == "__main__":
    main()
