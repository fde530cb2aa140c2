"""The ``anamnesis`` command line: a thin shell over Memory, one command per verb."""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from dataclasses import asdict
from pathlib import Path
from typing import Any, TypeVar

import click
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from . import __version__
from .bench.cli import bench
from .cli_errors import EXIT_DAMAGED, errors, handled
from .config import DEFAULT_PRESET, PRESET_HELP, PRESETS, SearchConfig, default_path
from .context import DEFAULT_BUDGET_TOKENS
from .errors import InvalidInputError
from .memory import Memory
from .retrieve.ranker import load_ranker
from .retrieve.ranker_fit import LabelledQuestion, fit_ranker, ranker_examples, save_ranker
from .types import Context, Episode, Fact, Hit

F = TypeVar("F", bound=Callable[..., Any])
console = Console()


def _preset_name(value: str) -> str:
    """A public preset's name; a benchmark configuration is refused with a hint."""
    if value in PRESETS:
        return value
    from .bench.presets import BENCH_PRESETS

    if value in BENCH_PRESETS:
        raise click.BadParameter(
            f"{value!r} is a benchmark configuration: run it with `anamnesis bench "
            f"--config {value}`, or choose one of {', '.join(PRESETS)}",
            param_hint="--config",
        )
    raise click.BadParameter(
        f"unknown preset {value!r}; choose one of {', '.join(PRESETS)}", param_hint="--config"
    )


def _search_config(options: dict[str, Any]) -> SearchConfig:
    """The ``--config`` preset, reading the ``--ranker-model`` file if one is given."""
    config = PRESETS[options["config"]]
    model = options.get("ranker_model")
    if model is None:
        return config
    if "learned_rerank" not in config.stages:
        raise InvalidInputError(
            f"--ranker-model needs a preset that runs the learned ranker, not {options['config']!r}"
        )
    return config.with_options("learned_rerank", model=str(model))


def _open(ctx: click.Context, *, create: bool = True) -> Memory:
    """The Memory the command runs on; ``create=False`` for commands that only read
    (a missing store is then NotFoundError, exit 3, and nothing is created)."""
    options = ctx.obj
    with handled():
        memory = Memory(
            path=options["path"],
            url=options["url"],
            embedder=options["embedder"],
            config=_search_config(options),
            reindex=options.get("reindex", False),
            llm=options.get("llm"),
            warm=False,  # one verb per process: nothing to load ahead of it
            create=create,
        )
    ctx.call_on_close(memory.close)
    return memory


def _episode_json(episode: Episode) -> dict[str, Any]:
    record = asdict(episode)
    record["event_time"] = episode.event_time.isoformat()
    record["recorded_at"] = episode.recorded_at.isoformat()
    return record


def _progress() -> Progress:
    return Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=errors,
        transient=False,
    )


user_option = click.option("--user", "user_id", default=None, help="User id (default: 'default').")
agent_option = click.option("--agent", "agent_id", default=None, help="Agent id.")
scope_options = [
    user_option,
    agent_option,
    click.option("--session", "session_id", default=None, help="Session id."),
]


def with_scope(func: F) -> F:
    for option in reversed(scope_options):
        func = option(func)
    return func


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="anamnesis")
@click.option(
    "--path",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="Store file (default: $ANAMNESIS_PATH or the OS data directory).",
)
@click.option("--url", default=None, help="Database URL instead of a file (postgresql://...).")
@click.option(
    "--embedder",
    default="minilm",
    show_default=True,
    help="minilm, minilm-int8, edge, e5 or openai:MODEL.",
)
@click.option(
    "--config",
    default=DEFAULT_PRESET,
    show_default=True,
    callback=lambda ctx, param, value: _preset_name(value),
    help="Search pipeline. " + "; ".join(f"{name}: {line}" for name, line in PRESET_HELP.items()),
)
@click.option(
    "--ranker-model",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    default=None,
    help="A learned-ranker file from `fit-ranker` instead of the bundled one.",
)
@click.pass_context
def main(
    ctx: click.Context,
    path: Path | None,
    url: str | None,
    embedder: str,
    config: str,
    ranker_model: Path | None,
) -> None:
    """Anamnesis: long-term memory for LLM agents, verbatim and offline."""
    ctx.ensure_object(dict)
    ctx.obj.update(path=path, url=url, embedder=embedder, config=config, ranker_model=ranker_model)


