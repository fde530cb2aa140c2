"""The CLI's views of derived items: ``facts --summaries`` and ``facts --profile``
(read-only calls on ``Memory.derived``; ``consolidate`` builds them)."""

from __future__ import annotations

from dataclasses import asdict

import click
from rich.table import Table

from ..cli_errors import handled
from ..errors import NotFoundError
from .common import console, open_memory, print_json, print_listing


def show_summaries(
    ctx: click.Context, user_id: str | None, agent_id: str | None, as_json: bool, as_lines: bool
) -> None:
    """List session summaries (``anamnesis facts --summaries``; built by consolidate),
    oldest session first."""
    with handled():
        memory = open_memory(ctx, create=False)
        found = memory.derived.summaries(user_id=user_id, agent_id=agent_id)
    if as_json or as_lines:
        print_listing((asdict(summary) for summary in found), lines=as_lines)
        return
    table = Table(caption=f"{len(found)} summaries")
    for column in ("session", "from", "to", "summary", "episodes"):
        table.add_column(column, overflow="fold")
    for summary in found:
        table.add_row(
            summary.session_id,
            summary.started_at.strftime("%Y-%m-%d %H:%M") if summary.started_at else "",
            summary.ended_at.strftime("%Y-%m-%d %H:%M") if summary.ended_at else "",
            summary.text,
            str(len(summary.provenance)),
        )
    console.print(table)


def show_profile(
    ctx: click.Context,
    subject: str,
    user_id: str | None,
    agent_id: str | None,
    as_json: bool,
) -> None:
    """Show a person's profile (``anamnesis facts --profile``): the values the fact
    layer holds for them, current first, with the episodes behind each."""
    with handled():
        memory = open_memory(ctx, create=False)
        found = memory.derived.profile(subject, user_id=user_id, agent_id=agent_id)
        if found is None:
            people = ", ".join(p.subject for p in memory.derived.profiles(user_id=user_id))
            raise NotFoundError(
                f"no profile of {subject!r}; `anamnesis consolidate` builds them "
                f"(profiles: {people or 'none'})"
            )
    if as_json:
        print_json(asdict(found))
        return
    table = Table(caption=f"profile of {found.subject}")
    for column in ("predicate", "object", "valid from", "valid to", "status", "episodes"):
        table.add_column(column, overflow="fold")
    for entry in found.entries:
        table.add_row(
            entry.predicate,
            entry.object,
            entry.valid_from.strftime("%Y-%m-%d") if entry.valid_from else "",
            entry.valid_to.strftime("%Y-%m-%d") if entry.valid_to else "",
            "current" if entry.current else "past",
            ", ".join(entry.provenance),
        )
    console.print(table)
