"""Running a benchmark: ingest each case once, search it with every configuration.

For each case a fresh SQLite memory is built in a temporary directory, filled with
``Memory.add_many``, and searched by one ``Retriever`` per configuration over the
same store, so configurations are compared on identical data. Every question yields
one record per configuration (retrieved keys, ranks, scores, token counts, latency
and metrics); ``summary.summarise`` turns records into tables.
"""

from __future__ import annotations

import json
import math
import resource
import shutil
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from contextlib import ExitStack, contextmanager
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import IO, Any

from .. import __version__
from ..config import SearchConfig
from ..context import assemble
from ..embed import get_embedder
from ..errors import InvalidInputError
from ..ingest.gate import GateConfig
from ..memory import Memory
from ..retrieve.filters import confidence
from ..retrieve.fusion import Fused
from ..retrieve.pipeline import Retriever
from ..retrieve.request import SearchRequest
from ..retrieve.resources import StageResources
from ..store.base import Filters
from ..types import Hit, Scope
from .datasets import Case, Dataset, Question
from .presets import BENCH_PRESETS
from .qa import DEFAULT_QA_BUDGET, QAGrader, build_context, format_message
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
    embedding_cache_dir: Path | None = None
    keep_stores: bool = False
    qa: bool = False
    qa_configs: tuple[str, ...] = ()
    qa_budget: int = DEFAULT_QA_BUDGET
    qa_full_context: bool = False
    qa_workers: int = 4
    speaker_prefix: bool = False
    #: Close and reopen each store after ingest: questions are searched from its files.
    reopen: bool = False

    def search_configs(self) -> dict[str, SearchConfig]:
        """The named presets, with the candidate depth overridden when asked."""
        unknown = [name for name in self.configs if name not in BENCH_PRESETS]
        if unknown:
            raise InvalidInputError(
                f"unknown config(s) {unknown}; choose from {sorted(BENCH_PRESETS)}"
            )
        if not self.configs:
            raise InvalidInputError("name at least one config")
        stray = [name for name in self.qa_configs if name not in self.configs]
        if stray:
            raise InvalidInputError(f"--qa-config {stray} must also be in --config")
        out = {}
        for name in self.configs:
            config = BENCH_PRESETS[name]
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
    #: Seconds spent in Memory.consolidate (only when a config reads the fact layer).
    consolidate_seconds: float = 0.0
    facts: int = 0
    #: What answered the questions' searches: the store's vector and lexical backends.
    searched_from: str = ""


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
    full_context_qa: dict[str, dict[str, Any]] = field(default_factory=dict)
    qa_usage: dict[str, Any] = field(default_factory=dict)
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
            "options": {
                k: str(v) if isinstance(v, Path) else v for k, v in asdict(self.options).items()
            },
            "notes": self.notes,
            "started_at": self.started_at,
            "seconds": self.seconds,
            "peak_rss_bytes": self.peak_rss_bytes,
            "environment": self.environment,
        }


#: Called as ``progress(event, **values)``; events: case_start, ingested, question,
#: graded (with --qa), case_done.
ProgressHook = Callable[..., None]


def peak_rss_bytes() -> int:
    """Peak resident set size of this process so far."""
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return int(peak if sys.platform == "darwin" else peak * 1024)


def store_bytes(path: Path) -> int:
    """Bytes on disk of a SQLite store with its WAL and shared-memory files."""
    return sum(p.stat().st_size for p in path.parent.glob(path.name + "*") if p.is_file())


@contextmanager
def fresh_memory(
    work_dir: Path,
    embedder: Any,
    *,
    keep: bool = False,
    config: SearchConfig | None = None,
    gate: GateConfig | None = None,
) -> Iterator[Memory]:
    """A new Memory in its own temporary directory under ``work_dir``, removed afterwards;
    ``config`` is its search configuration (default: ``Memory``'s), ``gate`` its
    encoding gate (default: none)."""
    work_dir.mkdir(parents=True, exist_ok=True)
    directory = Path(tempfile.mkdtemp(prefix="store-", dir=work_dir))
    memory = Memory(path=directory / "memory.db", embedder=embedder, config=config, gate=gate)
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


