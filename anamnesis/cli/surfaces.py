"""The commands that serve the memory to agents: ``anamnesis mcp``, ``anamnesis serve``
and its API keys (``anamnesis keys``)."""

from __future__ import annotations

import asyncio
import inspect
import ipaddress
import logging
import signal
import sys
import webbrowser
from pathlib import Path
from typing import Any

import click

from ..cli_errors import errors, handled
from ..context import MIN_BUDGET_TOKENS
from ..errors import InvalidInputError
from ..memory.async_memory import MAX_READERS, AsyncMemory
from ..server import DEFAULT_BUDGET_TOKENS, DEFAULT_LIMITS, MAX_BUDGET_TOKENS, ServerLimits
from .common import PORT, json_option, lines_option, print_json, print_listing, search_config


def _timeout_option(flag: str, default: float, help_text: str) -> Any:
    """A ``serve`` option of seconds the server waits for a client, 0.1 to an hour."""
    return click.option(
        flag, type=click.FloatRange(0.1, 3600), default=default, show_default=True, help=help_text
    )


def _loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


keys_option = click.option(
    "--keys",
    "keys_path",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="API key file (default: $ANAMNESIS_KEYS or keys.db in the OS data directory).",
)


class ToolsHelp(click.Command):
    """A command whose help lists the MCP server's tools where it says ``{tools}``,
    read from the server when the help is shown: ``anamnesis --help``, which shows
    only the first sentence, imports nothing of MCP."""

    def format_help_text(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        text = inspect.cleandoc(self.help or "").replace("{tools}", _tools())
        formatter.write_paragraph()
        with formatter.indentation():
            formatter.write_text(text)


def _tools() -> str:
    """The server's tools, in words."""
    try:
        from ..server.mcp_server import tool_names
    except ImportError:
        return "listed here once the server extras are installed"
    offered = tool_names()
    extra = [name for name in tool_names(forget_all=True) if name not in offered]
    return f"{', '.join(offered)}; with --allow-forget-all, also {', '.join(extra)}"


@click.command("mcp", cls=ToolsHelp)
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
    type=click.IntRange(MIN_BUDGET_TOKENS, MAX_BUDGET_TOKENS),
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
    "--host",
    default="127.0.0.1",
    show_default=True,
    help="HTTP address (another than loopback once the key file holds a key).",
)
@click.option("--port", type=PORT, default=8765, show_default=True, help="HTTP port.")
@keys_option
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
    keys_path: Path | None,
) -> None:
    """Serve this memory as MCP tools for an agent host (Claude Code, Claude Desktop,
    Cursor, ...). Speaks stdio unless --http is given.

    Tools: {tools}.

    Over HTTP, once the key file (the one `anamnesis serve` uses) holds a key, every
    request presents one (Authorization: Bearer anm_...): a user key's tools reach
    that user only, an admin key's the --user given here.

    \b
    Claude Code:  claude mcp add anamnesis -- anamnesis mcp --user me
    """
    with handled():
        try:
            from ..server.keys import KeyStore
            from ..server.mcp_server import ServerScope, build_server
        except ImportError as exc:
            raise InvalidInputError(
                f"the MCP server needs the server extras ({exc}): pip install 'anamnesis[server]'"
            ) from exc
        keys = KeyStore(keys_path) if http else None
        if keys is not None and not _loopback(host) and not keys.required():
            raise InvalidInputError(
                f"--host {host} is not a loopback address and {keys.path} holds no key: "
                "create one first (anamnesis keys create --user NAME), so that no one "
                "reaches the memory without it"
            )
        try:
            asyncio.run(
                _serve(
                    ctx.obj,
                    ServerScope(user_id, agent_id),
                    build_server,
                    budget_tokens=budget_tokens,
                    forget_all=allow_forget_all,
                    http=(host, port) if http else None,
                    keys=keys,
                )
            )
        finally:
            if keys is not None:
                keys.close()


async def _serve(
    options: dict[str, Any],
    scope: Any,
    build: Any,
    *,
    budget_tokens: int,
    forget_all: bool,
    http: tuple[str, int] | None,
    keys: Any,
) -> None:
    async with AsyncMemory(
        path=options["path"],
        url=options["url"],
        embedder=options["embedder"],
        config=search_config(options),
        user_id=scope.user_id,
        llm=options.get("llm"),
        gate=options.get("gate"),
        durability=options.get("durability"),
        indexing=options.get("indexing"),
    ) as memory:
        server = build(memory, scope, budget_tokens=budget_tokens, forget_all=forget_all, keys=keys)
        if http is None:
            await server.run_stdio_async()
            return
        import uvicorn

        from ..server import DEFAULT_LIMITS
        from ..server.auth import KeyGate
        from ..server.connections import server_config

        host, port = http
        app = KeyGate(server.streamable_http_app(host=host), keys)
        # The REST server's bounds on slow clients and connections (RELIABILITY.md, 4b).
        config = server_config(app, host, port, DEFAULT_LIMITS)
        await uvicorn.Server(config).serve()


