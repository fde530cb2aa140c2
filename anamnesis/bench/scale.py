"""The scale benchmark: how ingest, search, memory and file size grow with N episodes.

One store grows through the requested sizes (e.g. 10k → 100k → 1M). The text is real:
the turns of LongMemEval haystacks, de-duplicated, in file order. When N exceeds the
distinct turns, the text is reused in further cycles with distinct session ids and
dates shifted by whole years, all in one user's scope (the worst case for a search).

At each size we measure bulk ingest throughput of the segment just added
(``Memory.add_many``), the time to bring the store's in-memory indexes up to date
(``Store.warm_up``, which a Memory also runs in the background when it opens), single
``add`` latency, warm search latency per configuration,
first-search latency in a fresh process (open + first search, the model already
loaded), peak RSS, and the file size.

Embedding is most of the cost of building a large store, so two shortcuts exist and
reports say which was used: the ``edge`` embedder (static WordLlama) and a vector
pool (embed ``pool`` distinct texts once, then hand those vectors out in rotation to
every further new text). Identical text always reuses its stored vector (the
Memory's content-hash cache), so repeated cycles cost no embedding either way.
"""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np

from ..embed import get_embedder
from ..embed.base import Embedder
from ..memory import Memory
from ..retrieve.pipeline import Retriever
from ..store.base import Filters
from ..types import Scope
from . import datasets
from .metrics import percentile
from .presets import BENCH_PRESETS
from .report import pyplot
from .runner import environment, peak_rss_bytes, store_bytes

DEFAULT_SIZES = (10_000, 100_000, 1_000_000)
#: Messages handed to one ``add_many`` call while growing the store.
CHUNK = 20_000
SCALE_USER = "scale"

ScaleProgress = Callable[..., None]


@dataclass(slots=True)
class ScaleOptions:
    """How the scale benchmark runs (recorded verbatim in its results)."""

    sizes: tuple[int, ...] = DEFAULT_SIZES
    embedder: str = "minilm"
    pool: int | None = None
    configs: tuple[str, ...] = ("bm25", "dense", "hybrid")
    queries: int = 50
    single_adds: int = 20
    limit: int = 10
    keep_store: bool = False


class PoolEmbedder:
    """Embeds the first ``size`` distinct texts for real, then hands out those vectors
    in rotation. Queries are always embedded for real. Only for speed measurements:
    retrieval quality over pooled vectors means nothing."""

    def __init__(self, inner: Embedder, size: int) -> None:
        self.inner = inner
        self.name = inner.name
        self.dim = inner.dim
        self.size = size
        self._pool: list[np.ndarray] = []
        self._handed = 0

    def embed_documents(self, texts: Sequence[str]) -> np.ndarray:
        """Real vectors until the pool is full, pooled vectors after."""
        out = np.empty((len(texts), self.dim), dtype=np.float32)
        fresh = min(len(texts), self.size - len(self._pool))
        if fresh > 0:
            vectors = self.inner.embed_documents(list(texts[:fresh]))
            self._pool.extend(vectors)
            out[:fresh] = vectors
        for i in range(max(fresh, 0), len(texts)):
            out[i] = self._pool[self._handed % len(self._pool)]
            self._handed += 1
        return out

    def embed_query(self, text: str) -> np.ndarray:
        """The inner embedder's query vector."""
        return self.inner.embed_query(text)


def source_texts(path: Path) -> tuple[list[tuple[str, str, datetime, str]], list[str]]:
    """Distinct LongMemEval turns as ``(content, session_id, event_time, role)``, in file
    order, and the questions (for search latency)."""
    data = datasets.load("longmemeval", path)
    seen: set[str] = set()
    turns = []
    for case in data.cases:
        for message in case.messages:
            if message["content"] in seen:
                continue
            seen.add(message["content"])
            turns.append(
                (message["content"], message["session_id"], message["event_time"], message["role"])
            )
    questions = [q.text for case in data.cases for q in case.questions]
    return turns, questions


