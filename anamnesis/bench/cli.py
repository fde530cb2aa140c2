"""``anamnesis bench ...``: the benchmark commands (also ``python -m anamnesis.bench``)."""

from __future__ import annotations

import json
import shlex
from pathlib import Path
from typing import Any

import click
from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TaskID,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)

from ..cli_errors import handled
from ..retrieve.filters import ABSTAIN_RULES
from .abstention import THRESHOLDS
from .agent_life import agent_life_command
from .facts_eval import facts_command
from .gate import gate_command
from .lifecycle import lifecycle_command
from .lodo import lodo_command
from .options import data_option, results_option
from .presets import BENCH_PRESETS
from .qa import DEFAULT_QA_BUDGET
from .runner import DEFAULT_DEPTH, BenchOptions
from .scoring import DEFAULT_BUDGETS
from .surface_commands import inspector_command, mcp_command, rest_command
from .year import year_command

console = Console()
#: A finished (or interrupted) results folder, as ``bench report`` and ``abstention`` take.
_RESULTS_FOLDER = click.Path(exists=True, file_okay=False, path_type=Path)


def _ints(value: str, what: str) -> tuple[int, ...]:
    try:
        out = tuple(int(v.replace("_", "")) for v in value.split(",") if v.strip())
    except ValueError as exc:
        raise click.BadParameter(f"{what} must be comma-separated integers, got {value!r}") from exc
    if not out or any(v <= 0 for v in out):
        raise click.BadParameter(f"{what} must be positive integers, got {value!r}")
    return out


def _configs(value: str) -> tuple[str, ...]:
    names = tuple(v.strip() for v in value.split(",") if v.strip())
    unknown = [n for n in names if n not in BENCH_PRESETS]
    if unknown or not names:
        raise click.BadParameter(
            f"unknown config(s) {unknown or value!r}; "
            f"choose from {', '.join(sorted(BENCH_PRESETS))}"
        )
    return names


class _Bars:
    """Rich progress bars fed by the runner's progress events."""

    def __init__(self, progress: Progress, cases: int, questions: int) -> None:
        self.progress = progress
        self.cases = progress.add_task("cases", total=cases)
        self.questions = progress.add_task("questions", total=questions)
        self.ingest: TaskID | None = None

    def __call__(self, event: str, **values: Any) -> None:
        if event == "case_start":
            if self.ingest is not None:
                self.progress.remove_task(self.ingest)
            self.ingest = self.progress.add_task(
                f"ingest {values['case']}", total=values["messages"]
            )
        elif event == "ingested" and self.ingest is not None:
            self.progress.update(self.ingest, completed=values["done"])
        elif event == "question":
            self.progress.advance(self.questions)
        elif event == "case_done":
            self.progress.advance(self.cases)


