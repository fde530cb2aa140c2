"""The commands that write: add, import, delete, consolidate, reindex, fit-ranker, demo."""

from __future__ import annotations

import json
import sys
from dataclasses import asdict
from pathlib import Path
from typing import Any

import click

from ..cli_errors import errors, handled
from ..config import default_path
from ..errors import InvalidInputError
from ..importers import KINDS
from ..retrieve.ranker import load_ranker
from ..retrieve.ranker_fit import LabelledQuestion, fit_ranker, ranker_examples, save_ranker
from .common import (
    COUNT,
    console,
    episode_json,
    json_option,
    open_memory,
    print_json,
    progress_bar,
    with_scope,
)
from .history import import_history


@click.command()
@click.argument("content")
@with_scope
@click.option("--role", default=None, help="Role of the speaker (user, assistant, ...).")
@click.option("--speaker", default=None, help="Name of the speaker.")
@click.option("--time", "event_time", default=None, help="When it happened (ISO-8601).")
@click.option("--metadata", default=None, help="JSON object of metadata.")
@json_option
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
        memory = open_memory(ctx)
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
        print_json(episode_json(episode))
    else:
        click.echo(episode.id)


def read_messages(path: Path) -> tuple[str, list[dict[str, Any]] | list[str]]:
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
    return "messages", json_lines(path, lines)


def json_lines(path: Path, lines: list[str]) -> list[Any]:
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


@click.command("import")
@click.argument("file", type=click.Path(exists=True, path_type=Path))
@with_scope
@click.option(
    "--from",
    "source",
    type=click.Choice(KINDS),
    default=None,
    help="Import a chat export, transcripts or notes instead (above).",
)
@click.option("--speaker", default=None, help="With --from: the name of the user's turns.")
@click.option(
    "--split",
    type=click.Choice(["note", "paragraph"]),
    default=None,
    help="With --from notes: one episode per note (default) or per paragraph.",
)
@click.option("--dry-run", is_flag=True, help="With --from: show what would be added.")
@click.option("--json", "as_json", is_flag=True, help="With --from: print the report as JSON.")
@click.pass_context
def import_(
    ctx: click.Context,
    file: Path,
    user_id: str | None,
    agent_id: str | None,
    session_id: str | None,
    source: str | None,
    speaker: str | None,
    split: str | None,
    dry_run: bool,
    as_json: bool,
) -> None:
    """Import FILE: an `anamnesis export`, a JSON list or JSONL of messages.

    Messages go to --user/--agent/--session. An export keeps its own users, agents
    and sessions unless --user/--agent is given: then every record moves there.

    With --from, FILE is another tool's history, each conversation a session:
    chatgpt or claude (the export zip, its folder or its conversations.json),
    claude-code (a session .jsonl, or a folder such as ~/.claude/projects), notes (a
    folder of .md/.txt notes). Re-importing adds only what is new; tool calls,
    attachments and system messages are skipped and counted. Claude Code can import each
    finished session itself: `anamnesis hook claude-code` as its SessionEnd hook (README).
    """
    if source is not None:
        if session_id is not None:
            raise click.UsageError("--session does not apply with --from: each conversation is one")
        import_history(ctx, source, file, user_id, agent_id, speaker, split, dry_run, as_json)
        return
    if speaker or split or dry_run or as_json:
        raise click.UsageError("--speaker, --split, --dry-run and --json apply with --from")
    with handled():
        if file.is_dir():
            raise InvalidInputError(
                f"{file} is a folder: give a file, or --from to import notes or transcripts"
            )
        kind, items = read_messages(file)
        if kind == "export" and session_id is not None:
            raise InvalidInputError(
                "--session applies to a file of messages; an export keeps its own sessions"
            )
        memory = open_memory(ctx)
        with progress_bar() as progress:
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


@click.command()
@click.argument("episode_id", required=False)
@with_scope
@click.option(
    "--all", "delete_everything", is_flag=True, help="Delete the whole scope (--user required)."
)
@click.option("--yes", is_flag=True, help="Do not ask for confirmation with --all.")
@json_option
@click.pass_context
def delete(
    ctx: click.Context,
    episode_id: str | None,
    user_id: str | None,
    agent_id: str | None,
    session_id: str | None,
    delete_everything: bool,
    yes: bool,
    as_json: bool,
) -> None:
    """Delete one episode, or a whole scope with --all --user U. Prints what went, per
    table, as JSON (the one format)."""
    with handled():
        if delete_everything == (episode_id is not None):
            raise InvalidInputError("give either an EPISODE_ID or --all (with --user)")
        if delete_everything and user_id is None:
            raise InvalidInputError("--all needs --user: name the scope to delete")
        memory = open_memory(ctx)
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
    print_json(asdict(counts))


@click.command()
@with_scope
@click.option("--limit", "-n", type=COUNT, default=None, help="Episodes to read.")
@click.option(
    "--extractor",
    type=click.Choice(["rules", "llm"]),
    default="rules",
    show_default=True,
    help="llm needs ANAMNESIS_LLM_BASE_URL and ANAMNESIS_LLM_MODEL.",
)
@click.option(
    "--summaries",
    type=click.Choice(["extractive", "abstractive"]),
    default=None,
    help="abstractive: session summaries written by the LLM (ANAMNESIS_LLM_*); "
    "default: abstractive with --extractor llm, else extractive.",
)
@json_option
@click.pass_context
def consolidate(
    ctx: click.Context,
    user_id: str | None,
    agent_id: str | None,
    session_id: str | None,
    limit: int | None,
    extractor: str,
    summaries: str | None,
    as_json: bool,
) -> None:
    """Extract facts from episodes not yet consolidated; print what changed as JSON."""
    if extractor == "llm" or summaries == "abstractive":
        ctx.obj["llm"] = "env"
    with handled():
        memory = open_memory(ctx)
        report = memory.consolidate(
            user_id=user_id,
            agent_id=agent_id,
            session_id=session_id,
            limit=limit,
            extractor=extractor,
            summaries=summaries,
        )
    print_json(asdict(report))


@click.command()
@click.pass_context
def reindex(ctx: click.Context) -> None:
    """Re-embed every episode with --embedder (also switches a store's embedder)."""
    ctx.obj["reindex"] = True
    with handled():
        memory = open_memory(ctx)
        with progress_bar() as progress:
            total = memory.stats()["episodes"]
            task = progress.add_task("re-embedding", total=total)
            count = memory.reindex(progress=lambda done: progress.update(task, completed=done))
    errors.print(f"re-embedded {count} episodes with {memory.embedder.name}")


@click.command("fit-ranker")
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
        memory = open_memory(ctx)
        lines = questions.read_text(encoding="utf-8").splitlines()
        labelled = [LabelledQuestion.from_dict(r) for r in json_lines(questions, lines)]
        examples = ranker_examples(memory, labelled)
        base = load_ranker()
        models = fit_ranker(examples, base=base, trained_on=f"{len(labelled)} labelled questions")
        save_ranker(models, out)
    for kind, model in models.items():
        source = "bundled, no questions of this kind" if model is base[kind] else "fitted"
        click.echo(f"{kind}: {source}")
    click.echo(f"wrote {out}")


@click.command()
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
    from ..demo import run_demo

    options = ctx.obj
    path = demo_path or options["path"] or default_path().with_name("demo.db")
    with handled():
        run_demo(path, embedder=options["embedder"], console=console)
