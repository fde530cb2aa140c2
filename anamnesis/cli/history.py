"""Bringing history in: ``import --from`` and the Claude Code capture hook."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import click
from rich.progress import TaskID

from ..cli_errors import errors, handled
from ..errors import InvalidInputError
from ..importers import ImportReport, import_export
from .common import open_memory, progress_bar


def import_history(
    ctx: click.Context,
    source: str,
    path: Path,
    user_id: str | None,
    agent_id: str | None,
    speaker: str | None,
    split: str | None,
    dry_run: bool,
    as_json: bool,
) -> ImportReport:
    """``import --from``: read the whole source, then add what is new, with progress."""
    with handled():
        memory = open_memory(ctx)
        errors.print(f"reading {path}")
        with progress_bar() as progress:
            tasks: dict[str, TaskID] = {}

            def advance(stage: str, done: int, total: int) -> None:
                if stage not in tasks:
                    tasks[stage] = progress.add_task(stage, total=total)
                progress.update(tasks[stage], completed=done, total=total)

            report = import_export(
                memory,
                source,
                path,
                user_id=user_id,
                agent_id=agent_id,
                speaker=speaker,
                split=split,
                dry_run=dry_run,
                progress=advance,
            )
    errors.print(report.summary(), highlight=False, soft_wrap=True)
    if as_json:
        click.echo(json.dumps(report.to_dict(), ensure_ascii=False))
    return report


@click.group(hidden=True)  # run by other tools, set up from the README
def hook() -> None:
    """Commands other tools run as hooks (see the README's Claude Code section)."""


@hook.command("claude-code")
@click.option("--user", "user_id", default=None, help="User id (default: 'default').")
@click.option("--agent", "agent_id", default=None, help="Agent id.")
@click.pass_context
def claude_code_hook(ctx: click.Context, user_id: str | None, agent_id: str | None) -> None:
    """Import the session a Claude Code hook names (its JSON on standard input).

    Register it as a SessionEnd hook: the finished session's transcript
    (transcript_path) is imported like `import --from claude-code`, so the MCP
    tools recall past sessions. Running it again adds only what is new.
    """
    with handled():
        raw = sys.stdin.read()
        try:
            event = json.loads(raw)
        except json.JSONDecodeError as exc:
            raise InvalidInputError(f"the hook's input is not JSON: {exc}") from exc
        transcript = event.get("transcript_path") if isinstance(event, dict) else None
        if not isinstance(transcript, str) or not transcript:
            raise InvalidInputError(
                "the hook's input names no transcript_path: run this as a Claude Code hook"
            )
        path = Path(transcript).expanduser()
        if not path.is_file():
            raise InvalidInputError(f"transcript {path} does not exist")
    import_history(ctx, "claude-code", path, user_id, agent_id, None, None, False, False)
