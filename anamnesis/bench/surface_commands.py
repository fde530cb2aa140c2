"""The surface benchmarks: what MCP and REST cost on top of the in-process call
(``anamnesis bench mcp``, ``anamnesis bench rest``)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import click

F = TypeVar("F", bound=Callable[..., Any])


def store_options(command: F) -> F:
    """``--data``, ``--store`` and ``--episodes``: the LoCoMo store both benchmarks
    search (``surfaces.build_store``)."""
    for option in reversed(
        [
            click.option(
                "--data",
                type=click.Path(exists=True, dir_okay=False, path_type=Path),
                required=True,
                help="LoCoMo JSON (its turns fill the store, its questions are the queries).",
            ),
            click.option("--store", type=click.Path(dir_okay=False, path_type=Path), required=True),
            click.option("--episodes", default=10_000, show_default=True),
        ]
    ):
        command = option(command)
    return command


@click.command(name="mcp")
@store_options
@click.option("--queries", default=100, show_default=True)
@click.option("--embedder", default="minilm", show_default=True)
def mcp_command(data: Path, store: Path, episodes: int, queries: int, embedder: str) -> None:
    """The MCP recall tool's round trip against the same search in process."""
    from .surfaces import build_store, in_process, mcp_recall

    questions = build_store(data, store, episodes, embedder)[:queries]
    direct = in_process(store, embedder, questions)
    remote = mcp_recall(store, embedder, questions)
    click.echo(f"{episodes} episodes, {len(questions)} queries, embedder {embedder}")
    click.echo(f"Memory.search     p50 {direct.p50:.1f} ms  p95 {direct.p95:.1f} ms")
    click.echo(f"MCP recall (stdio) p50 {remote.p50:.1f} ms  p95 {remote.p95:.1f} ms")
    click.echo(f"surface cost at p50: {remote.p50 - direct.p50:+.1f} ms")


@click.command(name="rest")
@store_options
@click.option("--queries", default=200, show_default=True, help="Searches at each level.")
@click.option("--adds", default=200, show_default=True, help="Adds at each level.")
@click.option("--clients", default="1,8,32", show_default=True, help="Levels of concurrency.")
@click.option("--embedder", default="minilm", show_default=True)
def rest_command(
    data: Path, store: Path, episodes: int, queries: int, adds: int, clients: str, embedder: str
) -> None:
    """REST search and add latency and throughput at each level of concurrent clients,
    against the same verbs in process (anamnesis serve on 127.0.0.1, a key per request)."""
    from .rest import in_process, over_http, served
    from .surfaces import build_store

    levels = tuple(int(level) for level in clients.split(","))
    questions = build_store(data, store, episodes, embedder)[:queries]
    direct = {load.verb: load for load in in_process(store, embedder, questions, adds)}
    with served(store, embedder, store.parent) as (url, key):
        loads = over_http(url, key, questions, adds, levels)
    click.echo(f"{episodes} episodes, embedder {embedder}, {len(questions)} searches and ")
    click.echo(f"{adds} adds per level\n")
    click.echo("| surface | verb | clients | p50 ms | p99 ms | requests/s | errors |")
    click.echo("|---|---|---|---|---|---|---|")
    for load in [*direct.values(), *loads]:
        surface = "in process" if load in direct.values() else "REST"
        click.echo(
            f"| {surface} | {load.verb} | {load.clients} | {load.p50:.1f} | {load.p99:.1f} | "
            f"{load.throughput:.0f} | {load.errors} |"
        )
    for load in loads:
        if load.clients == 1:
            cost = load.p50 - direct[load.verb].p50
            click.echo(f"\nREST {load.verb} cost at p50, 1 client: {cost:+.1f} ms")


@click.command(name="inspector")
@store_options
@click.option("--renders", default=20, show_default=True, help="Fetches of each view.")
@click.option("--embedder", default="minilm", show_default=True)
def inspector_command(data: Path, store: Path, episodes: int, renders: int, embedder: str) -> None:
    """The memory inspector's render times: each view through anamnesis serve, logged
    in with an admin key, timed to the last byte."""
    from .inspector import run_inspector

    times = run_inspector(data, store, episodes, embedder, renders)
    click.echo(f"{episodes} episodes, embedder {embedder}, {renders} fetches per view\n")
    click.echo("| view | p50 ms | p95 ms | KB |")
    click.echo("|---|---|---|---|")
    for page in times:
        click.echo(f"| {page.view} | {page.p50:.1f} | {page.p95:.1f} | {page.bytes / 1024:.0f} |")
