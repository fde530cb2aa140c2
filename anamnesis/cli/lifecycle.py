"""The commands of a memory's lifecycle: forget, archive, restore, decay, and what the
encoding gate decided."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict
from typing import Any, TypeVar

import click

from ..cli_errors import handled
from .common import json_option, open_memory, print_json, with_scope

F = TypeVar("F", bound=Callable[..., Any])

_SELECTION_OPTIONS = (
    click.argument("episode_ids", nargs=-1),
    click.option("--after", "event_after", default=None, help="Event time from (ISO-8601)."),
    click.option("--before", "event_before", default=None, help="Event time before (ISO-8601)."),
    click.option(
        "--containing",
        default=None,
        help="Exact text in the content, speaker, metadata or a prior version.",
    ),
)


def with_selection(func: F) -> F:
    """The options that choose episodes: ids, scope, event-time range, exact text."""
    func = with_scope(func)
    for option in reversed(_SELECTION_OPTIONS):
        func = option(func)
    return func


def _arguments(options: dict[str, Any]) -> tuple[list[str] | None, dict[str, Any]]:
    ids = list(options.pop("episode_ids")) or None
    return ids, options


@click.command()
@with_selection
@click.option("--dry-run", is_flag=True, help="List what would go; change nothing.")
@click.option("--yes", is_flag=True, help="Do not ask for confirmation.")
@json_option
@click.pass_context
def forget(ctx: click.Context, dry_run: bool, yes: bool, as_json: bool, **options: Any) -> None:
    """Erase episodes completely: by EPISODE_IDS, --session, --after/--before, --containing,
    or (with none of them) the whole scope of --user. Prints what went, per table, as JSON."""
    ids, arguments = _arguments(options)
    with handled():
        memory = open_memory(ctx, create=False)
        if not dry_run and not yes:
            preview = memory.forget(ids, dry_run=True, **arguments)
            count = len(preview.episode_ids)
            if not click.confirm(f"Forget {count} episode(s) and what derives from them?"):
                raise click.Abort()
        report = memory.forget(ids, dry_run=dry_run, **arguments)
    print_json(
        {
            "dry_run": report.dry_run,
            "episode_ids": list(report.episode_ids),
            "counts": report.counts.to_dict(),
        }
    )


def _move(ctx: click.Context, verb: str, options: dict[str, Any]) -> None:
    """Archive or restore the chosen episodes and print the ids moved, as
    ``{"archived": [...]}`` or ``{"restored": [...]}``."""
    ids, arguments = _arguments(options)
    with handled():
        moved = getattr(open_memory(ctx, create=False), verb)(ids, **arguments)
    print_json({f"{verb}d": moved})


@click.command()
@with_selection
@json_option
@click.pass_context
def archive(ctx: click.Context, as_json: bool, **options: Any) -> None:
    """Move episodes out of the search indexes into the archive (chosen as for forget);
    `search --include-archive` still finds them. Prints the ids moved as JSON."""
    _move(ctx, "archive", options)


@click.command()
@with_selection
@json_option
@click.pass_context
def restore(ctx: click.Context, as_json: bool, **options: Any) -> None:
    """Bring archived episodes back, exactly as they were (chosen as for forget).
    Prints the ids restored as JSON."""
    _move(ctx, "restore", options)


@click.command()
@with_scope
@click.option("--now", default=None, help="The moment strength is measured at (ISO; default now).")
@click.option("--dry-run", is_flag=True, help="List what would be archived; change nothing.")
@json_option
@click.pass_context
def decay(
    ctx: click.Context,
    user_id: str | None,
    agent_id: str | None,
    session_id: str | None,
    now: str | None,
    dry_run: bool,
    as_json: bool,
) -> None:
    """Archive the episodes of --user whose strength has decayed below 0.05 (never
    deletes; `restore` brings them back). Prints the ids as JSON."""
    with handled():
        ids = open_memory(ctx, create=False).decay(
            user_id=user_id, agent_id=agent_id, session_id=session_id, now=now, dry_run=dry_run
        )
    print_json({"dry_run": dry_run, "archived": ids})


@click.command(name="gate-decisions")
@click.argument("episode_ids", nargs=-1, required=True)
@with_scope
@json_option
@click.pass_context
def gate_decisions(
    ctx: click.Context, episode_ids: tuple[str, ...], as_json: bool, **scope: Any
) -> None:
    """What the encoding gate decided about EPISODE_IDS (hot or archived), with its
    three signals and score. Prints JSON by id; episodes added without a gate are left out."""
    with handled():
        found = open_memory(ctx, create=False).gate_decisions(list(episode_ids), **scope)
    print_json({i: {**asdict(d), "decided_at": d.decided_at.isoformat()} for i, d in found.items()})
