"""The scale benchmark: how ingest, search, erasure, memory and file size grow with N.

One store grows through the requested sizes (e.g. 10k → 100k → 1M). The text is real
and every episode's text is distinct: by default the sentences of LongMemEval S, LoCoMo
and BEAM, de-duplicated, in file order (``scale_text`` gives the rules; adjacent pairs
complete the list if more are asked for). ``text="turns"`` uses whole LongMemEval turns
instead, cycled with new session ids and dates shifted by whole years once they run out
(repeated texts: not for the approximate index's behaviour).

Layout: one user's scope holding everything (the worst case for a search), or, with
``scope_size``, consecutive blocks of that many episodes in scopes of their own (many
small users in one big store), each search inside one small scope, the queries spread
evenly over the scopes.

At each size we measure end-to-end ingest of the segment just added
(``Memory.add_many``, embedding included; wall and CPU seconds), the time to bring the
store's in-memory indexes up to date (``Store.warm_up``), single ``add`` latency, warm
search latency per configuration (query embedding included), the dense channel's
recall@100 against the exact scan, ``Memory.forget`` of one episode (whether any
byte of its text is left in the store's files, and the next search's time), then,
with the Memory closed (its approximate index saved, as any closed store), the first
search in a fresh process per configuration (the model loaded before the clock
starts) and in a fresh Memory of this process, peak RSS, the file size and the load
average.

Embedding is most of the cost of building a large store, so two shortcuts exist and
reports say which was used: the ``edge`` embedder (static WordLlama) and a vector
pool (embed ``pool`` distinct texts once, then hand those vectors out in rotation to
every further new text).
"""

from __future__ import annotations

import json
import math
import mmap
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
from ..errors import InvalidInputError
from ..memory import Memory
from ..retrieve.pipeline import Retriever
from ..store.base import Filters
from ..types import Scope
from . import datasets
from .metrics import percentile
from .presets import BENCH_PRESETS
from .report import pyplot
from .runner import environment, peak_rss_bytes, store_bytes
from .scale_text import TextSource, default_files, distinct_sentences, text_messages

DEFAULT_SIZES = (10_000, 100_000, 1_000_000)
#: Messages handed to one ``add_many`` call while growing the store.
CHUNK = 20_000
SCALE_USER = "scale"
#: Seconds a fresh process may take to open the store and search twice.
CHILD_TIMEOUT = 1800

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
    #: ``sentences`` (distinct sentences of the data sets) or ``turns`` (LongMemEval turns).
    text: str = "sentences"
    #: Further data sets ``(name, path)`` whose sentences follow the ``data`` file's;
    #: None: those of ``scale_text.SOURCES`` found beside it.
    extra_data: tuple[tuple[str, str], ...] | None = None
    #: Episodes per scope (consecutive blocks), or None for one scope holding everything.
    scope_size: int | None = None
    #: Scan the store's files for the forgotten episode's text after ``forget``.
    scan_bytes: bool = True


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
    #: Per configuration: the fresh process's open, first and second search, peak RSS.
    fresh_process: dict[str, dict[str, Any]]
    fresh_memory_first_search_ms: float
    file_bytes: int
    peak_rss_bytes: int
    current_rss_bytes: int
    ann: dict[str, Any] = field(default_factory=dict)
    segment_cpu_seconds: float = math.nan
    scopes: int = 1
    forget: dict[str, Any] = field(default_factory=dict)
    load_average: tuple[float, float, float] = (math.nan, math.nan, math.nan)


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
    #: What the texts are (``TextSource.describe``) and the files they came from.
    text_source: str = ""
    text_files: list[dict[str, Any]] = field(default_factory=list)

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


def fresh_process_search(
    path: Path, embedder: str, query: str, config: str, user_id: str = SCALE_USER
) -> dict[str, Any]:
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
        "path, name, query, config, user = sys.argv[1:6]\n"
        "emb = get_embedder(name); emb.embed_query('warm up')\n"
        "t = time.perf_counter()\n"
        "m = Memory(path=path, embedder=emb, config=BENCH_PRESETS[config])\n"
        "opened = time.perf_counter() - t\n"
        "t = time.perf_counter(); m.search(query, user_id=user, limit=10)\n"
        "first = time.perf_counter() - t\n"
        "t = time.perf_counter(); m.search(query, user_id=user, limit=10)\n"
        "second = time.perf_counter() - t\n"
        "hwm = [l for l in open('/proc/self/status') if l.startswith('VmHWM')]\n"
        "rss = int(hwm[0].split()[1]) * 1024 if hwm else 0\n"
        "print(json.dumps({'open_ms': opened*1000, 'first_search_ms': first*1000,"
        " 'second_search_ms': second*1000, 'peak_rss_bytes': rss}), flush=True)\n"
        # Leave without waiting for background index builds: the figures are out, and
        # this process must not outlive its measurement (nothing it wrote is pending).
        "import os; os._exit(0)\n"
    )
    try:
        completed = subprocess.run(
            [sys.executable, "-c", code, str(path), embedder, query, config, user_id],
            capture_output=True,
            text=True,
            check=False,
            timeout=CHILD_TIMEOUT,
        )
    except subprocess.TimeoutExpired:
        return {"error": [f"no answer within {CHILD_TIMEOUT} s"]}
    if completed.returncode != 0:
        return {"error": completed.stderr.strip().splitlines()[-1:] or ["failed"]}
    return json.loads(completed.stdout.strip().splitlines()[-1])