@main.command()
@click.argument("content")
@with_scope
@click.option("--role", default=None, help="Role of the speaker (user, assistant, ...).")
@click.option("--speaker", default=None, help="Name of the speaker.")
@click.option("--time", "event_time", default=None, help="When it happened (ISO-8601).")
@click.option("--metadata", default=None, help="JSON object of metadata.")
@click.option("--json", "as_json", is_flag=True, help="Print the stored episode as JSON.")
@click.pass_context
def add(
    ctx: click.Context,
    content: str,
    user_id: str | None,
    agent_id: str | None,
    session_id: str | None,
    role: str | None,
    speaker: str | None,
    event_time: str | None,
    metadata: str | None,
    as_json: bool,
) -> None:
    """Store CONTENT verbatim ('-' reads it from standard input)."""
    if content == "-":
        content = sys.stdin.read()
    with handled():
        try:
            meta = json.loads(metadata) if metadata else None
        except json.JSONDecodeError as exc:
            raise InvalidInputError(f"--metadata is not valid JSON: {exc}") from exc
        memory = _open(ctx)
        (episode,) = memory.add(
            content,
            user_id=user_id,
            agent_id=agent_id,
            session_id=session_id,
            role=role,
            speaker=speaker,
            event_time=event_time,
            metadata=meta,
        )
    if as_json:
        click.echo(json.dumps(_episode_json(episode), ensure_ascii=False))
    else:
        click.echo(episode.id)


def _read_messages(path: Path) -> tuple[str, list[dict[str, Any]] | list[str]]:
    """('export', lines) for an Anamnesis export, else ('messages', dicts)."""
    try:
        text = path.read_text(encoding="utf-8") if str(path) != "-" else sys.stdin.read()
    except UnicodeDecodeError as exc:
        raise InvalidInputError(
            f"{path} is not UTF-8 text ({exc}); convert it first, e.g. iconv -f latin1 -t utf-8"
        ) from exc
    stripped = text.lstrip()
    if stripped.startswith("["):
        try:
            items = json.loads(text)
        except json.JSONDecodeError as exc:
            raise InvalidInputError(f"{path} is not valid JSON: {exc}") from exc
        return "messages", items
    lines = text.splitlines()
    first = next((line for line in lines if line.strip()), "")
    try:
        head = json.loads(first) if first else {}
    except json.JSONDecodeError as exc:
        raise InvalidInputError(f"{path}: line 1 is not JSON: {exc}") from exc
    if isinstance(head, dict) and head.get("type") == "anamnesis-export":
        return "export", lines
    return "messages", _json_lines(path, lines)


def _json_lines(path: Path, lines: list[str]) -> list[Any]:
    """The JSON value of each non-blank line of ``path``; the first bad line raises
    ``InvalidInputError`` naming it."""
    values = []
    for number, line in enumerate(lines, start=1):
        if line.strip():
            try:
                values.append(json.loads(line))
            except json.JSONDecodeError as exc:
                raise InvalidInputError(f"{path}: line {number} is not JSON: {exc}") from exc
    return values