def messages(
    turns: Sequence[tuple[str, str, datetime, str]], start: int, stop: int
) -> Iterator[dict[str, Any]]:
    """Messages ``start``..``stop`` of the endless cycle over ``turns``."""
    for position in range(start, stop):
        cycle, index = divmod(position, len(turns))
        content, session_id, event_time, role = turns[index]
        if cycle:
            session_id = f"{session_id}#c{cycle}"
            event_time = event_time.replace(year=event_time.year + cycle)
        yield {
            "content": content,
            "role": role,
            "session_id": session_id,
            "event_time": event_time,
        }


def _chunks(turns: Sequence[Any], start: int, stop: int) -> Iterator[list[dict[str, Any]]]:
    for low in range(start, stop, CHUNK):
        yield list(messages(turns, low, min(stop, low + CHUNK)))


@dataclass(slots=True)
class ScalePoint:
    """Measurements at one store size."""

    episodes: int
    segment_messages: int
    segment_seconds: float
    ingest_per_second: float
    embedded_texts: int
    warm_up_ms: float
    single_add_ms: dict[str, float]
    search_ms: dict[str, dict[str, float]]
    fresh_process: dict[str, Any]
    fresh_memory_first_search_ms: float
    file_bytes: int
    peak_rss_bytes: int
    current_rss_bytes: int
    ann: dict[str, Any] = field(default_factory=dict)


@dataclass(slots=True)
class ScaleResult:
    """A whole scale run."""

    data_path: str
    data_sha256: str
    options: ScaleOptions
    distinct_texts: int
    points: list[ScalePoint] = field(default_factory=list)
    environment: dict[str, Any] = field(default_factory=dict)
    started_at: str = ""

    def as_dict(self) -> dict[str, Any]:
        """Plain dict for JSON."""
        return asdict(self)


def current_rss_bytes() -> int:
    """Resident set size now (Linux; 0 elsewhere)."""
    try:
        with open("/proc/self/statm") as handle:
            return int(handle.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError):
        return 0


class _CountingEmbedder:
    """Counts texts the wrapped embedder really embeds."""

    def __init__(self, inner: Embedder) -> None:
        self.inner = inner
        self.name = inner.name
        self.dim = inner.dim
        self.count = 0

    def embed_documents(self, texts: Sequence[str]) -> np.ndarray:
        self.count += len(texts)
        return self.inner.embed_documents(texts)

    def embed_query(self, text: str) -> np.ndarray:
        return self.inner.embed_query(text)


def _latencies(fn: Callable[[], object], times: int) -> list[float]:
    out = []
    for _ in range(times):
        start = time.perf_counter()
        fn()
        out.append((time.perf_counter() - start) * 1000)
    return out


def _stats(values: Sequence[float]) -> dict[str, float]:
    return {
        "p50": percentile(values, 50),
        "p95": percentile(values, 95),
        "mean": float(np.mean(values)) if values else math.nan,
    }


def fresh_process_search(path: Path, embedder: str, query: str, config: str) -> dict[str, Any]:
    """Open the store in a new Python process and time the first search there.

    The embedding model is loaded (and run once) before the clock starts, so the numbers
    are the store's cold start: ``open_ms`` (Memory()) and ``first_search_ms``.
    ``peak_rss_bytes`` is the child's VmHWM (Linux; ru_maxrss would include the parent's
    high-water mark, which survives fork and exec).
    """
    code = (
        "import json,sys,time\n"
        "from anamnesis.embed import get_embedder\n"
        "from anamnesis.memory import Memory\n"
        "from anamnesis.bench.presets import BENCH_PRESETS\n"
        "path, name, query, config = sys.argv[1:5]\n"
        "emb = get_embedder(name); emb.embed_query('warm up')\n"
        "t = time.perf_counter()\n"
        "m = Memory(path=path, embedder=emb, config=BENCH_PRESETS[config])\n"
        "opened = time.perf_counter() - t\n"
        "t = time.perf_counter(); m.search(query, user_id='" + SCALE_USER + "', limit=10)\n"
        "first = time.perf_counter() - t\n"
        "t = time.perf_counter(); m.search(query, user_id='" + SCALE_USER + "', limit=10)\n"
        "second = time.perf_counter() - t\n"
        "hwm = [l for l in open('/proc/self/status') if l.startswith('VmHWM')]\n"
        "rss = int(hwm[0].split()[1]) * 1024 if hwm else 0\n"
        "print(json.dumps({'open_ms': opened*1000, 'first_search_ms': first*1000,"
        " 'second_search_ms': second*1000, 'peak_rss_bytes': rss}))\n"
    )
    completed = subprocess.run(
        [sys.executable, "-c", code, str(path), embedder, query, config],
        capture_output=True,
        text=True,
        check=False,
        timeout=3600,
    )
    if completed.returncode != 0:
        return {"error": completed.stderr.strip().splitlines()[-1:] or ["failed"]}
    return json.loads(completed.stdout.strip().splitlines()[-1])