def scope_user(position: int, scope_size: int | None) -> str:
    """The user id the episode at ``position`` is stored under."""
    if scope_size is None:
        return SCALE_USER
    return f"{SCALE_USER}-{position // scope_size:05d}"


def search_users(stored: int, queries: int, scope_size: int | None) -> list[str]:
    """The scope each query searches: the one scope, or full small scopes spread evenly
    over the store (query i in scope ``i * full // queries``)."""
    if scope_size is None:
        return [SCALE_USER] * queries
    full = max(1, stored // scope_size)
    return [scope_user((i * full // queries) * scope_size, scope_size) for i in range(queries)]


def segments(
    make: Callable[[int, int], Iterator[dict[str, Any]]],
    start: int,
    stop: int,
    scope_size: int | None,
) -> Iterator[tuple[str, list[dict[str, Any]]]]:
    """``(user_id, messages)`` batches covering positions ``start``..``stop``: chunks of
    ``CHUNK`` in one scope, or each scope's block."""
    low = start
    while low < stop:
        if scope_size is None:
            high = min(stop, low + CHUNK)
        else:
            high = min(stop, (low // scope_size + 1) * scope_size)
        yield scope_user(low, scope_size), list(make(low, high))
        low = high


def load_text(
    data: Path, options: ScaleOptions, need: int
) -> tuple[Callable[[int, int], Iterator[dict[str, Any]]], TextSource]:
    """The message maker for positions ``start``..``stop`` and what the text is."""
    if options.text == "turns":
        turns, questions = source_texts(data)
        source = TextSource(
            texts=[],
            questions=questions,
            files=[{"name": "longmemeval", "path": str(data), "turns": len(turns)}],
        )
        return (lambda low, high: messages(turns, low, high)), source
    if options.text != "sentences":
        raise InvalidInputError(f"unknown text {options.text!r}; choose sentences or turns")
    extra = (
        [(name, Path(p)) for name, p in options.extra_data]
        if options.extra_data is not None
        else [f for f in default_files(data.parent) if f[0] != "longmemeval"]
    )
    source = distinct_sentences([("longmemeval", data), *extra], need=need)
    texts = source.texts
    return (lambda low, high: text_messages(texts, low, high)), source


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
        raise InvalidInputError(f"unknown config(s) {unknown}; choose from {sorted(BENCH_PRESETS)}")
    if options.scope_size is not None and options.scope_size < 1:
        raise InvalidInputError("scope_size must be a positive number of episodes")
    path = Path(data)
    make, source = load_text(path, options, need=sizes[-1] + options.single_adds)
    queries = source.questions[: options.queries] or ["what did I say about my plans?"]
    base = get_embedder(options.embedder)
    inner: Embedder = PoolEmbedder(base, options.pool) if options.pool else base
    counting = _CountingEmbedder(inner)
    result = ScaleResult(
        data_path=str(path),
        data_sha256=datasets.file_sha256(path),
        options=options,
        distinct_texts=len(source.texts) if source.texts else source.files[0]["turns"],
        started_at=datetime.now(UTC).isoformat(timespec="seconds"),
        text_source=(
            source.describe()
            if source.texts
            else f"{source.files[0]['turns']:,} distinct LongMemEval turns, cycled"
        ),
        text_files=source.files,
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
    memory = Memory(path=db, embedder=counting, config=BENCH_PRESETS[options.configs[-1]])
    stored = 0
    try:
        for size in sizes:
            before = counting.count
            wall, cpu = time.perf_counter(), time.process_time()
            for user_id, chunk in segments(make, stored, size, options.scope_size):
                memory.add_many(chunk, user_id=user_id)
                stored += len(chunk)
                if progress is not None:
                    progress("ingested", done=stored, total=sizes[-1])
            seconds = time.perf_counter() - wall
            segment = size - (result.points[-1].episodes if result.points else 0)
            ingest = {
                "segment_messages": segment,
                "segment_seconds": seconds,
                "segment_cpu_seconds": time.process_time() - cpu,
                "ingest_per_second": segment / seconds if seconds else math.nan,
                "embedded_texts": counting.count - before,
            }
            point, memory = _measure(memory, db, options, queries, make, stored, counting, ingest)
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
    options: ScaleOptions,
    queries: Sequence[str],
    make: Callable[[int, int], Iterator[dict[str, Any]]],
    stored: int,
    counting: _CountingEmbedder,
    ingest: dict[str, Any],
) -> tuple[ScalePoint, Memory]:
    """Every measurement at the store's current size; returns the point and the Memory
    to grow further (``memory`` is closed here and a fresh one opened)."""
    start = time.perf_counter()
    memory.store.warm_up()
    warm_up_ms = (time.perf_counter() - start) * 1000
    users = search_users(stored, len(queries), options.scope_size)
    search_ms = {}
    for name in options.configs:
        retriever = Retriever(memory.store, memory.embedder, BENCH_PRESETS[name])
        retriever.search("warm up", Scope(user_id=users[0]), Filters(), options.limit, False)
        times = []
        for query, user in zip(queries, users, strict=True):
            start = time.perf_counter()
            retriever.search(query, Scope(user_id=user), Filters(), options.limit, False)
            times.append((time.perf_counter() - start) * 1000)
        search_ms[name] = _stats(times)
    extra = iter(make(stored, stored + options.single_adds))
    positions = iter(range(stored, stored + options.single_adds))
    single = _latencies(
        lambda: memory.add(next(extra), user_id=scope_user(next(positions), options.scope_size)),
        options.single_adds,
    )
    stored += options.single_adds
    ann = ann_recall(memory, queries, users)
    forgotten = forget_probe(memory, db, users[0], stored, options.scan_bytes)
    # The first search after an erasure reloads what the erasure invalidated; it also
    # brings the approximate index in step again, so that closing saves it.
    start = time.perf_counter()
    memory.search(queries[0], user_id=users[0], limit=options.limit)
    forgotten["next_search_ms"] = (time.perf_counter() - start) * 1000
    memory.close()  # saves the approximate index, as any Memory leaving a store does

    cold = {
        name: fresh_process_search(db, options.embedder, queries[0], name, users[0])
        for name in options.configs
    }
    # First search in a fresh Memory in this process (model already loaded); it is the
    # Memory the store grows through next.
    fresh = Memory(path=db, embedder=counting, config=BENCH_PRESETS[options.configs[-1]])
    start = time.perf_counter()
    fresh.search(queries[0], user_id=users[0], limit=options.limit)
    fresh_ms = (time.perf_counter() - start) * 1000
    point = ScalePoint(
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
        scopes=1 if options.scope_size is None else -(-stored // options.scope_size),
        forget=forgotten,
        load_average=os.getloadavg(),
    )
    return point, fresh


#: A word no data set holds: the forgotten episode's text is looked for by it.
PROBE_WORD = "Zyqvorblentax"


def forget_probe(memory: Memory, db: Path, user_id: str, stored: int, scan: bool) -> dict[str, Any]:
    """Add one episode with a unique word, time ``Memory.forget`` of it, and (``scan``)
    count the word's occurrences in the store's files before and after."""
    word = f"{PROBE_WORD}{stored}"
    episode = memory.add(f"The locker code word is {word}, keep it private.", user_id=user_id)[0]
    out: dict[str, Any] = {"word": word}
    if scan:
        out["occurrences_before"] = occurrences(db, word)
    start = time.perf_counter()
    report = memory.forget([episode.id], user_id=user_id)
    out["forget_ms"] = (time.perf_counter() - start) * 1000
    out["removed"] = len(report.episode_ids)
    if scan:
        start = time.perf_counter()
        out["occurrences_after"] = occurrences(db, word)
        out["scan_ms"] = (time.perf_counter() - start) * 1000
    return out


def occurrences(db: Path, word: str) -> int:
    """Occurrences of ``word`` in the files of the store ``db`` (its WAL and indexes
    too): as written, lower-cased, and the lower-cased tail FTS5's prefix compression
    leaves, in UTF-8."""
    lower = word.lower()
    needles = {word.encode(), lower.encode(), lower[-8:].encode()}
    total = 0
    for file in sorted(db.parent.glob(db.name + "*")):
        if not file.is_file() or file.stat().st_size == 0:
            continue
        with open(file, "rb") as handle:
            with mmap.mmap(handle.fileno(), 0, access=mmap.ACCESS_READ) as view:
                for needle in needles:
                    at = view.find(needle)
                    while at != -1:
                        total += 1
                        at = view.find(needle, at + 1)
    return total


#: Depth at which the graph's recall against the exact scan is measured.
RECALL_DEPTH = 100


def ann_recall(memory: Memory, queries: Sequence[str], users: Sequence[str]) -> dict[str, Any]:
    """The dense channel's recall@100 against the exact scan over ``queries`` (each in
    its user's scope), and the time of each (SQLite stores; empty without a dense index).
    ``graph`` says whether the store holds an approximate graph; a small scope in a
    large store is still searched exactly, which gives recall 1."""
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
        for vector, user in zip(vectors, users, strict=True):
            start = time.perf_counter()
            exact = dense.search(vector, user_id=user, limit=RECALL_DEPTH, exact=True)
            exact_ms.append((time.perf_counter() - start) * 1000)
            start = time.perf_counter()
            found = dense.search(vector, user_id=user, limit=RECALL_DEPTH)
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
    """The Markdown report of a scale run: search, then costs, one row per size."""
    options = result["options"]
    configs = options["configs"]
    env = result["environment"]
    layout = (
        "one user's scope holding every episode"
        if not options.get("scope_size")
        else f"scopes of {options['scope_size']:,} consecutive episodes, each search in one"
        " of them (spread evenly over the store)"
    )
    out = ["# Scale benchmark", ""]
    if command:
        out += ["```", command, "```", ""]
    out += [
        f"- text: {result.get('text_source') or result['distinct_texts']}; from "
        + ", ".join(f"`{f['path']}`" for f in result.get("text_files") or [])
        + f" (first file sha256 `{result['data_sha256'][:12]}`)",
        f"- layout: {layout}",
        f"- embedder `{env.get('embedder')}`; vectors: {env.get('vectors')}",
        f"- anamnesis @ `{env.get('git_commit')}`, {env.get('cpus')} CPUs; searches: "
        f"{options['queries']} questions of the data sets, limit {options['limit']}, query "
        f"embedding included; started {result['started_at']}",
        "",
        "| episodes | scopes | "
        + " | ".join(f"{c} p50 / p95 ms" for c in configs)
        + (f" | {configs[-1]} ÷ {configs[0]} p50" if len(configs) > 1 else "")
        + " | fresh process first search ms ("
        + ", ".join(configs)
        + ") | fresh Memory first search ms | dense recall@100 vs exact"
        " | graph / exact dense p50 ms | load average |",
        "|" + "---|" * (7 + len(configs) + (len(configs) > 1)),
    ]
    for p in result["points"]:
        cells = [f"{p['episodes']:,}", f"{p.get('scopes', 1):,}"]
        cells += [
            f"{p['search_ms'][c]['p50']:.1f} / {p['search_ms'][c]['p95']:.1f}" for c in configs
        ]
        if len(configs) > 1:
            ratio = p["search_ms"][configs[-1]]["p50"] / p["search_ms"][configs[0]]["p50"]
            cells.append(f"{ratio:.1f}×")
        cells.append(" / ".join(_first_search(p["fresh_process"], c) for c in configs))
        cells.append(f"{p['fresh_memory_first_search_ms']:.0f}")
        cells.append(_ann_cells(p.get("ann") or {}))
        load = p.get("load_average") or (math.nan,)
        cells.append(f"{load[0]:.1f}")
        out.append("| " + " | ".join(cells) + " |")
    out += [
        "",
        "| episodes | ingest msg/s (wall) | ingest msg/s per CPU second | embedded texts "
        "| index warm-up s | single add p50 / p95 ms | forget one episode ms "
        "| next search after it ms "
        "| its word's bytes in the files before / after | file MB "
        "| fresh process peak RSS MB (open + 2 searches) | bench process peak RSS MB |",
        "|" + "---|" * 12,
    ]
    for p in result["points"]:
        cpu = p.get("segment_cpu_seconds", math.nan)
        forget = p.get("forget") or {}
        children = [c.get("peak_rss_bytes", 0) for c in p["fresh_process"].values()]
        cells = [
            f"{p['episodes']:,}",
            f"{p['ingest_per_second']:,.0f}",
            f"{p['segment_messages'] / cpu:,.0f}" if cpu and cpu == cpu else "–",
            f"{p['embedded_texts']:,}",
            f"{p.get('warm_up_ms', math.nan) / 1000:.1f}",
            f"{p['single_add_ms']['p50']:.1f} / {p['single_add_ms']['p95']:.1f}",
            f"{forget['forget_ms']:,.0f}" if "forget_ms" in forget else "–",
            f"{forget['next_search_ms']:,.0f}" if "next_search_ms" in forget else "–",
            f"{forget['occurrences_before']} / {forget['occurrences_after']}"
            if "occurrences_after" in forget
            else "not scanned",
            _mb(p["file_bytes"]),
            _mb(max(children, default=0)),
            _mb(p["peak_rss_bytes"]),
        ]
        out.append("| " + " | ".join(cells) + " |")
    out.append("")
    return "\n".join(out)


def _first_search(cold: dict[str, Any], config: str) -> str:
    run = cold.get(config) or {}
    return f"{run['first_search_ms']:,.0f}" if "first_search_ms" in run else "error"


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
