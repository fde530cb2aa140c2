"""Fixtures that build real stores of both backends, and helpers to fill them.

Import the fixtures a test module uses (they are registered under the names in
``name=``, so the imports do not clash with test arguments).

PostgreSQL tests read ``ANAMNESIS_TEST_POSTGRES_URL`` (``.ci/postgres.sh start`` prints
it). When it is unset they are skipped with that reason, except under ``CI=true``,
where a missing server is a failure: CI must not go green by skipping a backend.
Each Postgres store lives in a fresh schema that is dropped afterwards, so tests can
run in parallel against one database.
"""

from __future__ import annotations

import contextlib
import json
import os
import random
import uuid
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any
from urllib.parse import quote

import numpy as np
import pytest

from anamnesis.retrieve.query import search_terms
from anamnesis.types import Episode, Scope

POSTGRES_URL_ENV = "ANAMNESIS_TEST_POSTGRES_URL"
#: Dimension of the random unit vectors used by pure store tests.
DIM = 16
BACKENDS = ("sqlite", "postgres")
T0 = datetime(2024, 1, 1, tzinfo=UTC)
DEFAULT_SCOPE = Scope("alice")
LOCOMO_FIXTURE = Path(__file__).parent / "fixtures" / "locomo_conv26_sessions1-4.json"


def postgres_url_or_skip() -> str:
    """The test server's URL; skip (or, under CI, fail) when none is configured."""
    url = os.environ.get(POSTGRES_URL_ENV)
    if url:
        return url
    reason = f'{POSTGRES_URL_ENV} is not set; start a server with: eval "$(.ci/postgres.sh start)"'
    if os.environ.get("CI", "").lower() == "true":
        pytest.fail(f"CI=true but {reason}", pytrace=False)
    pytest.skip(reason)


def with_search_path(url: str, schema: str) -> str:
    """``url`` with libpq options that make ``schema`` (then public) the search path."""
    options = quote(f"-csearch_path={schema},public", safe="")
    return f"{url}{'&' if '?' in url else '?'}options={options}"


@contextlib.contextmanager
def fresh_schema_url() -> Iterator[str]:
    """A URL whose tables go into a fresh, empty schema, dropped on leaving."""
    import psycopg

    url = postgres_url_or_skip()
    schema = f"test_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(f'CREATE SCHEMA "{schema}"')
    try:
        yield with_search_path(url, schema)
    finally:
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute(f'DROP SCHEMA "{schema}" CASCADE')


@pytest.fixture(name="postgres_schema_url")
def postgres_schema_url_fixture() -> Iterator[str]:
    """A URL whose tables go into a fresh, empty schema, dropped after the test."""
    with fresh_schema_url() as url:
        yield url


StoreFactory = Callable[..., Any]


@pytest.fixture(name="backend", params=BACKENDS)
def backend_fixture(request: pytest.FixtureRequest) -> str:
    """The name of the backend under test."""
    return request.param


@pytest.fixture(name="store_url")
def store_url_fixture(backend: str, tmp_path, request: pytest.FixtureRequest) -> str:
    """Where the store of ``backend`` lives: a file path, or a Postgres URL."""
    if backend == "sqlite":
        return str(tmp_path / "memory.db")
    return request.getfixturevalue("postgres_schema_url")


@pytest.fixture(name="open_store")
def open_store_fixture(backend: str, store_url: str) -> Iterator[StoreFactory]:
    """A function that opens (another handle on) the test's store; all are closed after."""
    opened: list[Any] = []

    def opener(dim: int = DIM) -> Any:
        if backend == "sqlite":
            from anamnesis.store.sqlite import SQLiteStore

            handle = SQLiteStore(store_url, dim=dim)
        else:
            from anamnesis.store.postgres import PostgresStore

            handle = PostgresStore(store_url, dim=dim)
        opened.append(handle)
        return handle

    yield opener
    for handle in opened:
        handle.close()


@pytest.fixture(name="store")
def store_fixture(open_store: StoreFactory) -> Any:
    """An empty store of each backend (the test runs once per backend)."""
    return open_store()


def unit_vectors(n: int, dim: int = DIM, seed: int = 0) -> np.ndarray:
    """``n`` random L2-normalised float32 vectors."""
    rng = np.random.default_rng(seed)
    vectors = rng.normal(size=(n, dim)).astype(np.float32)
    return vectors / np.linalg.norm(vectors, axis=1, keepdims=True)


_counter = iter(range(10**9))


def make_episode(
    content: str = "hello",
    *,
    scope: Scope = DEFAULT_SCOPE,
    id: str | None = None,
    role: str | None = "user",
    speaker: str | None = None,
    modality: str = "text",
    event_time: datetime | None = None,
    recorded_at: datetime | None = None,
    metadata: dict[str, Any] | None = None,
    turn_index: int | None = None,
    content_hash: str | None = None,
) -> Episode:
    """An Episode with sensible defaults; each call gets a new id and a later time."""
    n = next(_counter)
    when = event_time or T0 + timedelta(minutes=n)
    return Episode(
        id=id or f"ep_{n:08d}_{uuid.uuid4().hex[:6]}",
        user_id=scope.user_id,
        agent_id=scope.agent_id,
        session_id=scope.session_id,
        role=role,
        speaker=speaker,
        content=content,
        modality=modality,
        event_time=when,
        recorded_at=recorded_at or when + timedelta(seconds=1, microseconds=123),
        metadata=metadata or {},
        content_hash=content_hash or f"hash-{content}",
        turn_index=turn_index,
    )


def sqlite_steps(store: Any, action: Callable[[], Any]) -> tuple[int, Any]:
    """The SQLite virtual-machine steps (in units of 100) that ``action()`` spends on the
    store's connection, and what it returns: a cost that does not depend on the
    machine's load."""
    count = 0

    def tick() -> int:
        nonlocal count
        count += 1
        return 0

    store._conn.set_progress_handler(tick, 100)
    try:
        result = action()
    finally:
        store._conn.set_progress_handler(None, 0)
    return count, result


def locomo_word_corpus() -> tuple[list[str], list[str], list[list[str]]]:
    """Texts and queries for comparing a lexical ranking with a reference's: the 76
    real turns of the LoCoMo fixture; 124 sentences of 4-40 words recombined from them
    (so that term and document frequencies and lengths vary); and the queries, the
    fixture's questions as the retriever sends them plus 30 single words of varied
    frequency."""
    data = json.loads(LOCOMO_FIXTURE.read_text())
    conv = data["conversation"]
    turns = [t["text"] for n in range(1, 5) for t in conv[f"session_{n}"]]
    rng = random.Random(7)
    words = [w for t in turns for w in t.split()]
    mixed = [" ".join(rng.choice(words) for _ in range(rng.randint(4, 40))) for _ in range(124)]
    queries = [search_terms(q["question"]) for q in data["qa"]]
    queries += [[w] for w in search_terms(" ".join(turns))[:90:3]]
    return turns, mixed, queries
