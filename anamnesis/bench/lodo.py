"""Leave one data set out: the judgement every default must pass (issue 22).

A stage, feature, weight or model enters the default only if it gains on a data set it
was not designed or fitted on. ``anamnesis bench lodo`` runs the three dev data sets
(LoCoMo, BEAM 128K, LongMemEval-S dev) with ``hybrid``, the default, the learned
ranker on top of it (``ranker``) and the default with each of its stages switched off,
every row of a data set on the same stores, and prints

- the default against hybrid (recall at the data set's cut-off, MRR, ndcg@5, search
  p50 as a ratio measured in the same run), and the ranker against the default;
- each stage: the default with it minus the default without it, per data set, marked
  with what the stage was designed on (by reading that data set's misses) and fitted
  on (its numbers chosen there). A cell on a data set that is neither is held out.

With ``--dumps`` (the candidate dumps of ``scripts/ranker_train.py dump``) it also
refits the default's numbers on two data sets and judges them on the third
(``bench.refit``). Where a stage was designed on the only data set it acts on (the
speaker channel acts only where speakers have names), ``STAGE_ROWS`` says why it
should hold elsewhere.
"""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import click
import numpy as np

from .metrics import paired_bootstrap
from .presets import BENCH_PRESETS

#: The dev data sets and their files in the data directory.
DATASETS = {
    "locomo": "locomo10.json.gz",
    "beam": "beam_128k.json.gz",
    "longmemeval": "longmemeval_s_dev.json.gz",
}
#: What each table reports per data set: (label, metric in the run's records).
METRICS: dict[str, tuple[tuple[str, str], ...]] = {
    "locomo": (("recall@10", "recall@10"), ("MRR", "mrr"), ("ndcg@5", "ndcg@5")),
    "beam": (("recall@20", "recall@20"), ("MRR", "mrr"), ("ndcg@5", "ndcg@5")),
    "longmemeval": (
        ("turn recall_all@10", "lme.turn.recall_all@10"),
        ("MRR", "mrr"),
        ("ndcg@5", "ndcg@5"),
        ("session ndcg_any@5", "lme.session.ndcg_any@5"),
    ),
}


@dataclass(frozen=True, slots=True)
class StageRow:
    """A stage of the default, the benchmark configuration without it, and where it
    came from: the data sets whose misses it was designed from, those its numbers were
    chosen on, the chats it can change, and why it should hold on others."""

    name: str
    without: str
    designed_on: frozenset[str]
    fitted_on: frozenset[str]
    acts_on: str
    why: str


def _sets(*names: str) -> frozenset[str]:
    return frozenset(names)


