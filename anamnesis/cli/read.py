"""The commands that read: search, context, get, list, facts, export, stats, check."""

from __future__ import annotations

import sys
from dataclasses import asdict
from pathlib import Path
from typing import Any

import click
from rich.table import Table

from ..cli_errors import EXIT_DAMAGED, errors, handled
from ..context import DEFAULT_BUDGET_TOKENS
from ..errors import InvalidInputError
from ..types import Context, Fact, Hit
from .common import (
    BUDGET,
    COUNT,
    LIMIT,
    OFFSET,
    agent_option,
    console,
    episode_json,
    json_option,
    lines_option,
    open_memory,
    print_json,
    print_listing,
    user_option,
    with_scope,
)
from .derived import show_profile, show_summaries


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
        "episode": episode_json(hit.episode),
        "context": [episode_json(e) for e in hit.context],
        "channels": {name: asdict(c) for name, c in hit.channels.items()},
        "analysis": hit.analysis,
        "facts": [_fact_json(f) for f in hit.facts],
    }


@click.command()
@click.argument("query")
@with_scope
@click.option("--limit", "-n", type=LIMIT, default=10, show_default=True, help="How many results.")
@click.option("--explain", is_flag=True, help="Show each channel's rank and score.")
@json_option
@lines_option
@click.option("--now", default=None, help="When the question is asked (ISO time; default: now).")
@click.option("--as-of", default=None, help="Search the memory as it stood then (ISO time).")
@click.option("--include-archive", is_flag=True, help="Also search archived episodes (slower).")
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
    as_lines: bool,
    now: str | None,
    as_of: str | None,
    include_archive: bool,
) -> None:
    """Search memories for QUERY."""
    with handled():
        memory = open_memory(ctx, create=False)
        hits = memory.search(
            query,
            user_id=user_id,
            agent_id=agent_id,
            session_id=session_id,
            limit=limit,
            explain=explain or as_json or as_lines,
            now=now,
            as_of=as_of,
            include_archive=include_archive,
        )
    if as_json or as_lines:
        print_listing((_hit_json(h) for h in hits), lines=as_lines)
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


@click.command()
@click.argument("query")
@with_scope
@click.option(
    "--budget",
    "budget_tokens",
    type=BUDGET,
    default=DEFAULT_BUDGET_TOKENS,
    show_default=True,
    help="Token budget of the context (WordPiece tokens).",
)
@click.option("--now", default=None, help="When the question is asked (ISO-8601; default now).")
@click.option(
    "--profile", "with_profile", is_flag=True, help="Start with a profile block (consolidate)."
)
@json_option
@click.pass_context
def context(
    ctx: click.Context,
    query: str,
    user_id: str | None,
    agent_id: str | None,
    session_id: str | None,
    budget_tokens: int,
    now: str | None,
    with_profile: bool,
    as_json: bool,
) -> None:
    """Print a dated, token-budgeted context for QUERY, ready for a reader LLM."""
    with handled():
        memory = open_memory(ctx, create=False)
        packed = memory.context(
            query,
            user_id=user_id,
            agent_id=agent_id,
            session_id=session_id,
            budget_tokens=budget_tokens,
            now=now,
            profile=with_profile,
        )
    if as_json:
        print_json(_context_json(packed))
    elif not packed.text:
        errors.print("no context")
    else:
        click.echo(packed.text)


@click.command()
@click.argument("episode_id")
@with_scope
@click.option(
    "--history", "show_history", is_flag=True, help="Also list every version (current last)."
)
@json_option
@click.pass_context
def get(
    ctx: click.Context,
    episode_id: str,
    user_id: str | None,
    agent_id: str | None,
    session_id: str | None,
    show_history: bool,
    as_json: bool,
) -> None:
    """Print one episode as JSON (with or without --json: it is the one format)."""
    with handled():
        memory = open_memory(ctx, create=False)
        episode = memory.get(episode_id, user_id=user_id, agent_id=agent_id, session_id=session_id)
        record = episode_json(episode)
        if show_history:
            record["history"] = [
                {
                    **asdict(v),
                    "changed_at": v.changed_at.isoformat() if v.changed_at else None,
                    "recorded_at": v.recorded_at.isoformat() if v.recorded_at else None,
                }
                for v in memory.history(
                    episode_id, user_id=user_id, agent_id=agent_id, session_id=session_id
                )
            ]
    print_json(record)