def hit_signals(hits: Sequence[Hit]) -> dict[str, float]:
    """The abstention rule's inputs (best dense cosine, lexical hits) seen in ``hits``.

    Needs hits searched with ``explain=True``; for the abstention threshold sweep.
    """
    fused = [Fused(h.episode.id, h.score, dict(h.channels)) for h in hits]
    signals = confidence(fused)
    return {k: (v if v != float("-inf") else -1.0) for k, v in signals.items()}


def context_metrics(
    query: str,
    hits: Sequence[Hit],
    evidence: Sequence[str],
    key: str,
    counter: TokenCounter,
    now: datetime | None,
    options: BenchOptions,
) -> dict[str, float]:
    """Evidence recall of the real ``Memory.context`` packing at each budget.

    ``context_recall@B`` is the fraction of evidence among the episodes
    ``anamnesis.context.assemble`` packs into B tokens (hits and their neighbours, with
    headers); ``context_tokens@B`` the size of that context.
    """
    out: dict[str, float] = {}
    wanted = set(evidence)
    for budget in options.budgets:
        context = assemble(query, hits, budget_tokens=budget, counter=counter, now=now)
        included = {str(e.metadata.get(key, e.id)) for e in context.episodes}
        out[f"context_recall@{budget}"] = (
            len(wanted & included) / len(wanted) if wanted else math.nan
        )
        out[f"context_tokens@{budget}"] = float(context.tokens)
    return out


@dataclass(slots=True)
class CaseOutput:
    """What one case produced: its ingest measurement, per-question records, its total
    token count (what the full-context baseline hands over) and, with ``--qa
    --qa-full-context``, the full-context answers by question id."""

    speed: CaseSpeed
    records: list[dict[str, Any]]
    full_tokens: int
    full_context_qa: dict[str, dict[str, Any]] = field(default_factory=dict)


@contextmanager
def reopened(memory: Memory) -> Iterator[Memory]:
    """``memory`` closed and its file opened again (closed afterwards): searches then
    read what a fresh process reads, the vectors and postings saved beside the store
    and mapped, and a persisted approximate graph."""
    path = Path(memory.store.path)  # type: ignore[attr-defined]
    memory.close()
    again = Memory(path=path, embedder=memory.embedder, config=memory.config, warm=False)
    try:
        yield again
    finally:
        again.close()


def dense_searches(memory: Memory) -> dict[str, int]:
    """How many dense searches the store has answered through its approximate graph
    and by the exact scan (empty for a store without an in-process dense index)."""
    dense = getattr(memory.store, "_dense", None)
    if dense is None:
        return {}
    return {"graph": dense.graph_searches, "exact": dense.exact_searches}


