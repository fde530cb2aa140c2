"""The encoding gate's sweep: what each threshold keeps, and what it costs recall.

For every threshold (``off`` is no gate at all) each case is ingested into a fresh
store with the ``truememory`` gate at that threshold (its weights, salience floor and
category offsets unchanged), exactly as ``anamnesis bench`` ingests it
(``runner.run_case``, the ``default`` pipeline). Reported per threshold:

- the fraction of episodes admitted to the hot indexes;
- the fraction of evidence turns admitted (every turn some scored question names);
- recall@10 of the default pipeline over the hot indexes (a plain ``search``), over
  the scored questions (with evidence; LoCoMo's category 5 and LongMemEval's
  abstention questions left out), with the paired difference from ``off``;
- with ``--archive``, recall@10 of ``search(include_archive=True)``: what the archive
  path gives back of what the gate sent away;
- ingest time per episode (the case's vectors are read before the first point, so
  every point does the same embedding work), and the gate's share of it.

No published system reports these: True Memory's paper ("Storage Is Not Memory",
arXiv 2605.04897) disables its gate for every benchmark number.
"""

from __future__ import annotations

import json
import math
import shlex
import sys
import tempfile
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import click

from ..embed import get_embedder
from ..ingest.gate import GATE_PRESETS, GateConfig
from ..ingest.normalise import embedding_text
from ..memory import Memory
from ..memory.gate import GateVerbs
from ..retrieve.resources import StageResources
from ..store.base import Filters
from ..types import Scope
from . import datasets
from .metrics import paired_bootstrap, recall_at_k
from .runner import BenchOptions, case_end, fresh_memory, run_case
from .tokens import CachingEmbedder, TokenCounter

K = 10
USER = "bench"


@dataclass(slots=True)
class GatePoint:
    """What one threshold did over a whole data set (``None``: no gate)."""

    threshold: float | None
    episodes: int = 0
    admitted: int = 0
    evidence: int = 0
    evidence_admitted: int = 0
    ingest_seconds: float = 0.0
    gate_seconds: float = 0.0
    #: recall@10 per scored question, hot indexes only / with the archive, by question id.
    recall: dict[str, float] = field(default_factory=dict)
    archive_recall: dict[str, float] = field(default_factory=dict)

    @property
    def label(self) -> str:
        return "off" if self.threshold is None else f"{self.threshold:.2f}"


def _thresholds(value: str) -> list[float | None]:
    out: list[float | None] = []
    for part in value.split(","):
        part = part.strip()
        try:
            out.append(None if part == "off" else float(part))
        except ValueError:
            raise click.BadParameter(f"{part!r} is not a number or 'off'") from None
    return out


def _gate(threshold: float | None) -> GateConfig | None:
    if threshold is None:
        return None
    base = GATE_PRESETS["truememory"]
    assert base is not None
    return base.with_(threshold=threshold, name=f"truememory@{threshold:.2f}")


class _TimedGate:
    """Adds up the seconds ``Memory`` spends judging episodes (``GateVerbs._judge``)."""

    def __init__(self) -> None:
        self.seconds = 0.0

    def __enter__(self) -> _TimedGate:
        original = GateVerbs._judge
        self._original = original

        def timed(memory: Any, *args: Any, **kwargs: Any) -> Any:
            start = time.perf_counter()
            try:
                return original(memory, *args, **kwargs)
            finally:
                self.seconds += time.perf_counter() - start

        setattr(GateVerbs, "_judge", timed)  # noqa: B010 (a method, swapped and restored)
        return self

    def __exit__(self, *exc: object) -> None:
        setattr(GateVerbs, "_judge", self._original)  # noqa: B010


def _scored(question: datasets.Question) -> bool:
    return bool(question.evidence) and not question.abstention


def _archive_recall(
    memory: Memory, dataset: datasets.Dataset, case: datasets.Case
) -> dict[str, float]:
    """recall@10 of ``search(include_archive=True)`` for each scored question."""
    key = dataset.evidence_key
    end = case_end(case)
    out = {}
    for q in case.questions:
        if not _scored(q):
            continue
        filters = Filters(event_before=q.asked_at) if q.asked_at else Filters()
        hits = memory.search(
            q.text,
            user_id=USER,
            limit=K,
            filters=filters,
            now=q.asked_at or end,
            include_archive=True,
        )
        keys = [str(h.episode.metadata.get(key, h.episode.id)) for h in hits]
        out[q.id] = recall_at_k(keys, q.evidence, K)
    return out


