"""Shared fixtures: real stores in temporary directories, the real MiniLM embedder."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from llm_fixtures import FakeLLM

from anamnesis import Memory
from anamnesis.embed.minilm import MiniLMEmbedder


@pytest.fixture(scope="session")
def embedder() -> MiniLMEmbedder:
    """The default embedder, loaded once for the whole run."""
    return MiniLMEmbedder()


@pytest.fixture
def db_path(tmp_path: Path) -> Path:
    return tmp_path / "memory.db"


@pytest.fixture
def memory(db_path: Path, embedder: MiniLMEmbedder) -> Iterator[Memory]:
    """A fresh, empty SQLite memory."""
    with Memory(path=db_path, embedder=embedder) as mem:
        yield mem


@pytest.fixture
def fake_llm() -> Iterator[FakeLLM]:
    """A fake OpenAI-compatible chat server on loopback (``llm_fixtures.FakeLLM``)."""
    fake = FakeLLM()
    yield fake
    fake.close()
