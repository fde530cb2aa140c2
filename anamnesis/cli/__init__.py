"""The ``anamnesis`` command line: a thin shell over Memory, one command per verb."""

from __future__ import annotations

from importlib import import_module
from pathlib import Path
from typing import Any

import click

from .. import __version__
from ..config import DEFAULT_PRESET, PRESET_HELP
from ..ingest.gate import GATE_PRESETS
from . import history, lifecycle, read, surfaces, write
from .common import clean_warnings, preset_name


class _LazyGroup(click.Group):
    """A group whose ``lazy`` commands are imported the first time one is resolved.

    ``anamnesis bench`` loads the evaluation code (``anamnesis.bench``); every other
    command, and ``--help``, must not pay for it, so the listing shows a lazy
    command's short help from ``lazy`` without importing it.
    """

    def __init__(self, *args: Any, lazy: dict[str, tuple[str, str]], **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        #: Command name -> ("module:attribute", short help).
        self.lazy = lazy

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted({*super().list_commands(ctx), *self.lazy})

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name not in self.lazy or cmd_name in self.commands:
            return super().get_command(ctx, cmd_name)
        module, _, attribute = self.lazy[cmd_name][0].partition(":")
        command = getattr(import_module(module), attribute)
        if not isinstance(command, click.Command):
            raise TypeError(f"{self.lazy[cmd_name][0]} is not a click command")
        self.add_command(command, cmd_name)
        return command

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        listed = []
        for name in self.list_commands(ctx):
            if name in self.lazy and name not in self.commands:
                # A stand-in carrying the help text, so listing does not import.
                listed.append((name, click.Command(name, help=self.lazy[name][1])))
            elif (command := self.get_command(ctx, name)) is not None and not command.hidden:
                listed.append((name, command))
        if listed:
            # As click's own listing: the help cut to what fits beside the longest name.
            limit = formatter.width - 6 - max(len(name) for name, _ in listed)
            with formatter.section("Commands"):
                formatter.write_dl([(n, c.get_short_help_str(limit)) for n, c in listed])


#: The commands loaded on first use: (import path, the help ``--help`` shortens and lists).
LAZY_COMMANDS = {
    "bench": ("anamnesis.bench.cli:bench", "Reproducible retrieval and speed benchmarks."),
}


@click.group(
    cls=_LazyGroup,
    lazy=LAZY_COMMANDS,
    context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100},
)
@click.version_option(__version__, prog_name="anamnesis")
@click.option(
    "--path",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="Store file (default: $ANAMNESIS_PATH or the data dir).",
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
    callback=lambda ctx, param, value: preset_name(value),
    help=f"Pipeline: {', '.join(PRESET_HELP)} (docs/guide.md).",
)
@click.option(
    "--gate",
    type=click.Choice(list(GATE_PRESETS)),
    default="off",
    metavar="NAME",
    help=f"Gate on adds: {', '.join(GATE_PRESETS)}.  [default: off]",
)
# Not listed in --help, which must fit a screen: `fit-ranker --help`, the README and the
# guide name it, beside the only preset it serves (--config ranker).
@click.option(
    "--ranker-model",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    default=None,
    hidden=True,
    help="A ranker from `fit-ranker` for --config ranker.",
)
@click.option(
    "--durable",
    is_flag=True,
    help="Sync each commit to disk: survives a power loss, slower writes.",
)
@click.option(
    "--background-indexing",
    is_flag=True,
    help="Writes return once the text is stored; vectors follow (serve, mcp).",
)
@click.pass_context
def main(
    ctx: click.Context,
    path: Path | None,
    url: str | None,
    embedder: str,
    config: str,
    gate: str,
    ranker_model: Path | None,
    durable: bool,
    background_indexing: bool,
) -> None:
    """Anamnesis: long-term memory for LLM agents, verbatim and offline."""
    ctx.ensure_object(dict)
    clean_warnings(ctx)
    ctx.obj.update(
        path=path,
        url=url,
        embedder=embedder,
        config=config,
        gate=gate,
        ranker_model=ranker_model,
        durability="full" if durable else None,
        indexing="background" if background_indexing else None,
    )


for command in (
    write.add,
    write.import_,
    read.search,
    read.context,
    read.get,
    read.list_,
    write.delete,
    lifecycle.forget,
    lifecycle.archive,
    lifecycle.restore,
    lifecycle.decay,
    lifecycle.gate_decisions,
    write.consolidate,
    read.facts,
    read.export,
    read.stats,
    read.check,
    write.reindex,
    write.fit_ranker_,
    write.demo,
    surfaces.mcp,
    surfaces.serve,
    surfaces.keys,
    history.hook,
):
    main.add_command(command)