def run_gate_sweep(
    dataset: datasets.Dataset,
    thresholds: list[float | None],
    embedder_name: str,
    cache_dir: Path | None,
    archive: bool,
    log: Any = None,
    on_case: Any = None,
) -> list[GatePoint]:
    """The sweep over ``thresholds`` on every case of ``dataset`` (see the module);
    ``on_case(points, cases_done)`` is called after each case."""
    embedder = CachingEmbedder.with_cache_dir(get_embedder(embedder_name), cache_dir)
    options = BenchOptions(
        configs=("default",), embedder=embedder_name, budgets=(), embedding_cache_dir=cache_dir
    )
    counter = TokenCounter()
    resources = StageResources(vector_cache_dir=cache_dir)
    points = [GatePoint(t) for t in thresholds]
    key = dataset.evidence_key
    with tempfile.TemporaryDirectory(prefix="anamnesis-gate-") as work:
        for case in dataset.cases:
            evidence = {e for q in case.questions if _scored(q) for e in q.evidence}
            # Vectors read from the disk cache (or computed) before the first point, so
            # that every point's ingest time counts the same work.
            embedder.embed_documents(
                [embedding_text(m["content"], m.get("speaker")) for m in case.messages]
            )
            for point in points:
                with (
                    _TimedGate() as timer,
                    fresh_memory(Path(work), embedder, gate=_gate(point.threshold)) as memory,
                ):
                    output = run_case(dataset, case, memory, options, counter, resources=resources)
                    hot, total = memory.store.list_episodes(Scope(USER), limit=10**7, offset=0)
                    hot_keys = {str(e.metadata.get(key, e.id)) for e in hot}
                    if archive:
                        point.archive_recall.update(_archive_recall(memory, dataset, case))
                point.episodes += len(case.messages)
                point.admitted += total
                point.evidence += len(evidence)
                point.evidence_admitted += len(evidence & hot_keys)
                point.ingest_seconds += output.speed.ingest_seconds
                point.gate_seconds += timer.seconds
                for record in output.records:
                    value = record["metrics"].get(f"recall@{K}", math.nan)
                    if record["evidence"] and not record["abstention"] and not math.isnan(value):
                        point.recall[record["question_id"]] = value
                if log is not None:
                    log(f"{case.id} gate {point.label}: {total}/{len(case.messages)} admitted")
            if on_case is not None:
                on_case(points, dataset.cases.index(case) + 1)
    if embedder.disk is not None:
        embedder.disk.close()
    resources.close()
    return points


def _mean(values: dict[str, float]) -> float:
    return sum(values.values()) / len(values) if values else math.nan


def gate_markdown(points: list[GatePoint], archive: bool) -> str:
    """The sweep as a Markdown table (differences paired with the ``off`` row)."""
    base = next((p for p in points if p.threshold is None), None)
    head = "| threshold | episodes admitted | evidence turns admitted | recall@10 | Δ vs off |"
    rule = "|---|---|---|---|---|"
    if archive:
        head += " recall@10 with archive |"
        rule += "---|"
    head += " ingest ms/episode | gate ms/episode |"
    rule += "---|---|"
    lines = [head, rule]
    for p in points:
        diff = "—"
        if base is not None and p is not base:
            ids = sorted(base.recall)
            d = paired_bootstrap([p.recall.get(i, 0.0) for i in ids], [base.recall[i] for i in ids])
            diff = f"{100 * d['diff']:+.1f} [{100 * d['low']:+.1f}, {100 * d['high']:+.1f}]"
        row = (
            f"| {p.label} | {100 * p.admitted / max(p.episodes, 1):.1f}% "
            f"({p.admitted:,}/{p.episodes:,}) | "
            f"{100 * p.evidence_admitted / max(p.evidence, 1):.1f}% "
            f"({p.evidence_admitted:,}/{p.evidence:,}) | {100 * _mean(p.recall):.1f} | {diff} |"
        )
        if archive:
            row += f" {100 * _mean(p.archive_recall):.1f} |"
        row += (
            f" {1000 * p.ingest_seconds / max(p.episodes, 1):.2f} |"
            f" {1000 * p.gate_seconds / max(p.episodes, 1):.2f} |"
        )
        lines.append(row)
    questions = len(base.recall) if base is not None else len(points[0].recall)
    lines.append("")
    lines.append(f"{questions} scored questions; Δ: paired bootstrap 95% interval, points.")
    return "\n".join(lines)


@click.command(name="gate")
@click.argument("dataset", type=click.Choice(["locomo", "longmemeval", "beam"]))
@click.option("--data", type=click.Path(exists=True, dir_okay=False, path_type=Path), required=True)
@click.option(
    "--thresholds",
    default="off,0.2,0.3,0.4,0.5",
    show_default=True,
    help="Comma-separated gate thresholds; 'off' is no gate.",
)
@click.option("--limit", type=click.IntRange(min=1), default=None, help="Cases to run.")
@click.option("--embedder", default="minilm", show_default=True)
@click.option(
    "--embedding-cache-dir",
    type=click.Path(file_okay=False, path_type=Path),
    default=None,
    help="Reuse (and add to) cached vectors in this directory.",
)
@click.option(
    "--archive/--no-archive",
    default=True,
    show_default=True,
    help="Also score search(include_archive=True).",
)
@click.option(
    "--out",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="Write the points as JSON here, rewritten after every case.",
)
def gate_command(
    dataset: str,
    data: Path,
    thresholds: str,
    limit: int | None,
    embedder: str,
    embedding_cache_dir: Path | None,
    archive: bool,
    out: Path | None,
) -> None:
    """The encoding gate's sweep: episodes and evidence admitted, recall@10 at each threshold."""
    from ..cli_errors import handled

    command = "anamnesis " + shlex.join(sys.argv[1:])

    def save(points: list[GatePoint], cases: int) -> None:
        if out is not None:
            payload = {"command": command, "cases": cases, "points": [asdict(p) for p in points]}
            out.write_text(json.dumps(payload, indent=2))

    with handled():
        loaded = datasets.load(dataset, data, limit=limit)
        points = run_gate_sweep(
            loaded,
            _thresholds(thresholds),
            embedder,
            embedding_cache_dir,
            archive,
            log=lambda line: click.echo(line, err=True),
            on_case=save,
        )
    click.echo(command + "\n")
    click.echo(gate_markdown(points, archive))