def _progress() -> Progress:
    return Progress(
        TextColumn("{task.description:<28}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        TimeRemainingColumn(),
        console=console,
        transient=False,
    )


def dataset_command(name: str, help_text: str) -> click.Command:
    """A click command that runs dataset ``name``."""

    @click.command(name=name, help=help_text)
    @data_option("The dataset file (JSON, optionally gzip-compressed).")
    @click.option(
        "--config",
        "configs",
        default="bm25,dense,hybrid",
        show_default=True,
        help="Comma-separated pipeline presets to compare on the same stores.",
    )
    @click.option(
        "--embedder",
        default="minilm",
        show_default=True,
        help="minilm, minilm-int8, edge (static wordllama), e5 or openai:MODEL.",
    )
    @click.option(
        "--skip",
        type=click.IntRange(min=0),
        default=0,
        help="Leave out the first N cases (to split a run; merge with 'bench report --merge').",
    )
    @click.option(
        "--limit",
        type=click.IntRange(min=1),
        default=None,
        help="Only the first N cases (conversations, or LongMemEval questions).",
    )
    @click.option(
        "--depth",
        type=click.IntRange(1, 1000),
        default=DEFAULT_DEPTH,
        show_default=True,
        help="Hits requested per search.",
    )
    @click.option(
        "--candidates",
        type=click.IntRange(1, 10000),
        default=None,
        help="Override every config's per-channel candidate count.",
    )
    @click.option(
        "--budgets",
        default=",".join(map(str, DEFAULT_BUDGETS)),
        show_default=True,
        help="Token budgets for evidence recall at a context budget.",
    )
    @click.option(
        "--as-of/--no-as-of",
        default=True,
        show_default=True,
        help="Hide episodes dated after the question (where questions are dated).",
    )
    @click.option(
        "--embedding-cache/--no-embedding-cache",
        default=True,
        show_default=True,
        help="Reuse vectors of text already embedded in this run (results unchanged).",
    )
    @click.option(
        "--embedding-cache-dir",
        type=click.Path(file_okay=False, path_type=Path),
        default=None,
        help="Also keep document vectors on disk here, so repeated runs skip embedding "
        "(results unchanged; ingest speed then measures only the write path).",
    )
    @click.option("--keep-stores", is_flag=True, help="Keep each case's SQLite store.")
    @click.option(
        "--reopen",
        is_flag=True,
        help="Close and reopen each store after ingest, so questions are searched from "
        "what is saved beside it (mapped vectors and postings, a persisted graph).",
    )
    @click.option(
        "--speaker-prefix",
        is_flag=True,
        help="Ablation: store each message as '<speaker or role>: <text>'.",
    )
    @click.option(
        "--qa",
        is_flag=True,
        help="Also answer each question with an LLM and grade it officially "
        "(needs ANAMNESIS_LLM_BASE_URL and ANAMNESIS_LLM_MODEL).",
    )
    @click.option(
        "--qa-config",
        "qa_configs",
        default=None,
        help="Configs to answer from [default: all of --config].",
    )
    @click.option(
        "--qa-budget",
        type=click.IntRange(min=1),
        default=DEFAULT_QA_BUDGET,
        show_default=True,
        help="Tokens of retrieved context handed to the reader.",
    )
    @click.option(
        "--qa-full-context",
        is_flag=True,
        help="Also answer from the whole conversation (the full-context baseline).",
    )
    @click.option(
        "--qa-workers",
        type=click.IntRange(1, 64),
        default=4,
        show_default=True,
        help="Concurrent LLM requests.",
    )
    @results_option("<dataset>")
    def command(
        data: Path,
        configs: str,
        embedder: str,
        skip: int,
        limit: int | None,
        depth: int,
        candidates: int | None,
        budgets: str,
        as_of: bool,
        embedding_cache: bool,
        embedding_cache_dir: Path | None,
        keep_stores: bool,
        reopen: bool,
        speaker_prefix: bool,
        qa: bool,
        qa_configs: str | None,
        qa_budget: int,
        qa_full_context: bool,
        qa_workers: int,
        out_dir: Path | None,
    ) -> None:
        from . import datasets
        from .api import run_dataset
        from .report import print_summary

        options = BenchOptions(
            configs=_configs(configs),
            embedder=embedder,
            depth=depth,
            candidates=candidates,
            budgets=_ints(budgets, "--budgets"),
            as_of=as_of,
            cache_embeddings=embedding_cache,
            embedding_cache_dir=embedding_cache_dir,
            keep_stores=keep_stores,
            reopen=reopen,
            speaker_prefix=speaker_prefix,
            qa=qa,
            qa_configs=_configs(qa_configs) if qa_configs else (),
            qa_budget=qa_budget,
            qa_full_context=qa_full_context,
            qa_workers=qa_workers,
        )
        invocation = _invocation(name, click.get_current_context())
        with handled():
            dataset = datasets.load(name, data, limit=limit, skip=skip)
            with _progress() as progress:
                output = run_dataset(
                    dataset,
                    options,
                    out_dir=out_dir,
                    progress=_Bars(progress, len(dataset.cases), dataset.n_questions),
                    command=invocation,
                )
        # Tables need ~100 columns; a pipe or log file gets them unwrapped.
        wide = console if console.is_terminal else Console(width=120)
        print_summary(output.summary, wide)
        console.print(f"results: {output.out_dir}")

    return command


def _invocation(name: str, ctx: click.Context) -> str:
    """The command line that reproduces this run: the data, configs, embedder and depth
    always, other options when they differ from their defaults."""
    from click.core import ParameterSource

    always = {"data", "configs", "embedder", "depth", "sizes"}
    flags = {p.name: p.opts[0] for p in ctx.command.params if p.opts}
    parts = ["anamnesis", "bench", name]
    for key, value in ctx.params.items():
        defaulted = ctx.get_parameter_source(key) is ParameterSource.DEFAULT
        if key == "out_dir" or (defaulted and key not in always) or value is None:
            continue
        flag = flags.get(key, "--" + key.replace("_", "-"))
        if isinstance(value, bool):
            if key in ("as_of", "embedding_cache"):
                parts.append(flag if value else flag.replace("--", "--no-", 1))
            elif value:
                parts.append(flag)
            continue
        if isinstance(value, tuple):
            value = ",".join(str(v) for v in value)
        parts += [flag, str(value)]
    return " ".join(shlex.quote(p) for p in parts)


@click.group(name="bench", help="Reproducible retrieval and speed benchmarks.")
def bench() -> None:
    """The benchmark command group."""


bench.add_command(
    dataset_command(
        "locomo",
        "LoCoMo: one memory per conversation; turn (dia_id) and session evidence; "
        "category 5 reported separately.",
    )
)
bench.add_command(
    dataset_command(
        "longmemeval",
        "LongMemEval S/oracle: one memory per question; the official recall_any/recall_all/"
        "ndcg_any at turn and session level; abstention excluded.",
    )
)
bench.add_command(lifecycle_command)
bench.add_command(year_command)
bench.add_command(lodo_command)
bench.add_command(
    dataset_command(
        "beam",
        "BEAM: one memory per conversation; message-id evidence per ability; abstention "
        "reported separately.",
    )
)
bench.add_command(facts_command)
bench.add_command(mcp_command)
bench.add_command(rest_command)
bench.add_command(inspector_command)
bench.add_command(gate_command)
bench.add_command(agent_life_command)


@bench.command(name="scale")
@data_option(
    "A LongMemEval file: its messages' sentences come first (--text sentences) or its "
    "turns are the text (--text turns); its questions are the queries."
)
@click.option(
    "--sizes",
    default="10000,100000,1000000",
    show_default=True,
    help="Store sizes (episodes) to measure at, grown in one store.",
)
@click.option(
    "--text",
    type=click.Choice(["sentences", "turns"]),
    default="sentences",
    show_default=True,
    help="sentences: every episode a distinct sentence of LongMemEval S, then LoCoMo and "
    "BEAM (split at line breaks and sentence ends, pieces of 20+ characters and 10+ "
    "letters, first occurrence kept, in file order; distinct pairs of adjacent sentences "
    "of one session follow if more are needed; about 1.08M sentences from the dev "
    "files); turns: LongMemEval turns, cycled with new sessions once they run out.",
)
@click.option(
    "--extra-data",
    "extra",
    multiple=True,
    metavar="NAME=PATH",
    help="A data set (locomo or beam) whose sentences follow the --data file's; "
    "repeatable. Default: locomo10.json.gz and beam_128k.json.gz beside --data.",
)
@click.option(
    "--scope-size",
    type=click.IntRange(min=1),
    default=None,
    help="Put consecutive blocks of this many episodes in scopes of their own (e.g. 1000: "
    "a 1M store of 1,000 scopes of 1,000) and search inside one small scope per query, "
    "spread over the store. Default: one scope holds everything.",
)
@click.option(
    "--embedder",
    default="minilm",
    show_default=True,
    help="minilm, or edge (static wordllama, much faster to build with).",
)
@click.option(
    "--vector-pool",
    "pool",
    type=click.IntRange(min=1),
    default=None,
    help="Embed only this many distinct texts, then reuse their vectors in "
    "rotation (speed measurements only).",
)
@click.option(
    "--config",
    "configs",
    default="fast,default",
    show_default=True,
    help="Comma-separated presets whose search latency is measured.",
)
@click.option(
    "--queries",
    type=click.IntRange(min=1),
    default=50,
    show_default=True,
    help="Search latency is measured over this many of the data sets' questions.",
)
@click.option(
    "--no-byte-scan",
    "no_scan",
    is_flag=True,
    help="Do not scan the store's files for the forgotten episode's text.",
)
@click.option("--keep-store", is_flag=True, help="Keep the grown SQLite store.")
@results_option("scale")
def scale_command(
    data: Path,
    sizes: str,
    text: str,
    extra: tuple[str, ...],
    scope_size: int | None,
    embedder: str,
    pool: int | None,
    configs: str,
    queries: int,
    no_scan: bool,
    keep_store: bool,
    out_dir: Path | None,
) -> None:
    """Scale: search latency, first search after open, forget, ingest, RSS and file size
    as N grows, over distinct texts."""
    from .api import default_out_dir
    from .scale import ScaleOptions, run_scale, scale_markdown, write_scale

    extra_data = None
    if extra:
        pairs = [item.partition("=") for item in extra]
        bad = [item for item, (name, eq, path) in zip(extra, pairs, strict=True) if not eq]
        if bad:
            raise click.BadParameter(f"{bad[0]!r}: write NAME=PATH", param_hint="--extra-data")
        extra_data = tuple((name, path) for name, _, path in pairs)
    options = ScaleOptions(
        sizes=_ints(sizes, "--sizes"),
        embedder=embedder,
        pool=pool,
        configs=_configs(configs),
        queries=queries,
        keep_store=keep_store,
        text=text,
        extra_data=extra_data,
        scope_size=scope_size,
        scan_bytes=not no_scan,
    )
    target = out_dir or default_out_dir("scale")
    invocation = _invocation("scale", click.get_current_context())
    with handled(), _progress() as progress:
        task = progress.add_task("episodes", total=max(options.sizes))

        def hook(event: str, **values: Any) -> None:
            if event == "ingested":
                progress.update(task, completed=values["done"])
            elif event == "point":
                # Write after every size, so a long run leaves results as it goes.
                write_scale(values["result"], target, invocation)

        result = run_scale(data, options, target / "stores", hook)
    written = write_scale(result, target, invocation)
    stores = target / "stores"
    if not keep_store and stores.is_dir() and not any(stores.iterdir()):
        stores.rmdir()
    console.print(scale_markdown(written))
    console.print(f"results: {target}")


@bench.command(name="report")
@click.argument("results", type=_RESULTS_FOLDER)
@click.option(
    "--merge",
    "merge",
    multiple=True,
    type=_RESULTS_FOLDER,
    help="Add the cases of another results folder (a run started with --skip).",
)
def report_command(results: Path, merge: tuple[Path, ...]) -> None:
    """Rebuild summary.json, report.md and plots of a results folder (also a partial one)."""
    from .api import rebuild
    from .report import print_summary

    with handled():
        summary = rebuild(results, merge)
    wide = console if console.is_terminal else Console(width=120)
    print_summary(summary, wide)
    console.print(f"results: {results}")


@bench.command(name="abstention")
@click.argument("results", type=_RESULTS_FOLDER)
@click.option("--config", "config", default="hybrid", show_default=True, help="Config to sweep.")
@click.option(
    "--thresholds",
    default=",".join(str(t) for t in THRESHOLDS),
    show_default=True,
    help="Comma-separated best-cosine thresholds.",
)
@click.option(
    "--rule",
    type=click.Choice(ABSTAIN_RULES),
    default="r1",
    show_default=True,
    help="r1: reject when no lexical hit and cosine below τ (MemX); cosine: cosine alone.",
)
def abstention_command(results: Path, config: str, thresholds: str, rule: str) -> None:
    """Sweep the abstention threshold over a finished run (no search is re-run)."""
    import json

    from .abstention import headline_metric, markdown, sweep

    try:
        values = tuple(float(v) for v in thresholds.split(",") if v.strip())
    except ValueError as exc:
        raise click.BadParameter(f"--thresholds must be numbers, got {thresholds!r}") from exc
    with handled():
        summary = json.loads((results / "summary.json").read_text(encoding="utf-8"))
        dataset = summary["dataset"]
        with open(results / "records.jsonl", encoding="utf-8") as handle:
            records = [json.loads(line) for line in handle]
        metric = headline_metric(dataset)
        try:
            rows = sweep(records, config, values, dataset=dataset, rule=rule)
        except ValueError as exc:
            raise click.BadParameter(str(exc)) from exc
    click.echo(markdown(rows, metric, rule))


@bench.command(name="reliability")
@click.option(
    "--kills", default=200, show_default=True, help="SIGKILLs per workload (a soak: thousands)."
)
@click.option(
    "--workloads",
    default="all",
    show_default=True,
    help="Comma-separated: add, add_many, import, consolidate, delete, forget, create, index"
    " (background indexing), or all.",
)
@click.option(
    "--seconds",
    default=60.0,
    show_default=True,
    help="Concurrent writers and readers for this long (0: skip).",
)
@click.option("--writers", default=4, show_default=True)
@click.option("--readers", default=4, show_default=True)
@click.option("--seed", default=1, show_default=True)
@click.option(
    "--out",
    type=click.Path(file_okay=False, path_type=Path),
    required=True,
    help="Folder for the stores, journals and reliability.json.",
)
def reliability_command(
    kills: int, workloads: str, seconds: float, writers: int, readers: int, seed: int, out: Path
) -> None:
    """Kill writers at random moments and run writers beside readers; then prove that
    every acknowledged write is there and the store is intact (RELIABILITY.md)."""
    from .reliability import iter_workloads, run_concurrent, run_kills, summary

    try:
        names = list(iter_workloads(workloads))
    except ValueError as exc:
        raise click.BadParameter(str(exc), param_hint="--workloads") from exc
    reports = []

    def tick(report: Any) -> None:
        if report.kills % 25 == 0:
            click.echo(
                f"  {report.workload}: {report.kills} kills, {len(report.problems)} problems"
            )

    for number, name in enumerate(names, start=1):
        report = run_kills(out / name, name, kills, seed=seed * 100 + number, progress=tick)
        click.echo(
            f"{name}: {report.kills} kills, {report.acknowledged} acknowledged episodes and "
            f"{report.deleted} deletes checked, {len(report.problems)} problems "
            f"({report.seconds:.0f} s)"
        )
        for problem in report.problems[:20]:
            click.echo(f"  {problem}")
        reports.append(report)
    concurrency = None
    if seconds > 0:
        concurrency = run_concurrent(out / "concurrent", writers, readers, seconds)
        click.echo(
            f"concurrent: {writers} writers + {readers} readers for {seconds:.0f} s: "
            f"{concurrency.writes} writes and {concurrency.searches} searches, "
            f"{len(concurrency.errors)} errors, {len(concurrency.problems)} problems"
        )
    result = summary(reports, concurrency)
    (out / "reliability.json").write_text(json.dumps(result, indent=2) + "\n")
    if result["problems"] or (concurrency and (concurrency.errors or concurrency.problems)):
        raise SystemExit(1)