def run_case(
    dataset: Dataset,
    case: Case,
    memory: Memory,
    options: BenchOptions,
    counter: TokenCounter,
    progress: ProgressHook | None = None,
    grader: QAGrader | None = None,
    resources: StageResources | None = None,
) -> CaseOutput:
    """Ingest one case into ``memory``, search it with every configuration and, when a
    grader is given, answer and grade each question from each QA configuration.

    Each question is asked at its own date when the dataset gives one, else just after
    the case's last message. ``resources`` (models and caches of post-fusion stages)
    may be shared across cases."""
    with ExitStack() as stack:
        user_id = "bench"
        resources = resources if resources is not None else StageResources()

        def ingested(done: int) -> None:
            if progress is not None:
                progress("ingested", case=case.id, done=done, total=len(case.messages))

        start = time.perf_counter()
        memory.add_many(case.messages, user_id=user_id, progress=ingested)
        ingest_seconds = time.perf_counter() - start
        consolidate_seconds, facts = 0.0, 0
        if any(c.uses_facts or c.uses_summaries for c in options.search_configs().values()):
            start = time.perf_counter()
            facts = memory.consolidate(user_id=user_id).added
            consolidate_seconds = time.perf_counter() - start
        # Build the store's indexes now (the approximate graph, when the store reaches its
        # threshold, and the BM25 postings): every question is then searched the same way,
        # not exactly while a background build is still running.
        memory.store.warm_up()
        if options.reopen:
            memory = stack.enter_context(reopened(memory))
            memory.store.warm_up()
        path = Path(getattr(memory.store, "path", ""))
        speed = CaseSpeed(
            case.id,
            len(case.messages),
            ingest_seconds,
            store_bytes(path) if path.name else 0,
            consolidate_seconds,
            facts,
            f"{memory.store.vector_backend}; {memory.store.lexical_backend}",
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
            name: Retriever(memory.store, memory.embedder, config, resources)
            for name, config in options.search_configs().items()
        }
        for retriever in retrievers.values():
            # The first search loads the dense matrix; keep that out of warm latencies.
            retriever.search("warm up", scope, Filters(), 1, False)

        records = []
        qa_names = set(options.qa_configs or retrievers)
        qa_jobs: list[tuple[dict[str, Any], Any, str]] = []
        conversation_end = case_end(case)
        for question in case.questions:
            filters = Filters()
            if options.as_of and question.asked_at is not None:
                filters = Filters(event_before=question.asked_at)
            now = question.asked_at or conversation_end
            for name, retriever in retrievers.items():
                before = dense_searches(memory)
                start = time.perf_counter()
                hits = retriever.search(question.text, scope, filters, options.depth, True, now)
                latency = time.perf_counter() - start
                after = dense_searches(memory)
                keys, sessions, tokens, rows = _hit_rows(hits, key, counter)
                metrics = score(
                    dataset.name,
                    keys,
                    sessions,
                    tokens,
                    question.evidence,
                    question.evidence_sessions,
                    corpus,
                    ks=ks,
                    budgets=options.budgets,
                )
                metrics.update(
                    context_metrics(
                        question.text, hits, question.evidence, key, counter, now, options
                    )
                )
                record = {
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
                    "dense_searches": {way: after[way] - before[way] for way in after},
                    "returned": len(hits),
                    "signals": hit_signals(hits),
                    "retrieved": rows,
                    "metrics": metrics,
                }
                records.append(record)
                if grader is not None and name in qa_names:
                    context = build_context([h.episode for h in hits], tokens, options.qa_budget)
                    qa_jobs.append((record, question, context))
            if progress is not None:
                progress("question", case=case.id, question=question.id)
        output = CaseOutput(speed, records, full_tokens)
        if grader is not None:
            _grade_all(grader, qa_jobs, case, options, output, progress)
        counter.clear()
        return output


@dataclass(slots=True)
class DevQuestion:
    """One scored question of a benchmark, ready to search (``dev_questions``)."""

    case: Case
    question: Question
    retriever: Retriever
    request: SearchRequest
    #: Evidence key of each episode of the case's store, by episode id.
    key: dict[str, str]


def dev_questions(
    dataset: Dataset, embedder: Any, config: SearchConfig, work_dir: Path
) -> Iterator[DevQuestion]:
    """Every scored question (evidence, no abstention) of ``dataset``, each as a search
    request against a fresh store of its case, ingested as ``anamnesis bench`` does
    (same stores, same as-of filter). For scripts that study the pipeline's candidates
    (``docs/experiments/scripts/fusion_sweep.py``, ``scripts/ranker_train.py``); prints each
    case done."""
    for case in dataset.cases:
        # Built with the configuration under study, so that studying the candidates of
        # a new ranker feature does not need a model fitted on it.
        with fresh_memory(work_dir, embedder, config=config) as memory:
            memory.add_many(case.messages, user_id="bench")
            scope = Scope("bench")
            episodes, _ = memory.store.list_episodes(scope, limit=10**7, offset=0)
            key = {e.id: str(e.metadata.get(dataset.evidence_key, e.id)) for e in episodes}
            retriever = Retriever(memory.store, memory.embedder, config)
            end = case_end(case)
            for q in case.questions:
                if q.abstention or not q.evidence:
                    continue
                filters = Filters(event_before=q.asked_at) if q.asked_at else Filters()
                request = retriever.request(q.text, scope, filters, q.asked_at or end)
                yield DevQuestion(case, q, retriever, request, key)
        print(f"{dataset.name} {case.id}: {len(case.questions)} questions", file=sys.stderr)


def case_end(case: Case) -> datetime | None:
    """When a case's questions are asked if they carry no date: just after its last message.

    LoCoMo and BEAM date their sessions but not their questions, which are asked once
    the conversation is over.
    """
    times = [m["event_time"] for m in case.messages if m.get("event_time") is not None]
    return max(times) + timedelta(seconds=1) if times else None


