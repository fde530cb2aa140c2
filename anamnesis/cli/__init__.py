"""The ``anamnesis`` command line: a thin shell over Memory, one command per verb."""

from __future__ import annotations

from pathlib import Path

import click

from .. import __version__
from ..bench.cli import bench
from ..config import DEFAULT_PRESET, PRESET_HELP
from ..ingest.gate import GATE_PRESETS
from . import lifecycle, read, surfaces, write
from .common import clean_warnings, preset_name


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
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
@click.option(
    "--ranker-model",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    default=None,
    help="A ranker from `fit-ranker` for --config ranker.",
)
@click.option(
    "--durable",
    is_flag=True,
    help="Sync each commit to disk: survives a power loss, slower writes.",
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
    bench,
):
    main.add_command(command)