@main.command("import")
@click.argument("file", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@with_scope
@click.pass_context
def import_(
    ctx: click.Context,
    file: Path,
    user_id: str | None,
    agent_id: str | None,
    session_id: str | None,
) -> None:
    """Import FILE: an `anamnesis export`, a JSON list or JSONL of messages.

    Messages go to --user/--agent/--session. An export keeps its own users, agents
    and sessions unless --user/--agent is given: then every record moves there.
    """
    with handled():
        kind, items = _read_messages(file)
        if kind == "export" and session_id is not None:
            raise InvalidInputError(
                "--session applies to a file of messages; an export keeps its own sessions"
            )
        memory = _open(ctx)
        with _progress() as progress:
            task = progress.add_task(f"importing {file.name}", total=len(items) or None)

            def advance(done: int) -> None:
                progress.update(task, completed=done)

            if kind == "export":
                count = memory.import_jsonl(
                    items,  # type: ignore[arg-type]
                    user_id=user_id,
                    agent_id=agent_id,
                    progress=advance,
                )
            else:
                count = len(
                    memory.add_many(
                        items,
                        user_id=user_id,
                        agent_id=agent_id,
                        session_id=session_id,
                        progress=advance,
                    )
                )
            progress.update(task, total=count, completed=count)
    errors.print(f"imported {count} episodes")


def _hits_table(hits: list[Hit], explain: bool) -> Table:
    table = Table(show_lines=False)
    table.add_column("#", justify="right")
    table.add_column("score", justify="right")
    table.add_column("when")
    table.add_column("who")
    table.add_column("content", overflow="fold")
    if explain:
        table.add_column("channels")
    for rank, hit in enumerate(hits, start=1):
        episode = hit.episode
        row = [
            str(rank),
            f"{hit.score:.4f}",
            episode.event_time.strftime("%Y-%m-%d %H:%M"),
            episode.speaker or episode.role or "",
            episode.content,
        ]
        if explain:
            row.append(
                ", ".join(f"{name}#{c.rank} ({c.score:.3f})" for name, c in hit.channels.items())
            )
        table.add_row(*row)
    return table


def _fact_json(fact: Fact) -> dict[str, Any]:
    record = asdict(fact)
    for key in ("valid_from", "valid_to", "recorded_at", "retracted_at", "superseded_at"):
        value = getattr(fact, key)
        record[key] = value.isoformat() if value is not None else None
    record["provenance"] = list(fact.provenance)
    return record


def _hit_json(hit: Hit) -> dict[str, Any]:
    return {
        "score": hit.score,
        "episode": _episode_json(hit.episode),
        "context": [_episode_json(e) for e in hit.context],
        "channels": {name: asdict(c) for name, c in hit.channels.items()},
        "analysis": hit.analysis,
        "facts": [_fact_json(f) for f in hit.facts],
    }


@main.command()
@click.argument("query")
@with_scope
@click.option("--limit", "-n", default=10, show_default=True, help="How many results.")
@click.option("--explain", is_flag=True, help="Show each channel's rank and score.")
@click.option("--json", "as_json", is_flag=True, help="Print results as JSON.")
@click.option("--now", default=None, help="When the question is asked (ISO time; default: now).")
@click.option("--as-of", default=None, help="Search the memory as it stood then (ISO time).")
@click.pass_context
def search(
    ctx: click.Context,
    query: str,
    user_id: str | None,
    agent_id: str | None,
    session_id: str | None,
    limit: int,
    explain: bool,
    as_json: bool,
    now: str | None,
    as_of: str | None,
) -> None:
    """Search memories for QUERY."""
    with handled():
        memory = _open(ctx, create=False)
        hits = memory.search(
            query,
            user_id=user_id,
            agent_id=agent_id,
            session_id=session_id,
            limit=limit,
            explain=explain or as_json,
            now=now,
            as_of=as_of,
        )
    if as_json:
        click.echo(json.dumps([_hit_json(h) for h in hits], ensure_ascii=False, indent=2))
    elif not hits:
        errors.print("no results")
    else:
        console.print(_hits_table(hits, explain))


def _context_json(context: Context) -> dict[str, Any]:
    return {
        "query": context.query,
        "text": context.text,
        "tokens": context.tokens,
        "budget_tokens": context.budget_tokens,
        "now": context.now.isoformat() if context.now else None,
        "facts": [
            {
                "text": f.text,
                "valid_at": f.valid_at.isoformat() if f.valid_at else None,
                "source_episode_ids": list(f.source_episode_ids),
            }
            for f in context.facts
        ],
        "sessions": [
            {
                "session_id": s.session_id,
                "started_at": s.started_at.isoformat() if s.started_at else None,
                "lines": [
                    {
                        "episode_id": line.episode.id,
                        "turn_index": line.episode.turn_index,
                        "rank": line.rank,
                        "score": line.score,
                    }
                    for line in s.lines
                ],
            }
            for s in context.sessions
        ],
    }


@main.command()
@click.argument("query")
@with_scope
@click.option(
    "--budget",
    "budget_tokens",
    type=int,
    default=DEFAULT_BUDGET_TOKENS,
    show_default=True,
    help="Token budget of the context (WordPiece tokens).",
)
@click.option("--now", default=None, help="When the question is asked (ISO-8601; default now).")
@click.option("--json", "as_json", is_flag=True, help="Print the context with provenance as JSON.")
@click.pass_context
def context(
    ctx: click.Context,
    query: str,
    user_id: str | None,
    agent_id: str | None,
    session_id: str | None,
    budget_tokens: int,
    now: str | None,
    as_json: bool,
) -> None:
    """Print a dated, token-budgeted context for QUERY, ready for a reader LLM."""
    with handled():
        memory = _open(ctx, create=False)
        packed = memory.context(
            query,
            user_id=user_id,
            agent_id=agent_id,
            session_id=session_id,
            budget_tokens=budget_tokens,
            now=now,
        )
    if as_json:
        click.echo(json.dumps(_context_json(packed), ensure_ascii=False, indent=2))
    elif not packed.text:
        errors.print("no context")
    else:
        click.echo(packed.text)


@main.command()
@click.argument("episode_id")
@with_scope
@click.option("--history", "show_history", is_flag=True, help="Also list prior versions.")
@click.pass_context
def get(
    ctx: click.Context,
    episode_id: str,
    user_id: str | None,
    agent_id: str | None,
    session_id: str | None,
    show_history: bool,
) -> None:
    """Print one episode as JSON."""
    with handled():
        memory = _open(ctx, create=False)
        episode = memory.get(episode_id, user_id=user_id, agent_id=agent_id, session_id=session_id)
        record = _episode_json(episode)
        if show_history:
            record["history"] = [
                {**asdict(v), "changed_at": v.changed_at.isoformat()}
                for v in memory.history(
                    episode_id, user_id=user_id, agent_id=agent_id, session_id=session_id
                )
            ]
    click.echo(json.dumps(record, ensure_ascii=False, indent=2))


@main.command("list")
@with_scope
@click.option("--limit", "-n", default=20, show_default=True)
@click.option("--offset", default=0, show_default=True)
@click.option("--json", "as_json", is_flag=True, help="Print JSON lines.")
@click.pass_context
def list_(
    ctx: click.Context,
    user_id: str | None,
    agent_id: str | None,
    session_id: str | None,
    limit: int,
    offset: int,
    as_json: bool,
) -> None:
    """List episodes in event-time order."""
    with handled():
        memory = _open(ctx, create=False)
        page = memory.get_all(
            user_id=user_id, agent_id=agent_id, session_id=session_id, limit=limit, offset=offset
        )
    if as_json:
        for episode in page.items:
            click.echo(json.dumps(_episode_json(episode), ensure_ascii=False))
        return
    table = Table(caption=f"{len(page.items)} of {page.total}")
    for column in ("id", "when", "session", "who", "content"):
        table.add_column(column, overflow="fold")
    for episode in page.items:
        table.add_row(
            episode.id,
            episode.event_time.strftime("%Y-%m-%d %H:%M"),
            episode.session_id or "",
            episode.speaker or episode.role or "",
            episode.content,
        )
    console.print(table)


@main.command()
@click.argument("episode_id", required=False)
@with_scope
@click.option(
    "--all", "delete_everything", is_flag=True, help="Delete the whole scope (--user required)."
)
@click.option("--yes", is_flag=True, help="Do not ask for confirmation with --all.")
@click.pass_context
def delete(
    ctx: click.Context,
    episode_id: str | None,
    user_id: str | None,
    agent_id: str | None,
    session_id: str | None,
    delete_everything: bool,
    yes: bool,
) -> None:
    """Delete one episode, or a whole scope with --all --user U."""
    with handled():
        if delete_everything == (episode_id is not None):
            raise InvalidInputError("give either an EPISODE_ID or --all (with --user)")
        if delete_everything and user_id is None:
            raise InvalidInputError("--all needs --user: name the scope to delete")
        memory = _open(ctx)
        if delete_everything:
            if not yes and not click.confirm(f"Delete everything of user {user_id!r}?"):
                raise click.Abort()
            counts = memory.delete_all(
                user_id=user_id or "", agent_id=agent_id, session_id=session_id
            )
        else:
            counts = memory.delete(
                episode_id or "", user_id=user_id, agent_id=agent_id, session_id=session_id
            )
    click.echo(json.dumps(asdict(counts)))


@main.command()
@with_scope
@click.option("--limit", "-n", type=click.IntRange(min=1), default=None, help="Episodes to read.")
@click.option(
    "--extractor",
    type=click.Choice(["rules", "llm"]),
    default="rules",
    show_default=True,
    help="llm needs ANAMNESIS_LLM_BASE_URL and ANAMNESIS_LLM_MODEL.",
)
@click.pass_context
def consolidate(
    ctx: click.Context,
    user_id: str | None,
    agent_id: str | None,
    session_id: str | None,
    limit: int | None,
    extractor: str,
) -> None:
    """Extract facts from episodes not yet consolidated; print what changed as JSON."""
    if extractor == "llm":
        ctx.obj["llm"] = "env"
    with handled():
        memory = _open(ctx)
        report = memory.consolidate(
            user_id=user_id,
            agent_id=agent_id,
            session_id=session_id,
            limit=limit,
            extractor=extractor,
        )
    click.echo(json.dumps(asdict(report)))


@main.command()
@user_option
@agent_option
@click.option("--subject", default=None, help="Whose facts ('user' includes the user's name).")
@click.option("--predicate", default=None, help="Which slot (lives_in, works_at, likes, ...).")
@click.option("--as-of", "as_of", default=None, help="As the memory stood then (ISO-8601).")
@click.option("--all", "include_superseded", is_flag=True, help="Include superseded facts.")
@click.option(
    "--history", "as_history", is_flag=True, help="The slot's values oldest first (--predicate)."
)
@click.option("--limit", "-n", default=100, show_default=True)
@click.option("--json", "as_json", is_flag=True, help="Print JSON lines.")
@click.pass_context
def facts(
    ctx: click.Context,
    user_id: str | None,
    agent_id: str | None,
    subject: str | None,
    predicate: str | None,
    as_of: str | None,
    include_superseded: bool,
    as_history: bool,
    limit: int,
    as_json: bool,
) -> None:
    """List facts: the current ones, or with --all / --history the values they replaced."""
    with handled():
        memory = _open(ctx, create=False)
        if as_history:
            if predicate is None:
                raise InvalidInputError("--history needs --predicate: name the slot")
            found = memory.fact_history(
                subject=subject or "user",
                predicate=predicate,
                as_of=as_of,
                user_id=user_id,
                agent_id=agent_id,
            )
        else:
            found = memory.facts(
                subject=subject,
                predicate=predicate,
                as_of=as_of,
                include_superseded=include_superseded,
                user_id=user_id,
                agent_id=agent_id,
                limit=limit,
            )
    if as_json:
        for fact in found:
            click.echo(json.dumps(_fact_json(fact), ensure_ascii=False))
        return
    table = Table(caption=f"{len(found)} facts")
    for column in ("subject", "predicate", "object", "valid from", "valid to", "status"):
        table.add_column(column, overflow="fold")
    for fact in found:
        table.add_row(
            fact.subject,
            fact.predicate,
            fact.object,
            fact.valid_from.strftime("%Y-%m-%d") if fact.valid_from else "",
            fact.valid_to.strftime("%Y-%m-%d") if fact.valid_to else "",
            "current" if fact.is_current else "superseded",
        )
    console.print(table)


@main.command()
@click.argument("file", type=click.Path(dir_okay=False, path_type=Path), required=False)
@click.option("--user", "user_id", default=None, help="Only this user's memories.")
@click.pass_context
def export(ctx: click.Context, file: Path | None, user_id: str | None) -> None:
    """Write the store as JSONL (to FILE or standard output); `import` restores it."""
    with handled():
        memory = _open(ctx, create=False)
        if file is None:
            count = memory.export_jsonl(sys.stdout, user_id=user_id)
        else:
            with file.open("w", encoding="utf-8") as out:
                count = memory.export_jsonl(out, user_id=user_id)
    errors.print(f"exported {count} episodes")


@main.command()
@click.option("--user", "user_id", default=None, help="Only this user.")
@click.pass_context
def stats(ctx: click.Context, user_id: str | None) -> None:
    """Counts, sizes and active capabilities, as JSON."""
    with handled():
        memory = _open(ctx, create=False)
        result = {**memory.stats(user_id=user_id), "capabilities": memory.capabilities}
    click.echo(json.dumps(result, indent=2))


@main.command()
@click.pass_context
def check(ctx: click.Context) -> None:
    """Check the whole store (it reads everything). Exit 0 when healthy, 5 when
    damaged; a damaged store takes no writes until a check passes."""
    with handled():
        memory = _open(ctx, create=False)
        problems = memory.check()
    if problems:
        for problem in problems:
            errors.print(f"[bold red]damaged:[/] {problem}", highlight=False)
        errors.print(
            "export what is readable (anamnesis export) into a new store, or restore a backup"
        )
        sys.exit(EXIT_DAMAGED)
    click.echo("ok")


@main.command()
@click.pass_context
def reindex(ctx: click.Context) -> None:
    """Re-embed every episode with --embedder (also switches a store's embedder)."""
    ctx.obj["reindex"] = True
    with handled():
        memory = _open(ctx)
        with _progress() as progress:
            total = memory.stats()["episodes"]
            task = progress.add_task("re-embedding", total=total)
            count = memory.reindex(progress=lambda done: progress.update(task, completed=done))
    errors.print(f"re-embedded {count} episodes with {memory.embedder.name}")


@main.command("fit-ranker")
@click.argument("questions", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option(
    "--out",
    type=click.Path(dir_okay=False, path_type=Path),
    required=True,
    help="Where to write the ranker (JSON); search with it by --ranker-model.",
)
@click.pass_context
def fit_ranker_(ctx: click.Context, questions: Path, out: Path) -> None:
    """Fit the learned ranker on labelled QUESTIONS from this memory.

    QUESTIONS is a JSON-lines file: {"question", "evidence": [episode ids], "user_id",
    "agent_id"?, "now"?}. A chat kind (named speakers, or user and assistant) without
    questions keeps the bundled model.
    """
    with handled():
        memory = _open(ctx)
        lines = questions.read_text(encoding="utf-8").splitlines()
        labelled = [LabelledQuestion.from_dict(r) for r in _json_lines(questions, lines)]
        examples = ranker_examples(memory, labelled)
        base = load_ranker()
        models = fit_ranker(examples, base=base, trained_on=f"{len(labelled)} labelled questions")
        save_ranker(models, out)
    for kind, model in models.items():
        source = "bundled, no questions of this kind" if model is base[kind] else "fitted"
        click.echo(f"{kind}: {source}")
    click.echo(f"wrote {out}")


@main.command()
@click.option(
    "--path",
    "demo_path",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="Where to keep the demo store (default: demo.db beside the default store).",
)
@click.pass_context
def demo(ctx: click.Context, demo_path: Path | None) -> None:
    """Ingest a small bundled conversation and answer a few questions."""
    from .demo import run_demo

    options = ctx.obj
    path = demo_path or options["path"] or default_path().with_name("demo.db")
    with handled():
        run_demo(path, embedder=options["embedder"], console=console)


main.add_command(bench)


if __name__ == "__main__":
    main()