#: The data sets the channel weights and the score mix were swept on (their first halves).
_SWEPT = frozenset({"locomo", "beam"})
#: The priors' strengths were chosen on all three.
_ALL = frozenset(DATASETS)
#: The default's stages (``anamnesis.config.DEFAULT``), each with its provenance as
#: recorded in docs/experiments.
STAGE_ROWS: tuple[StageRow, ...] = (
    StageRow(
        "speaker channel",
        "default-no-speakers",
        _sets("locomo"),
        _SWEPT,
        "chats between named people",
        "a question that names a person is about what that person said; the name itself "
        "is not in their own turns, so BM25 over that speaker's turns without it finds them",
    ),
    StageRow(
        "pseudo-relevance feedback",
        "default-no-prf",
        _sets(),
        _SWEPT,
        "every chat",
        "RM3-style expansion from the best hits, a standard IR technique",
    ),
    StageRow(
        "session channel",
        "default-no-session",
        _sets(),
        _SWEPT,
        "every chat",
        "evidence clusters in the sessions of the best hits, in every conversation",
    ),
    StageRow(
        "replies channel",
        "default-no-replies",
        _sets("locomo"),
        _SWEPT,
        "every chat",
        "the answer to a matched question is the turn after it, in any dialogue",
    ),
    StageRow(
        "role channels",
        "default-no-roles",
        _sets("longmemeval", "beam"),
        _sets("longmemeval", "beam"),
        "user–assistant chats",
        "questions about the user are answered by the user's own turns",
    ),
    StageRow(
        "event time",
        "default-no-time",
        _sets("locomo"),
        _ALL,
        "questions that name a time",
        "a question that names a time is answered by turns dated in it",
    ),
    StageRow(
        "question prior",
        "default-no-question-prior",
        _sets("locomo"),
        _ALL,
        "chats without roles",
        "a short turn that asks shares the question's words but does not answer it",
    ),
    StageRow(
        "place prior",
        "default-no-place",
        _sets(),
        _sets(),
        '"where" questions',
        "a question that asks where is answered by a turn that names a place (answer-type "
        "matching in factoid QA); written for the bundled demo, its boost borrowed untuned",
    ),
    StageRow(
        "exact-match guard",
        "default-no-exact",
        _sets(),
        _sets(),
        "questions that type a rare identifier",
        "an identifier the user typed that only one or two turns hold names those turns; "
        "written for a store of templated turns, nothing tuned",
    ),
    StageRow(
        "summaries and profiles",
        "default-no-summaries",
        _sets("locomo"),
        _sets(),
        "every chat, once consolidate has run",
        "a session's salient sentences and a person's facts say in few words what many "
        "turns say; matching them finds the turns behind them (two salience cues were "
        "read off one LoCoMo conversation; the weight was never tuned)",
    ),
    StageRow(
        "score mix",
        "default-no-score-mix",
        _sets(),
        _SWEPT,
        "every chat",
        "a channel that is sure of a hit should outvote one that ranks it first by a hair",
    ),
)
#: Candidate stages judged like the default's own, not in it: (name, configuration).
CANDIDATES: tuple[tuple[str, str], ...] = (
    ("learned ranker", "ranker"),
    ("equal weights, no mix", "default-equal"),
    ("the default before issue 22 without its ranker", "full-priors"),
)
#: Variants of the default's summaries channel (issue 23), run with ``--configs``.
SUMMARY_CANDIDATES: tuple[tuple[str, str], ...] = (
    ("summaries without the profiles", "default-summaries-only"),
    ("profiles without the summaries", "default-profiles"),
    ("without the session channel", "default-summaries-no-session"),
)
#: Variants of the session channel in chats with two sides (study "The session channel
#: in chats with two sides"), run with
#: ``--configs``: the other side's turns left out, or opened at a share of their score.
SESSION_CANDIDATES: tuple[tuple[str, str], ...] = (
    ("session channel, the addressed side only", "default-session-role"),
    ("session channel, the other side at 1/4", "default-session-other-25"),
    ("session channel, the other side at 1/2", "default-session-other-50"),
)
#: Every configuration a data set's run holds.
CONFIGS: tuple[str, ...] = (
    "hybrid",
    "default",
    *(row.without for row in STAGE_ROWS),
    *(config for _, config in CANDIDATES),
)


Records = dict[str, dict[str, dict[str, Any]]]


def load_records(path: Path) -> Records:
    """A run's scored records by configuration, then question id (abstention and
    questions without evidence left out, as in the run's report)."""
    by_config: Records = defaultdict(dict)
    with open(path, encoding="utf-8") as handle:
        for line in handle:
            r = json.loads(line)
            if r["abstention"] or not (r["evidence"] or r["evidence_sessions"]):
                continue
            by_config[r["config"]][r["question_id"]] = r
    return dict(by_config)


def _paired(records: Records, a: str, b: str, metric: str) -> tuple[list[float], list[float]]:
    shared = [q for q in records.get(a, {}) if q in records.get(b, {})]
    pairs = [
        (records[a][q]["metrics"].get(metric), records[b][q]["metrics"].get(metric)) for q in shared
    ]
    kept = [(x, y) for x, y in pairs if x is not None and y is not None]
    return [x for x, _ in kept], [y for _, y in kept]


