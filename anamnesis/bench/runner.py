"""Running a benchmark: ingest each case once, search it with every configuration.

For each case a fresh SQLite memory is built in a temporary directory, filled with
``Memory.add_many``, and searched by one ``Retriever`` per configuration over the
same store, so configurations are compared on identical data. Every question yields
one record per configuration (retrieved keys, ranks, scores, token counts, latency
and metrics); ``summary.summarise`` turns records into tables.
"""

from __future__ import annotations

import json
import resource
import shutil
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from .. import __version__
from ..config import PRESETS, SearchConfig
from ..embed import get_embedder
from ..errors import InvalidInputError
from ..memory import Memory
from ..retrieve.pipeline import Retriever
from ..store.base import Filters
from ..types import Hit, Scope
from .datasets import Case, Dataset
from .scoring import DEFAULT_BUDGETS, DEFAULT_KS, LONGMEMEVAL_KS, CorpusStats, score
from .tokens import TOKENIZER_NAME, CachingEmbedder, TokenCounter

#: Name of the baseline that hands the answerer the whole conversation.
FULL_CONTEXT = "full-context"
#: Hits requested per search by default: the deepest cut-off reported.
DEFAULT_DEPTH = 50


@dataclass(slots=True)
class BenchOptions:
    """How a benchmark run is configured (recorded verbatim in the summary)."""

    configs: tuple[str, ...] = ("bm25", "dense", "hybrid")
    embedder: str = "minilm"
    depth: int = DEFAULT_DEPTH
    candidates: int | None = None
    budgets: tuple[int, ...] = DEFAULT_BUDGETS
    as_of: bool = True
    cache_embeddings: bool = True
    keep_stores: bool = False

    def search_configs(self) -> dict[str, SearchConfig]:
        """The named presets, with the candidate depth overridden when asked."""
        unknown = [name for name in self.configs if name not in PRESETS]
        if unknown:
            raise InvalidInputError(f"unknown config(s) {unknown}; choose from {sorted(PRESETS)}")
        if not self.configs:
            raise InvalidInputError("name at least one config")
        out = {}
        for name in self.configs:
            config = PRESETS[name]
            if self.candidates is not None:
                config = config.with_(candidates=self.candidates)
            out[name] = config
        return out


@dataclass(slots=True)
class CaseSpeed:
    """Timing and size of one case's ingest."""

    case: str
    messages: int
    ingest_seconds: float
    store_bytes: int


@dataclass(slots=True)
class RunResult:
    """Everything a run produced: per-question records and ingest measurements."""

    dataset: str
    data_path: str
    data_sha256: str
    options: BenchOptions
    records: list[dict[str, Any]] = field(default_factory=list)
    ingest: list[CaseSpeed] = field(default_factory=list)
    full_context_tokens: dict[str, int] = field(default_factory=dict)
    notes: dict[str, Any] = field(default_factory=dict)
    started_at: str = ""
    seconds: float = 0.0
    peak_rss_bytes: int = 0
    environment: dict[str, Any] = field(default_factory=dict)

    @property
    def ks(self) -> tuple[int, ...]:
        """The cut-offs reported for this dataset."""
        return LONGMEMEVAL_KS if self.dataset == "longmemeval" else DEFAULT_KS

    def meta(self) -> dict[str, Any]:
        """The run's provenance, for the summary."""
        return {
            "dataset": self.dataset,
            "data_path": self.data_path,
            "data_sha256": self.data_sha256,
            "options": asdict(self.options),
            "notes": self.notes,
            "started_at": self.started_at,
            "seconds": self.seconds,
            "peak_rss_bytes": self.peak_rss_bytes,
            "environment": self.environment,
        }


#: Called as ``progress(event, **values)``; events: case_start, ingested, question.
ProgressHook = Callable[..., None]


def peak_rss_bytes() -> int:
    """Peak resident set size of this process so far."""
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return int(peak if sys.platform == "darwin" else peak * 1024)


def store_bytes(path: Path) -> int:
    """Bytes on disk of a SQLite store with its WAL and shared-memory files."""
    return sum(p.stat().st_size for p in path.parent.glob(path.name + "*") if p.is_file())


@contextmanager
def fresh_memory(work_dir: Path, embedder: Any, *, keep: bool = False) -> Iterator[Memory]:
    """A new Memory in its own temporary directory under ``work_dir``, removed afterwards."""
    work_dir.mkdir(parents=True, exist_ok=True)
    directory = Path(tempfile.mkdtemp(prefix="store-", dir=work_dir))
    memory = Memory(path=directory / "memory.db", embedder=embedder)
    try:
        yield memory
    finally:
        memory.close()
        if not keep:
            shutil.rmtree(directory, ignore_errors=True)


def _hit_rows(
    hits: Sequence[Hit], key: str, counter: TokenCounter
) -> tuple[list[str], list[str], list[int], list[dict[str, Any]]]:
    keys = [str(h.episode.metadata.get(key, h.episode.id)) for h in hits]
    sessions = [h.episode.session_id or "" for h in hits]
    tokens = counter.count([h.episode.content for h in hits])
    rows = [
        {"rank": rank, "key": k, "session": s, "score": round(h.score, 6), "tokens": t}
        for rank, (k, s, t, h) in enumerate(zip(keys, sessions, tokens, hits, strict=True), 1)
    ]
    return keys, sessions, tokens, rows