@click.command("serve")
@click.option("--host", default="127.0.0.1", show_default=True, help="Address to bind.")
@click.option("--port", type=PORT, default=8000, show_default=True, help="TCP port.")
@keys_option
@click.option(
    "--max-body-mb",
    type=click.FloatRange(0.001, 1024),
    default=DEFAULT_LIMITS.max_body_bytes / 2**20,
    show_default=True,
    help="Largest request body accepted (413 above).",
)
@click.option(
    "--cors-origin",
    "cors_origins",
    multiple=True,
    help="Allow browser pages from this origin (repeatable; CORS is off by default).",
)
@click.option(
    "--readers",
    type=click.IntRange(1, MAX_READERS),
    default=4,
    show_default=True,
    help="Threads that serve reads in parallel.",
)
@_timeout_option(
    "--header-timeout",
    DEFAULT_LIMITS.header_timeout,
    "Seconds a request's line and headers may take to arrive; the connection is closed after.",
)
@_timeout_option(
    "--body-timeout",
    DEFAULT_LIMITS.body_timeout,
    "Seconds a request's body may take to arrive once its headers have (408 after).",
)
@_timeout_option(
    "--keep-alive-timeout",
    DEFAULT_LIMITS.keep_alive_timeout,
    "Seconds an idle connection is kept open between requests.",
)
@click.option(
    "--max-connections",
    type=click.IntRange(1, 100_000),
    default=DEFAULT_LIMITS.max_connections,
    show_default=True,
    help="Connections served at once; a request beyond them gets 503 at once.",
)
@click.option(
    "--open",
    "open_browser",
    is_flag=True,
    help="Open the memory inspector in a browser, logged in as admin by a one-time link.",
)
@click.pass_context
def serve(
    ctx: click.Context,
    host: str,
    port: int,
    keys_path: Path | None,
    max_body_mb: float,
    cors_origins: tuple[str, ...],
    readers: int,
    header_timeout: float,
    body_timeout: float,
    keep_alive_timeout: float,
    max_connections: int,
    open_browser: bool,
) -> None:
    """Serve this memory over HTTP: every verb as a REST endpoint (OpenAPI document at
    /openapi.json, health check at /health), and the memory inspector, pages where a
    person sees and corrects what is stored, at /ui/. One JSON log line per request
    on stderr.

    \b
    Requests present an API key (Authorization: Bearer anm_...) once the key file
    holds one; each key reaches one user, or every user for an admin key
    (anamnesis keys create); the inspector's login form takes the same keys. Binds
    127.0.0.1 unless --host says otherwise, and refuses any other address until a key
    exists. Every wait on a client is bounded (the timeouts below), and so are the
    connections served at once. Needs the server extras: pip install 'anamnesis[server]'.

    \b
    --open (loopback only) prints a login link and opens it in the browser: it logs
    in once with an admin key that lives as long as this process (never written to
    the key file), then dies; from then on every request needs a key, the file's or
    the browser's.
    """
    with handled():
        try:
            import uvicorn

            from ..server.connections import server_config
            from ..server.keys import KeyStore
            from ..server.rest import build_app
            from ..server.ui.login import LocalLogin
        except ImportError as exc:
            raise InvalidInputError(
                f"the REST server needs the server extras ({exc}): pip install 'anamnesis[server]'"
            ) from exc
        keys = KeyStore(keys_path)
        if not _loopback(host) and not keys.required():
            raise InvalidInputError(
                f"--host {host} is not a loopback address and {keys.path} holds no key: "
                "create one first (anamnesis keys create --user NAME), so that no one "
                "reaches the memory without it"
            )
        if open_browser and not _loopback(host):
            raise InvalidInputError(
                f"--open logs a browser in as admin: it serves a loopback address only, "
                f"not --host {host}"
            )
        login = LocalLogin(keys) if open_browser else None
        _log_requests()

        async def run() -> None:
            async with AsyncMemory(
                path=ctx.obj["path"],
                url=ctx.obj["url"],
                embedder=ctx.obj["embedder"],
                config=search_config(ctx.obj),
                llm=ctx.obj.get("llm"),
                gate=ctx.obj.get("gate"),
                durability=ctx.obj.get("durability"),
                indexing=ctx.obj.get("indexing"),
                readers=readers,
            ) as memory:
                limits = ServerLimits(
                    max_body_bytes=int(max_body_mb * 2**20),
                    header_timeout=header_timeout,
                    body_timeout=body_timeout,
                    keep_alive_timeout=keep_alive_timeout,
                    max_connections=max_connections,
                )
                app = build_app(
                    memory,
                    login if login is not None else keys,
                    limits=limits,
                    cors_origins=cors_origins,
                    login=login,
                )
                config = server_config(app, host, port, limits)
                server = uvicorn.Server(config)
                errors.print(f"anamnesis: serving on http://{host}:{port}", highlight=False)
                if login is None:
                    await server.serve()
                    return
                opening = asyncio.create_task(_open_when_up(server, host, login))
                try:
                    await server.serve()
                finally:
                    opening.cancel()

        # uvicorn shuts down gracefully on SIGINT or SIGTERM, then raises the signal
        # again: both end here as KeyboardInterrupt, after the memory is closed.
        signal.signal(signal.SIGTERM, _interrupt)
        try:
            asyncio.run(run())
        except KeyboardInterrupt:
            pass
        finally:
            keys.close()