def run_scale(
    data: str | Path,
    options: ScaleOptions,
    work_dir: Path,
    progress: ScaleProgress | None = None,
) -> ScaleResult:
    """Grow one store through ``options.sizes`` and measure at each size."""
    sizes = sorted(set(options.sizes))
    unknown = [c for c in options.configs if c not in BENCH_PRESETS]
    if unknown:
        from ..errors import InvalidInputError

        raise InvalidInputError(f"unknown config(s) {unknown}; choose from {sorted(BENCH_PRESETS)}")
    path = Path(data)
    turns, questions = source_texts(path)
    queries = questions[: options.queries] or ["what did I say about my plans?"]
    base = get_embedder(options.embedder)
    inner: Embedder = PoolEmbedder(base, options.pool) if options.pool else base
    counting = _CountingEmbedder(inner)
    result = ScaleResult(
        data_path=str(path),
        data_sha256=datasets.file_sha256(path),
        options=options,
        distinct_texts=len(turns),
        started_at=datetime.now(UTC).isoformat(timespec="seconds"),
    )
    result.environment = environment(base.name)
    result.environment["vectors"] = (
        f"pool of {options.pool} real vectors reused in rotation"
        if options.pool
        else "every distinct text embedded"
    )
    work_dir.mkdir(parents=True, exist_ok=True)
    directory = Path(tempfile.mkdtemp(prefix="scale-", dir=work_dir))
    db = directory / "memory.db"
    memory = Memory(path=db, embedder=counting)
    scope = Scope(user_id=SCALE_USER)
    stored = 0
    try:
        for size in sizes:
            before = counting.count
            start = time.perf_counter()
            for chunk in _chunks(turns, stored, size):
                memory.add_many(chunk, user_id=SCALE_USER)
                stored += len(chunk)
                if progress is not None:
                    progress("ingested", done=stored, total=sizes[-1])
            seconds = time.perf_counter() - start
            embedded = counting.count - before
            segment = size - (result.points[-1].episodes if result.points else 0)
            ingest = {
                "segment_messages": segment,
                "segment_seconds": seconds,
                "ingest_per_second": segment / seconds if seconds else math.nan,
                "embedded_texts": embedded,
            }
            point = _measure(memory, db, scope, options, queries, turns, stored, counting, ingest)
            stored = point.episodes
            result.points.append(point)
            if progress is not None:
                progress("point", size=size, result=result)
    finally:
        memory.close()
        if not options.keep_store:
            for file in directory.glob("*"):
                file.unlink()
            directory.rmdir()
    return result


