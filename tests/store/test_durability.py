"""Durability is a choice: ``normal`` (survives a process crash) or ``full`` (also a
power loss), set on every connection the store opens (RELIABILITY.md, promise 1).

On SQLite it is ``PRAGMA synchronous`` (NORMAL or FULL) on the writer and on every
other connection (usage counters, the lexical index's builder); on PostgreSQL
``full`` sets ``synchronous_commit = on`` whatever the server's default.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest
from click.testing import CliRunner
from store_fixtures import postgres_schema_url_fixture  # noqa: F401  (registered fixture)

from anamnesis import AsyncMemory, InvalidInputError, Memory
from anamnesis.cli import main
from anamnesis.config import DURABILITY_ENV
from anamnesis.embed import get_embedder
from anamnesis.store.sqlite.driver import sqlite3

EDGE = get_embedder("edge")
#: What ``PRAGMA synchronous`` reads back for each durability.
PRAGMA_VALUE = {"normal": 1, "full": 2}


class _Recorded:
    """Every SQLite connection opened while installed, with ``PRAGMA synchronous`` read
    just before each is closed (so connections that live briefly are seen too)."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.closed: list[tuple[str, int]] = []
        real_connect = sqlite3.connect
        recorded = self

        class Connection(sqlite3.Connection):
            label = ""

            def close(self) -> None:
                try:
                    value = self.execute("PRAGMA synchronous").fetchone()[0]
                    recorded.closed.append((self.label, value))
                except sqlite3.Error:
                    pass
                super().close()

        def connect(database: Any, *args: Any, **kwargs: Any) -> sqlite3.Connection:
            conn = real_connect(database, *args, factory=Connection, **kwargs)
            conn.label = str(database)
            return conn

        monkeypatch.setattr(sqlite3, "connect", connect)

    def writable(self, store: Path) -> list[int]:
        """The synchronous setting of each connection that could write to ``store``
        (the read-only probe that identifies the file at open writes nothing)."""
        return [
            value for label, value in self.closed if str(store) in label and "mode=ro" not in label
        ]


@pytest.mark.parametrize("durability", ["normal", "full"])
def test_every_sqlite_connection_syncs_as_chosen(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, durability: str
) -> None:
    recorded = _Recorded(monkeypatch)
    store = tmp_path / "m.db"
    with Memory(path=store, embedder=EDGE, warm=False, durability=durability) as memory:
        memory.add(["I keep bees", "I live in Porto"], user_id="ana")
        memory.store.warm_up()  # the lexical index builds on a connection of its own
        (hit, *_) = memory.search("bees", user_id="ana")  # counted: usage connection
        memory.get(hit.episode.id, user_id="ana")
        assert memory.capabilities["durability"] == durability
    values = recorded.writable(store)
    assert len(values) >= 3, recorded.closed  # the writer, the lexical builder, the usage log
    assert set(values) == {PRAGMA_VALUE[durability]}, recorded.closed


def test_the_default_is_normal_and_the_environment_can_choose(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv(DURABILITY_ENV, raising=False)
    with Memory(path=tmp_path / "a.db", embedder=EDGE, warm=False) as memory:
        assert memory.capabilities["durability"] == "normal"
    monkeypatch.setenv(DURABILITY_ENV, "full")
    with Memory(path=tmp_path / "b.db", embedder=EDGE, warm=False) as memory:
        assert memory.capabilities["durability"] == "full"
    with Memory(
        path=tmp_path / "c.db", embedder=EDGE, warm=False, durability="normal"
    ) as memory:  # the argument wins over the environment
        assert memory.capabilities["durability"] == "normal"


def test_an_unknown_durability_is_invalid_input_and_creates_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with pytest.raises(InvalidInputError, match="durability must be one of normal, full"):
        Memory(path=tmp_path / "a.db", embedder=EDGE, warm=False, durability="paranoid")
    monkeypatch.setenv(DURABILITY_ENV, "FULL")
    with pytest.raises(InvalidInputError, match=f"{DURABILITY_ENV} must be one of"):
        Memory(path=tmp_path / "a.db", embedder=EDGE, warm=False)
    assert not (tmp_path / "a.db").exists()


def test_async_memory_and_the_cli_pass_it_on(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import asyncio

    async def opened() -> str:
        async with AsyncMemory(
            path=tmp_path / "a.db", embedder=EDGE, warm=False, durability="full"
        ) as memory:
            return str(memory.capabilities["durability"])

    assert asyncio.run(opened()) == "full"
    recorded = _Recorded(monkeypatch)
    store = tmp_path / "cli.db"
    argv = ["--path", str(store), "--embedder", "edge", "--durable", "add", "x", "--user", "a"]
    result = CliRunner().invoke(main, argv)
    assert result.exit_code == 0, result.output
    assert set(recorded.writable(store)) == {PRAGMA_VALUE["full"]}, recorded.closed


def _pooled_setting(memory: Memory) -> str:
    with memory.store._pool.connection() as conn:  # type: ignore[attr-defined]
        return str(conn.execute("SHOW synchronous_commit").fetchone()[0])


def test_full_durability_on_postgres_commits_synchronously_whatever_the_server_says(
    postgres_schema_url: str,
) -> None:
    lax = postgres_schema_url + quote(" -csynchronous_commit=off", safe="")
    with Memory(url=lax, embedder=EDGE, warm=False) as memory:
        assert _pooled_setting(memory) == "off"  # normal: the server's (here, the URL's) own
    with Memory(url=lax, embedder=EDGE, warm=False, durability="full") as memory:
        assert memory.capabilities["durability"] == "full"
        assert _pooled_setting(memory) == "on"


def test_a_store_opened_directly_refuses_an_unknown_durability(
    tmp_path: Path, postgres_schema_url: str
) -> None:
    from anamnesis.store.postgres import PostgresStore
    from anamnesis.store.sqlite import SQLiteStore

    with pytest.raises(InvalidInputError, match="durability must be one of normal, full"):
        SQLiteStore(tmp_path / "m.db", dim=4, durability="fast")
    assert not (tmp_path / "m.db").exists()
    with pytest.raises(InvalidInputError, match="durability must be one of normal, full"):
        PostgresStore(postgres_schema_url, dim=4, durability="fast")
