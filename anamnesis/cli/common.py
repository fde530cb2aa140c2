"""What the commands share: opening the Memory, scope options, presets, output helpers."""

from __future__ import annotations

import json
import sys
import warnings
from collections.abc import Callable, Iterable
from dataclasses import asdict
from datetime import datetime
from typing import IO, Any, TypeVar

import click
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from ..cli_errors import errors, handled
from ..config import PRESETS, SearchConfig
from ..context import MIN_BUDGET_TOKENS
from ..errors import InvalidInputError
from ..ingest.normalise import MAX_INT
from ..memory import Memory
from ..memory.reads import MAX_LIMIT
from ..types import Episode

F = TypeVar("F", bound=Callable[..., Any])
console = Console()

#: The ranges of the integer options, the ones Memory checks: a value outside them is
#: a usage error (exit 2) that names the option, before any store is opened.
LIMIT = click.IntRange(1, MAX_LIMIT)
COUNT = click.IntRange(1, MAX_INT)
OFFSET = click.IntRange(0, MAX_INT)
BUDGET = click.IntRange(MIN_BUDGET_TOKENS, MAX_INT)
PORT = click.IntRange(0, 65535)


def preset_name(value: str) -> str:
    """A public preset's name; any other is refused with the presets to choose from
    and a hint that benchmark configurations run under ``anamnesis bench``."""
    if value in PRESETS:
        return value
    # The benchmark's names live in anamnesis.bench, which the runtime never loads.
    raise click.BadParameter(
        f"unknown preset {value!r}; choose one of {', '.join(PRESETS)} (benchmark "
        "configurations run under `anamnesis bench DATASET --config NAME`)",
        param_hint="--config",
    )


def search_config(options: dict[str, Any]) -> SearchConfig:
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


def open_memory(ctx: click.Context, *, create: bool = True) -> Memory:
    """The Memory the command runs on; ``create=False`` for commands that only read
    (a missing store is then NotFoundError, exit 3, and nothing is created)."""
    options = ctx.obj
    with handled():
        memory = Memory(
            path=options["path"],
            url=options["url"],
            embedder=options["embedder"],
            config=search_config(options),
            reindex=options.get("reindex", False),
            llm=options.get("llm"),
            gate=options.get("gate"),
            durability=options.get("durability"),
            indexing=options.get("indexing"),
            warm=False,  # one verb per process: nothing to load ahead of it
            create=create,
        )
    ctx.call_on_close(memory.close)
    return memory


def episode_json(episode: Episode) -> dict[str, Any]:
    record = asdict(episode)
    record["event_time"] = episode.event_time.isoformat()
    record["recorded_at"] = episode.recorded_at.isoformat()
    return record


def progress_bar() -> Progress:
    """A progress bar on standard error, drawn only when it is a terminal (a pipe or a
    log file gets the command's one-line summary, not the bar's frames)."""
    return Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=errors,
        transient=False,
        disable=not errors.is_terminal,
    )


# -- JSON output (README, "Use it from the shell": one convention for every command) ------
json_option = click.option(
    "--json", "as_json", is_flag=True, help="Print one JSON document (stable, for scripts)."
)
lines_option = click.option(
    "--nl", "as_lines", is_flag=True, help="Print JSON lines: one object per line, none if empty."
)


def _jsonable(value: object) -> str:
    """A value JSON has no type for: a time as ISO 8601 (as every record prints it)."""
    return value.isoformat() if isinstance(value, datetime) else str(value)


def print_json(value: Any) -> None:
    """One JSON document on standard output: the whole of a command's ``--json`` answer."""
    click.echo(json.dumps(value, ensure_ascii=False, indent=2, default=_jsonable))


def print_listing(items: Iterable[Any], *, lines: bool) -> None:
    """A listing command's ``--json`` answer: a JSON array (``[]`` when empty), or with
    ``--nl`` one compact JSON object per line (nothing when empty)."""
    if not lines:
        print_json(list(items))
        return
    for item in items:
        click.echo(json.dumps(item, ensure_ascii=False, default=_jsonable))


# -- warnings -----------------------------------------------------------------------------
def show_warning(
    message: Warning | str,
    category: type[Warning],
    filename: str,
    lineno: int,
    file: IO[str] | None = None,
    line: str | None = None,
) -> None:
    """Print a warning for a person: one line on standard error, without Python's
    source location (``warnings.showwarning`` while a command runs)."""
    text = " ".join(str(message).split())
    print(f"warning: {text}", file=file or sys.stderr)


def clean_warnings(ctx: click.Context) -> None:
    """Show the library's warnings as ``show_warning`` does until the command ends."""
    previous = warnings.showwarning
    warnings.showwarning = show_warning

    def restore() -> None:
        warnings.showwarning = previous

    ctx.call_on_close(restore)


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