def _measure(
    memory: Memory,
    db: Path,
    scope: Scope,
    options: ScaleOptions,
    queries: Sequence[str],
    turns: Sequence[Any],
    stored: int,
    counting: _CountingEmbedder,
    ingest: dict[str, Any],
) -> ScalePoint:
    """Search, single-add and cold-start measurements at the store's current size."""
    start = time.perf_counter()
    memory.store.warm_up()
    warm_up_ms = (time.perf_counter() - start) * 1000
    retrievers = {
        name: Retriever(memory.store, memory.embedder, BENCH_PRESETS[name])
        for name in options.configs
    }
    search_ms = {}
    for name, retriever in retrievers.items():
        retriever.search("warm up", scope, Filters(), options.limit, False)
        times = []
        for query in queries:
            start = time.perf_counter()
            retriever.search(query, scope, Filters(), options.limit, False)
            times.append((time.perf_counter() - start) * 1000)
        search_ms[name] = _stats(times)
    extra = iter(messages(turns, stored, stored + options.single_adds))
    single = _latencies(lambda: memory.add(next(extra), user_id=SCALE_USER), options.single_adds)
    stored += options.single_adds

    # First search in a fresh Memory in this process (model already loaded).
    fresh = Memory(path=db, embedder=counting, config=BENCH_PRESETS[options.configs[-1]])
    start = time.perf_counter()
    fresh.search(queries[0], user_id=SCALE_USER, limit=options.limit)
    fresh_ms = (time.perf_counter() - start) * 1000
    fresh.close()
    cold = fresh_process_search(db, options.embedder, queries[0], options.configs[-1])
    ann = ann_recall(memory, scope, queries)
    return ScalePoint(
        episodes=stored,
        **ingest,
        warm_up_ms=warm_up_ms,
        single_add_ms=_stats(single),
        search_ms=search_ms,
        fresh_process=cold,
        fresh_memory_first_search_ms=fresh_ms,
        file_bytes=store_bytes(db),
        peak_rss_bytes=peak_rss_bytes(),
        current_rss_bytes=current_rss_bytes(),
        ann=ann,
    )


#: Depth at which the graph's recall against the exact scan is measured.
RECALL_DEPTH = 100


def ann_recall(memory: Memory, scope: Scope, queries: Sequence[str]) -> dict[str, Any]:
    """The dense channel's recall@100 against the exact scan over ``queries``, and the
    time of each (SQLite stores; empty when the store has no graph in use)."""
    store = memory.store
    dense = getattr(store, "_dense", None)
    if dense is None:
        return {}
    vectors = [memory.embedder.embed_query(q) for q in queries]
    recalls, graph_ms, exact_ms = [], [], []
    with store._lock:  # type: ignore[attr-defined]
        store._refresh_dense()  # type: ignore[attr-defined]
        if dense.ann is None:
            return {"graph": False}
        for vector in vectors:
            start = time.perf_counter()
            exact = dense.search(vector, user_id=scope.user_id, limit=RECALL_DEPTH, exact=True)
            exact_ms.append((time.perf_counter() - start) * 1000)
            start = time.perf_counter()
            found = dense.search(vector, user_id=scope.user_id, limit=RECALL_DEPTH)
            graph_ms.append((time.perf_counter() - start) * 1000)
            wanted = {rowid for rowid, _ in exact}
            recalls.append(len(wanted & {rowid for rowid, _ in found}) / max(len(wanted), 1))
    return {
        "graph": True,
        "recall_at_100": float(np.mean(recalls)),
        "graph_ms": _stats(graph_ms),
        "exact_ms": _stats(exact_ms),
    }


def _mb(n: float) -> str:
    return f"{n / 2**20:,.1f}"