def difference(records: Records, a: str, b: str, metric: str) -> str:
    """``a − b`` on ``metric`` over the questions both scored, with a paired bootstrap
    95% interval, in points; a significant change is bold, and "no change" where every
    question scored the same."""
    x, y = _paired(records, a, b, metric)
    if not x:
        return "–"
    if x == y:
        return "no change"
    test = paired_bootstrap(x, y)
    cell = f"{100 * test['diff']:+.1f} [{100 * test['low']:+.1f}, {100 * test['high']:+.1f}]"
    significant = test["low"] > 0 or test["high"] < 0
    return f"**{cell}**" if significant else cell


def _mean(records: Records, config: str, metric: str) -> str:
    values = [r["metrics"].get(metric) for r in records.get(config, {}).values()]
    kept = [v for v in values if v is not None]
    return f"{100 * float(np.mean(kept)):.1f}" if kept else "–"


def _p50(records: Records, config: str) -> float:
    return float(np.median([r["latency_ms"] for r in records.get(config, {}).values()] or [0]))


def default_table(runs: dict[str, Records]) -> list[str]:
    """The default against hybrid, and the candidates against the default."""
    lines = [
        "| data set (questions) | metric | hybrid | default | default − hybrid "
        "| ranker − default | p50 default / hybrid |",
        "|---|---|---|---|---|---|---|",
    ]
    for name, records in runs.items():
        n = len(records.get("default", {}))
        ratio = _p50(records, "default") / max(_p50(records, "hybrid"), 1e-9)
        for label, metric in METRICS[name]:
            lines.append(
                f"| {name} ({n}) | {label} | {_mean(records, 'hybrid', metric)} "
                f"| {_mean(records, 'default', metric)} "
                f"| {difference(records, 'default', 'hybrid', metric)} "
                f"| {difference(records, 'ranker', 'default', metric)} | {ratio:.2f}× |"
            )
    return lines


def _role(row: StageRow, name: str) -> str:
    if name in row.designed_on:
        return "designed here"
    if name in row.fitted_on:
        return "fitted here"
    return "held out"


def stage_table(runs: dict[str, Records], rows: Sequence[StageRow] = STAGE_ROWS) -> list[str]:
    """Each stage: the default minus the default without it, per data set."""
    names = list(runs)
    header = ["stage", "acts on"] + [
        f"{name} {label}" for name in names for label, _ in METRICS[name][:3]
    ]
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    ran = {config for records in runs.values() for config in records}
    for row in rows:
        if row.without not in ran:
            continue
        cells = [row.name, row.acts_on]
        for name in names:
            role = _role(row, name)
            for i, (_, metric) in enumerate(METRICS[name][:3]):
                cell = difference(runs[name], "default", row.without, metric)
                cells.append(f"{cell} ({role})" if i == 0 else cell)
        lines.append("| " + " | ".join(cells) + " |")
    for label, config in (*CANDIDATES, *SUMMARY_CANDIDATES, *SESSION_CANDIDATES):
        if config not in ran:
            continue
        cells = [f"*{label}* (candidate: it − default)", "–"]
        for name in names:
            for _, metric in METRICS[name][:3]:
                cells.append(difference(runs[name], config, "default", metric))
        lines.append("| " + " | ".join(cells) + " |")
    return lines


def why_table(rows: Iterable[StageRow] = STAGE_ROWS) -> list[str]:
    """Where each stage came from and why it should hold on chats it was not made on."""
    lines = [
        "| stage | designed on | fitted on | why it should hold elsewhere |",
        "|---|---|---|---|",
    ]
    for row in rows:
        designed = ", ".join(sorted(row.designed_on)) or "no benchmark"
        fitted = ", ".join(sorted(row.fitted_on)) or "nothing fitted"
        lines.append(f"| {row.name} | {designed} | {fitted} | {row.why} |")
    return lines


