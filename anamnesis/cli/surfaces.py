"""The commands that serve the memory to agents: ``anamnesis mcp``."""

from __future__ import annotations

import asyncio
import ipaddress
from typing import Any

import click

from ..async_memory import AsyncMemory
from ..cli_errors import handled
from ..errors import InvalidInputError
from ..server import DEFAULT_BUDGET_TOKENS, MAX_BUDGET_TOKENS
from .common import search_config


def _loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


@click.command("mcp")
@click.option(
    "--user",
    "user_id",
    default="default",
    show_default=True,
    help="Whose memory the tools serve; no tool call can change it.",
)
@click.option("--agent", "agent_id", default=None, help="The agent's own scope within the user.")
@click.option(
    "--budget-tokens",
    type=click.IntRange(1, MAX_BUDGET_TOKENS),
    default=DEFAULT_BUDGET_TOKENS,
    show_default=True,
    help="The most any tool answer may take.",
)
@click.option(
    "--allow-forget-all",
    is_flag=True,
    help="Offer a tool that deletes every memory of the user (off by default).",
)
@click.option("--http", is_flag=True, help="Serve streamable HTTP instead of stdio.")
@click.option(
    "--host", default="127.0.0.1", show_default=True, help="HTTP address (loopback only)."
)
@click.option("--port", default=8765, show_default=True, help="HTTP port.")
@click.pass_context
def mcp(
    ctx: click.Context,
    user_id: str,
    agent_id: str | None,
    budget_tokens: int,
    allow_forget_all: bool,
    http: bool,
    host: str,
    port: int,
) -> None:
    """Serve this memory as MCP tools for an agent host (Claude Code, Claude Desktop,
    Cursor, ...): remember, recall, get_context, get_memory, update_memory,
    forget_memory, memory_history, facts. Speaks stdio unless --http is given.

    \b
    Claude Code:  claude mcp add anamnesis -- anamnesis mcp --user me
    """
    with handled():
        if http and not _loopback(host):
            raise InvalidInputError(
                f"--host {host} is not a loopback address: the MCP server has no "
                "authentication yet, so it binds 127.0.0.1 only"
            )
        try:
            from ..server.mcp_server import ServerScope, build_server
        except ImportError as exc:
            raise InvalidInputError(
                f"the MCP server needs the server extras ({exc}): pip install 'anamnesis[server]'"
            ) from exc
        asyncio.run(
            _serve(
                ctx.obj,
                ServerScope(user_id, agent_id),
                build_server,
                budget_tokens=budget_tokens,
                forget_all=allow_forget_all,
                http=(host, port) if http else None,
            )
        )


async def _serve(
    options: dict[str, Any],
    scope: Any,
    build: Any,
    *,
    budget_tokens: int,
    forget_all: bool,
    http: tuple[str, int] | None,
) -> None:
    async with AsyncMemory(
        path=options["path"],
        url=options["url"],
        embedder=options["embedder"],
        config=search_config(options),
        user_id=scope.user_id,
        llm=options.get("llm"),
    ) as memory:
        server = build(memory, scope, budget_tokens=budget_tokens, forget_all=forget_all)
        if http is None:
            await server.run_stdio_async()
        else:
            host, port = http
            await server.run_streamable_http_async(host=host, port=port)