async def _open_when_up(server: Any, host: str, login: Any) -> None:
    """Print the one-time login link once the server listens, and open it."""
    while not server.started:
        await asyncio.sleep(0.05)
    port = server.servers[0].sockets[0].getsockname()[1]  # the one chosen for --port 0
    link = login.link(f"http://[{host}]:{port}" if ":" in host else f"http://{host}:{port}")
    # Plain echo: a console would wrap the link, and it must stay whole to be pasted.
    click.echo(f"anamnesis: the memory inspector, logged in once: {link}", err=True)
    await asyncio.to_thread(webbrowser.open, link)


def _interrupt(signum: int, frame: Any) -> None:
    raise KeyboardInterrupt


def _log_requests() -> None:
    """One line per request on stderr, as the server writes it (JSON)."""
    logger = logging.getLogger("anamnesis.server")
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("%(message)s"))
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    logger.propagate = False


@click.group("keys")
@keys_option
@click.pass_context
def keys(ctx: click.Context, keys_path: Path | None) -> None:
    """API keys of the REST server: create, list, revoke. Only a hash of each key is
    stored; the key itself is shown once, when it is created. --keys goes before or
    after the subcommand."""
    ctx.obj["keys_path"] = keys_path


def _key_store(ctx: click.Context, keys_path: Path | None) -> Any:
    """The key file a ``keys`` subcommand works on: its own --keys, else the group's."""
    from ..server.keys import KeyStore

    with handled():
        store = KeyStore(keys_path if keys_path is not None else ctx.obj.get("keys_path"))
    ctx.call_on_close(store.close)
    return store


def _key_json(key: Any) -> dict[str, Any]:
    return {
        "id": key.id,
        "name": key.name,
        "user_id": key.user_id,
        "agent_id": key.agent_id,
        "admin": key.is_admin,
        "created_at": key.created_at.isoformat(),
        "revoked_at": key.revoked_at.isoformat() if key.revoked_at else None,
    }


@keys.command("create")
@click.option("--user", "user_id", default=None, help="The one user this key reaches.")
@click.option("--agent", "agent_id", default=None, help="Narrow the key to one agent of the user.")
@click.option("--admin", is_flag=True, help="A key that reaches every user (instead of --user).")
@click.option("--name", default="", help="A label for listings (who or what uses the key).")
@keys_option
@json_option
@click.pass_context
def create_key(
    ctx: click.Context,
    user_id: str | None,
    agent_id: str | None,
    admin: bool,
    name: str,
    keys_path: Path | None,
    as_json: bool,
) -> None:
    """Create a key and print it (this once only)."""
    store = _key_store(ctx, keys_path)
    with handled():
        if admin == (user_id is not None):
            raise InvalidInputError("name exactly one of --user NAME or --admin")
        key, secret = store.create(name, user_id=user_id, agent_id=agent_id)
    errors.print(f"created key {key.id} for {_reach(key)}; it is shown this once:", highlight=False)
    if as_json:
        print_json({**_key_json(key), "key": secret})
    else:
        click.echo(secret)


@keys.command("list")
@keys_option
@json_option
@lines_option
@click.pass_context
def list_keys(ctx: click.Context, keys_path: Path | None, as_json: bool, as_lines: bool) -> None:
    """Every key: id, name, what it reaches, when created, and whether revoked."""
    found = _key_store(ctx, keys_path).list()
    if as_json or as_lines:
        print_listing((_key_json(key) for key in found), lines=as_lines)
        return
    for key in found:
        revoked = f"revoked {key.revoked_at:%Y-%m-%d %H:%M}" if key.revoked_at else "active"
        created = f"{key.created_at:%Y-%m-%d %H:%M}"
        click.echo(f"{key.id}  {_reach(key):<28} {created}  {revoked}  {key.name}")


@keys.command("revoke")
@click.argument("key_id")
@keys_option
@json_option
@click.pass_context
def revoke_key(ctx: click.Context, key_id: str, keys_path: Path | None, as_json: bool) -> None:
    """Revoke a key by id: it stops working at once, on a running server too."""
    store = _key_store(ctx, keys_path)
    with handled():
        key = store.revoke(key_id)
    if as_json:
        print_json(_key_json(key))
    else:
        click.echo(f"revoked {key.id} ({_reach(key)})")


def _reach(key: Any) -> str:
    if key.is_admin:
        return "every user (admin)"
    return f"user {key.user_id}" + (f", agent {key.agent_id}" if key.agent_id else "")