def run_case(
    dataset: Dataset,
    case: Case,
    memory: Memory,
    options: BenchOptions,
    counter: TokenCounter,
    progress: ProgressHook | None = None,
) -> tuple[CaseSpeed, list[dict[str, Any]], int]:
    """Ingest one case into ``memory`` and search it with every configuration.

    Returns the ingest measurement, the per-question records and the case's total
    token count (what the full-context baseline would hand over).
    """
    user_id = "bench"

    def ingested(done: int) -> None:
        if progress is not None:
            progress("ingested", case=case.id, done=done, total=len(case.messages))

    start = time.perf_counter()
    memory.add_many(case.messages, user_id=user_id, progress=ingested)
    ingest_seconds = time.perf_counter() - start
    path = Path(getattr(memory.store, "path", ""))
    speed = CaseSpeed(
        case.id, len(case.messages), ingest_seconds, store_bytes(path) if path.name else 0
    )

    key = dataset.evidence_key
    session_of = {m["metadata"][key]: m["session_id"] for m in case.messages}
    corpus = CorpusStats(
        size=len(case.messages),
        session_of=session_of,
        session_sizes=Counter(m["session_id"] for m in case.messages),
    )
    full_tokens = sum(counter.count([m["content"] for m in case.messages]))
    ks = LONGMEMEVAL_KS if dataset.name == "longmemeval" else DEFAULT_KS
    scope = Scope(user_id=user_id)
    retrievers = {
        name: Retriever(memory.store, memory.embedder, config)
        for name, config in options.search_configs().items()
    }
    for retriever in retrievers.values():
        # The first search loads the dense matrix; keep that out of warm latencies.
        retriever.search("warm up", scope, Filters(), 1, False)

    records = []
    for question in case.questions:
        filters = Filters()
        if options.as_of and question.asked_at is not None:
            filters = Filters(event_before=question.asked_at)
        for name, retriever in retrievers.items():
            start = time.perf_counter()
            hits = retriever.search(question.text, scope, filters, options.depth, False)
            latency = time.perf_counter() - start
            keys, sessions, tokens, rows = _hit_rows(hits, key, counter)
            records.append(
                {
                    "case": case.id,
                    "question_id": question.id,
                    "category": question.category,
                    "abstention": question.abstention,
                    "config": name,
                    "question": question.text,
                    "answer": question.answer,
                    "evidence": list(question.evidence),
                    "evidence_sessions": list(question.evidence_sessions),
                    "latency_ms": latency * 1000,
                    "retrieved": rows,
                    "metrics": score(
                        dataset.name,
                        keys,
                        sessions,
                        tokens,
                        question.evidence,
                        question.evidence_sessions,
                        corpus,
                        ks=ks,
                        budgets=options.budgets,
                    ),
                }
            )
        if progress is not None:
            progress("question", case=case.id, question=question.id)
    counter.clear()
    return speed, records, full_tokens


def run(
    dataset: Dataset,
    options: BenchOptions,
    work_dir: Path,
    progress: ProgressHook | None = None,
) -> RunResult:
    """Run every case of ``dataset`` under ``options``; stores live under ``work_dir``."""
    options.search_configs()  # fail on unknown names before loading any model
    started = datetime.now(UTC)
    begin = time.perf_counter()
    embedder = get_embedder(options.embedder)
    caching = CachingEmbedder(embedder) if options.cache_embeddings else None
    counter = TokenCounter()
    result = RunResult(
        dataset=dataset.name,
        data_path=str(dataset.path),
        data_sha256=dataset.sha256,
        options=options,
        notes=dict(dataset.notes),
        started_at=started.isoformat(timespec="seconds"),
    )
    for case in dataset.cases:
        if progress is not None:
            progress(
                "case_start",
                case=case.id,
                messages=len(case.messages),
                questions=len(case.questions),
            )
        with fresh_memory(work_dir, caching or embedder, keep=options.keep_stores) as memory:
            speed, records, full_tokens = run_case(
                dataset, case, memory, options, counter, progress
            )
        result.ingest.append(speed)
        result.records.extend(records)
        result.full_context_tokens[case.id] = full_tokens
    result.seconds = time.perf_counter() - begin
    result.peak_rss_bytes = peak_rss_bytes()
    result.environment = environment(embedder.name, caching)
    return result


def environment(embedder_name: str, caching: CachingEmbedder | None) -> dict[str, Any]:
    """Versions and machine facts that make numbers comparable across runs."""
    import os
    import platform

    env: dict[str, Any] = {
        "anamnesis": __version__,
        "python": platform.python_version(),
        "platform": platform.platform(),
        "cpus": os.cpu_count(),
        "embedder": embedder_name,
        "tokenizer": TOKENIZER_NAME,
        "git_commit": _git_commit(),
    }
    if caching is not None:
        env["embedding_cache"] = {"embedded": caching.embedded, "reused": caching.reused}
    return env


def _git_commit() -> str | None:
    import subprocess

    try:
        out = subprocess.run(
            ["git", "describe", "--always", "--dirty", "--abbrev=10"],
            cwd=Path(__file__).resolve().parent,
            capture_output=True,
            text=True,
            timeout=5,
            check=False,
        )
    except OSError:
        return None
    return out.stdout.strip() or None


def write_records(records: Sequence[dict[str, Any]], path: Path) -> None:
    """Per-question records as JSON lines (nan written as null)."""
    with open(path, "w", encoding="utf-8") as handle:
        for record in records:
            handle.write(json.dumps(_json_safe(record), ensure_ascii=False) + "\n")


def _json_safe(value: Any) -> Any:
    if isinstance(value, float) and value != value:
        return None
    if isinstance(value, dict):
        return {k: _json_safe(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_json_safe(v) for v in value]
    return value