def _grade_all(
    grader: QAGrader,
    jobs: list[tuple[dict[str, Any], Any, str]],
    case: Case,
    options: BenchOptions,
    output: CaseOutput,
    progress: ProgressHook | None,
) -> None:
    """Answer and grade every job in a thread pool; full-context answers too if asked."""
    from concurrent.futures import ThreadPoolExecutor

    full: list[tuple[dict[str, Any], Any, str]] = []
    if options.qa_full_context:
        everything = "\n".join(format_message(m) for m in case.messages)
        for question in case.questions:
            slot: dict[str, Any] = {}
            output.full_context_qa[question.id] = slot
            full.append((slot, question, everything))

    def work(job: tuple[dict[str, Any], Any, str]) -> None:
        target, question, context = job
        today = question.asked_at
        graded = grader.grade(question, context, today)
        if "metrics" in target:
            target["qa"] = graded
        else:
            target.update(graded)
        if progress is not None:
            progress("graded", case=case.id, question=question.id)

    with ThreadPoolExecutor(max_workers=max(1, options.qa_workers)) as pool:
        list(pool.map(work, [*jobs, *full]))


def run(
    dataset: Dataset,
    options: BenchOptions,
    work_dir: Path,
    progress: ProgressHook | None = None,
    on_case: Callable[[RunResult, CaseOutput], None] | None = None,
) -> RunResult:
    """Run every case of ``dataset`` under ``options``; stores live under ``work_dir``.

    ``on_case`` is called after each case (the results folder writes as it goes).
    """
    options.search_configs()  # fail on unknown names before loading any model
    started = datetime.now(UTC)
    begin = time.perf_counter()
    embedder = get_embedder(options.embedder)
    caching = None
    if options.cache_embeddings or options.embedding_cache_dir is not None:
        caching = CachingEmbedder.with_cache_dir(embedder, options.embedding_cache_dir)
    counter = TokenCounter()
    resources = StageResources(vector_cache_dir=options.embedding_cache_dir)
    grader = make_grader(dataset.name, options) if options.qa else None
    result = RunResult(
        dataset=dataset.name,
        data_path=str(dataset.path),
        data_sha256=dataset.sha256,
        options=options,
        notes=dict(dataset.notes),
        started_at=started.isoformat(timespec="seconds"),
        environment=environment(embedder.name),
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
            output = run_case(dataset, case, memory, options, counter, progress, grader, resources)
        result.ingest.append(output.speed)
        result.records.extend(output.records)
        result.full_context_tokens[case.id] = output.full_tokens
        result.full_context_qa.update(output.full_context_qa)
        if on_case is not None:
            on_case(result, output)
        if progress is not None:
            progress("case_done", case=case.id)
    if caching is not None and caching.disk is not None:
        caching.disk.close()
    resources.close()
    result.seconds = time.perf_counter() - begin
    result.peak_rss_bytes = peak_rss_bytes()
    if caching is not None:
        result.environment["embedding_cache"] = _cache_counts(caching)
    if grader is not None:
        result.qa_usage = {
            "reader_model": grader.reader.model,
            "judge_model": grader.judge.model if grader.judge else None,
            "reader": asdict(grader.reader.usage),
            "judge": asdict(grader.judge.usage) if grader.judge else None,
            "budget_tokens": options.qa_budget,
        }
    return result


def make_grader(dataset: str, options: BenchOptions) -> QAGrader:
    """The reader and judge for ``--qa``, from ``ANAMNESIS_LLM_*``."""
    from .qa import JUDGE_MODEL_ENV, ChatClient

    reader = ChatClient.from_env()
    judge = None
    if dataset == "longmemeval":
        import os

        judge = ChatClient.from_env(os.environ.get(JUDGE_MODEL_ENV) or reader.model)
    return QAGrader(dataset, reader, judge, budget=options.qa_budget)


def environment(embedder_name: str) -> dict[str, Any]:
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
    return env


def _cache_counts(caching: CachingEmbedder) -> dict[str, int]:
    return {"embedded": caching.embedded, "reused": caching.reused, "from_disk": caching.from_disk}


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


def write_records(records: Sequence[dict[str, Any]], out: Path | IO[str]) -> None:
    """Per-question records as JSON lines (nan written as null), to a path or open file."""
    if isinstance(out, Path):
        with open(out, "w", encoding="utf-8") as handle:
            write_records(records, handle)
        return
    for record in records:
        out.write(json.dumps(_json_safe(record), ensure_ascii=False) + "\n")


def _json_safe(value: Any) -> Any:
    if isinstance(value, float) and value != value:
        return None
    if isinstance(value, dict):
        return {k: _json_safe(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_json_safe(v) for v in value]
    return value