@click.command("list")
@with_scope
@click.option("--limit", "-n", type=LIMIT, default=20, show_default=True)
@click.option("--offset", type=OFFSET, default=0, show_default=True)
@json_option
@lines_option
@click.pass_context
def list_(
    ctx: click.Context,
    user_id: str | None,
    agent_id: str | None,
    session_id: str | None,
    limit: int,
    offset: int,
    as_json: bool,
    as_lines: bool,
) -> None:
    """List episodes in event-time order."""
    with handled():
        memory = open_memory(ctx, create=False)
        page = memory.get_all(
            user_id=user_id, agent_id=agent_id, session_id=session_id, limit=limit, offset=offset
        )
    if as_json or as_lines:
        print_listing((episode_json(e) for e in page.items), lines=as_lines)
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


@click.command()
@user_option
@agent_option
@click.option("--subject", default=None, help="Whose facts ('user' includes the user's name).")
@click.option("--predicate", default=None, help="Which slot (lives_in, works_at, likes, ...).")
@click.option("--as-of", "as_of", default=None, help="As the memory stood then (ISO-8601).")
@click.option("--all", "include_superseded", is_flag=True, help="Include superseded facts.")
@click.option(
    "--history", "as_history", is_flag=True, help="The slot's values oldest first (--predicate)."
)
@click.option(
    "--profile", "as_profile", is_flag=True, help="The --subject's profile (default: user)."
)
@click.option("--summaries", "as_summaries", is_flag=True, help="The session summaries.")
@click.option("--limit", "-n", type=COUNT, default=100, show_default=True)
@json_option
@lines_option
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
    as_profile: bool,
    as_summaries: bool,
    limit: int,
    as_json: bool,
    as_lines: bool,
) -> None:
    """List facts: the current ones, or with --all / --history the values they replaced,
    or with --profile a person's profile, with --summaries the session summaries (both
    built by consolidate)."""
    if as_summaries:
        show_summaries(ctx, user_id, agent_id, as_json, as_lines)
        return
    if as_profile:
        if as_lines:
            raise click.UsageError("--profile prints one object: use --json, not --nl")
        show_profile(ctx, subject or "user", user_id, agent_id, as_json)
        return
    with handled():
        memory = open_memory(ctx, create=False)
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
    if as_json or as_lines:
        print_listing((_fact_json(f) for f in found), lines=as_lines)
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
            "current" if fact.is_current else "superseded" if fact.superseded_by else "ended",
        )
    console.print(table)


@click.command()
@click.argument("file", type=click.Path(dir_okay=False, path_type=Path), required=False)
@click.option("--user", "user_id", default=None, help="Only this user's memories.")
@click.pass_context
def export(ctx: click.Context, file: Path | None, user_id: str | None) -> None:
    """Write the store as JSONL (to FILE or standard output); `import` restores it."""
    with handled():
        memory = open_memory(ctx, create=False)
        if file is None:
            count = memory.export_jsonl(sys.stdout, user_id=user_id)
        else:
            with file.open("w", encoding="utf-8") as out:
                count = memory.export_jsonl(out, user_id=user_id)
    errors.print(f"exported {count} episodes")


@click.command()
@click.option("--user", "user_id", default=None, help="Only this user.")
@json_option
@click.pass_context
def stats(ctx: click.Context, user_id: str | None, as_json: bool) -> None:
    """Counts, sizes and active capabilities, as JSON (the one format). On a damaged
    store it still answers (exit 0): what could not be read, and the damage."""
    with handled():
        memory = open_memory(ctx, create=False)
        result = {**memory.stats(user_id=user_id), "capabilities": memory.capabilities}
    print_json(result)


@click.command()
@json_option
@click.pass_context
def check(ctx: click.Context, as_json: bool) -> None:
    """Check the whole store (it reads everything). Exit 0 when healthy, 5 when
    damaged; a damaged store takes no writes until a check passes."""
    with handled():
        memory = open_memory(ctx, create=False)
        problems = memory.check()
    if as_json:
        print_json({"ok": not problems, "problems": problems})
        if problems:
            sys.exit(EXIT_DAMAGED)
        return
    if problems:
        for problem in problems:
            errors.print(f"[bold red]damaged:[/] {problem}", highlight=False)
        errors.print(
            "export what is readable (anamnesis export) into a new store, or restore a backup"
        )
        sys.exit(EXIT_DAMAGED)
    click.echo("ok")
