"""The commands of a memory's lifecycle: forget (and archive, restore)."""

from __future__ import annotations

import json

import click

from ..cli_errors import handled
from .common import open_memory, with_scope


@click.command()
@click.argument("episode_ids", nargs=-1)
@with_scope
@click.option("--after", "event_after", default=None, help="Event time from (ISO-8601).")
@click.option("--before", "event_before", default=None, help="Event time before (ISO-8601).")
@click.option(
    "--containing", default=None, help="Exact text in the content, speaker, metadata or a version."
)
@click.option("--dry-run", is_flag=True, help="List what would go; change nothing.")
@click.option("--yes", is_flag=True, help="Do not ask for confirmation.")
@click.pass_context
def forget(
    ctx: click.Context,
    episode_ids: tuple[str, ...],
    user_id: str | None,
    agent_id: str | None,
    session_id: str | None,
    event_after: str | None,
    event_before: str | None,
    containing: str | None,
    dry_run: bool,
    yes: bool,
) -> None:
    """Erase episodes completely: by EPISODE_IDS, --session, --after/--before, --containing,
    or (with none of them) the whole scope of --user. Prints what went, per table, as JSON."""
    with handled():
        memory = open_memory(ctx, create=False)
        arguments = {
            "user_id": user_id,
            "agent_id": agent_id,
            "session_id": session_id,
            "event_after": event_after,
            "event_before": event_before,
            "containing": containing,
        }
        ids = list(episode_ids) if episode_ids else None
        if not dry_run and not yes:
            preview = memory.forget(ids, dry_run=True, **arguments)
            count = len(preview.episode_ids)
            if not click.confirm(f"Forget {count} episode(s) and what derives from them?"):
                raise click.Abort()
        report = memory.forget(ids, dry_run=dry_run, **arguments)
    click.echo(
        json.dumps(
            {
                "dry_run": report.dry_run,
                "episode_ids": list(report.episode_ids),
                "counts": report.counts.to_dict(),
            }
        )
    )