def load_runs(out: Path) -> dict[str, Records]:
    """Every data set's records under ``out`` (``out/<data set>/records.jsonl``)."""
    return {
        name: load_records(out / name / "records.jsonl")
        for name in DATASETS
        if (out / name / "records.jsonl").exists()
    }


def tables(out: Path) -> str:
    """The three tables, as markdown."""
    runs = load_runs(out)
    parts = [
        "### The default against hybrid",
        *default_table(runs),
        "",
        "### Each stage: default − default without it",
        *stage_table(runs),
        "",
        "### Where each stage came from",
        *why_table(),
    ]
    return "\n".join(parts)


def run(
    data_dir: Path,
    out: Path,
    *,
    only: Sequence[str] = (),
    embedder: str = "minilm",
    cache_dir: Path | None = None,
    configs: Sequence[str] = CONFIGS,
) -> None:
    """Run every data set (or ``only`` these) with ``configs`` (default ``CONFIGS``),
    one results folder each under ``out``; a data set whose records are there already
    is not run again. ``hybrid`` and ``default`` are always run: every table compares
    with them."""
    from .api import run_benchmark
    from .runner import BenchOptions

    wanted = tuple(dict.fromkeys(("hybrid", "default", *configs)))
    options = BenchOptions(configs=wanted, embedder=embedder, embedding_cache_dir=cache_dir)
    for name, file in DATASETS.items():
        if (only and name not in only) or (out / name / "records.jsonl").exists():
            continue
        run_benchmark(name, data_dir / file, options=options, out_dir=out / name)


@click.command(name="lodo")
@click.option(
    "--data-dir",
    type=click.Path(exists=True, file_okay=False, path_type=Path),
    help="The folder holding the three data sets' files (omit to re-print the tables).",
)
@click.option("--out", type=click.Path(file_okay=False, path_type=Path), required=True)
@click.option("--only", multiple=True, type=click.Choice(sorted(DATASETS)), help="Repeatable.")
@click.option("--embedder", default="minilm", show_default=True)
@click.option("--embedding-cache-dir", type=click.Path(file_okay=False, path_type=Path))
@click.option(
    "--configs",
    help="Comma-separated configurations to run (default: every stage's row and the "
    "candidates; hybrid and default are always run), e.g. default-summaries.",
)
@click.option(
    "--dumps",
    multiple=True,
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    help="Candidate dumps (scripts/ranker_train.py dump): also refit the default's "
    "numbers on two data sets and judge them on the third. Repeatable.",
)
@click.option(
    "--dumped-with",
    default="full-priors",
    show_default=True,
    help="The configuration the dumps ran (to check the replay against it).",
)
def lodo_command(
    data_dir: Path | None,
    out: Path,
    only: tuple[str, ...],
    embedder: str,
    embedding_cache_dir: Path | None,
    configs: str | None,
    dumps: tuple[Path, ...],
    dumped_with: str,
) -> None:
    """Leave one data set out: the default, each of its stages, and candidates."""
    from ..cli_errors import handled

    with handled():
        if data_dir is not None:
            chosen = [c.strip() for c in configs.split(",") if c.strip()] if configs else CONFIGS
            run(
                data_dir,
                out,
                only=only,
                embedder=embedder,
                cache_dir=embedding_cache_dir,
                configs=chosen,
            )
        click.echo(tables(out))
        if dumps:
            from . import refit

            data = refit.load_dumps(dumps)
            dumped = refit.Numbers.of(BENCH_PRESETS[dumped_with])
            lines, fitted = refit.lodo(data)
            click.echo("\n### Replay: the default's numbers refitted without the data set\n")
            click.echo("\n".join([*refit.fidelity(data, dumped), "", *lines, ""]))
            for name, numbers in fitted.items():
                left = "every data set" if name == "all" else f"all but {name}"
                click.echo(f"- fitted on {left}: {numbers.describe()}")
            click.echo("\n### Replay: each stage, its numbers refitted without the data set\n")
            click.echo("\n".join(refit.stage_lodo(data)))