def scale_markdown(result: dict[str, Any], command: str | None = None) -> str:
    """The Markdown report of a scale run."""
    options = result["options"]
    out = ["# Scale benchmark", ""]
    if command:
        out += ["```", command, "```", ""]
    out += [
        f"- text: distinct turns of `{result['data_path']}` (sha256 `{result['data_sha256']}`),"
        f" {result['distinct_texts']:,} distinct texts, cycled with new sessions and dates",
        f"- embedder `{result['environment'].get('embedder')}`; vectors: "
        f"{result['environment'].get('vectors')}",
        f"- anamnesis @ `{result['environment'].get('git_commit')}`, "
        f"{result['environment'].get('cpus')} CPUs; searches: {options['queries']} LongMemEval"
        f" questions, limit {options['limit']}; started {result['started_at']}",
        "",
        "| episodes | ingest msg/s (segment) | embedded | index warm-up s "
        "| single add p50/p95 ms | "
        + " | ".join(f"{c} p50/p95 ms" for c in options["configs"])
        + " | fresh-process open / first search ms | fresh Memory first search ms"
        " | file MB | peak RSS MB | child peak RSS MB"
        " | dense graph recall@100 | graph / exact p50 ms |",
        "|" + "---|" * (12 + len(options["configs"])),
    ]
    for p in result["points"]:
        cold = p["fresh_process"]
        cold_cell = (
            f"{cold['open_ms']:.0f} / {cold['first_search_ms']:.0f}"
            if "open_ms" in cold
            else "error"
        )
        out.append(
            f"| {p['episodes']:,} | {p['ingest_per_second']:,.0f} | {p['embedded_texts']:,} | "
            f"{p.get('warm_up_ms', math.nan) / 1000:.1f} | "
            f"{p['single_add_ms']['p50']:.1f} / {p['single_add_ms']['p95']:.1f} | "
            + " | ".join(
                f"{p['search_ms'][c]['p50']:.1f} / {p['search_ms'][c]['p95']:.1f}"
                for c in options["configs"]
            )
            + f" | {cold_cell} | {p['fresh_memory_first_search_ms']:.0f} | "
            f"{_mb(p['file_bytes'])} | {_mb(p['peak_rss_bytes'])} | "
            f"{_mb(cold.get('peak_rss_bytes', 0))} | {_ann_cells(p.get('ann') or {})} |"
        )
    out.append("")
    return "\n".join(out)


def _ann_cells(ann: dict[str, Any]) -> str:
    if not ann.get("graph"):
        return "exact (no graph) | –"
    return (
        f"{ann['recall_at_100']:.3f} | {ann['graph_ms']['p50']:.2f} / {ann['exact_ms']['p50']:.2f}"
    )


def plot_scale(result: dict[str, Any], path: Path) -> Path | None:
    """Search latency (p50, p95) and file size against N. None without matplotlib."""
    plt = pyplot()
    if plt is None:
        return None
    points = result["points"]
    sizes = [p["episodes"] for p in points]
    fig, (left, right) = plt.subplots(1, 2, figsize=(10, 4))
    for name in result["options"]["configs"]:
        left.plot(
            sizes, [p["search_ms"][name]["p50"] for p in points], marker="o", label=f"{name} p50"
        )
        left.plot(
            sizes,
            [p["search_ms"][name]["p95"] for p in points],
            marker="x",
            linestyle="--",
            label=f"{name} p95",
        )
    left.set_xscale("log")
    left.set_yscale("log")
    left.set_xlabel("episodes")
    left.set_ylabel("search latency (ms)")
    left.grid(alpha=0.3)
    left.legend(fontsize=7)
    right.plot(sizes, [p["file_bytes"] / 2**20 for p in points], marker="o", label="file MB")
    right.plot(
        sizes, [p["peak_rss_bytes"] / 2**20 for p in points], marker="o", label="peak RSS MB"
    )
    right.set_xscale("log")
    right.set_yscale("log")
    right.set_xlabel("episodes")
    right.grid(alpha=0.3)
    right.legend(fontsize=7)
    fig.suptitle("Anamnesis scale benchmark")
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path


def write_scale(result: ScaleResult, out_dir: Path, command: str | None = None) -> dict[str, Any]:
    """Write ``scale.json``, ``report.md`` and ``scale.png`` into ``out_dir``."""
    out_dir.mkdir(parents=True, exist_ok=True)
    data = result.as_dict()
    data["command"] = command
    (out_dir / "scale.json").write_text(json.dumps(data, indent=2, default=str), encoding="utf-8")
    (out_dir / "report.md").write_text(scale_markdown(data, command), encoding="utf-8")
    plot_scale(data, out_dir / "scale.png")
    return data
