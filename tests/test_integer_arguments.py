"""Every integer argument of every verb is checked against the range the backends can
store (signed 64-bit, ``anamnesis.ingest.normalise.MAX_INT``), in one place.

An integer out of range is ``InvalidInputError`` naming the argument, its range and
the value, on both backends, in ``Memory`` and ``AsyncMemory`` alike; the largest value
in range works on both backends. The property test in ``test_hostile_inputs`` draws
integers up to 2**70 into the same arguments.
"""

from __future__ import annotations

import asyncio
import os
import re
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from store_fixtures import (  # noqa: F401  (fixtures are found by their registered names)
    backend_fixture,
    postgres_schema_url_fixture,
    store_url_fixture,
)

from anamnesis import AsyncMemory, InvalidInputError, Memory
from anamnesis.cli import main
from anamnesis.cli_errors import EXIT_BAD_INPUT
from anamnesis.decay import DecayPolicy, strength
from anamnesis.embed import get_embedder

EDGE = get_embedder("edge")
#: What SQLite INTEGER and PostgreSQL bigint hold.
MAX_INT, MIN_INT = 2**63 - 1, -(2**63)

#: (verb, keyword, the smallest value in range, the largest) for every integer argument.
INTEGER_ARGUMENTS: tuple[tuple[str, str, int, int], ...] = (
    ("search", "limit", 1, 1000),
    ("context", "limit", 1, 1000),
    ("context", "budget_tokens", 32, MAX_INT),
    ("context", "neighbour_hits", 0, 1000),
    ("get_all", "limit", 1, 1000),
    ("get_all", "offset", 0, MAX_INT),
    ("facts", "limit", 1, MAX_INT),
    ("consolidate", "limit", 1, MAX_INT),
)


def call(memory: Any, verb: str, keyword: str, value: object) -> Any:
    """``memory.<verb>(..., keyword=value)`` in the scope of user ana."""
    method = getattr(memory, verb)
    if verb in ("search", "context"):
        return method("where do I live?", user_id="ana", **{keyword: value})
    return method(user_id="ana", **{keyword: value})


@pytest.fixture(name="open_memory")
def open_memory_fixture(backend: str, store_url: str) -> Iterator[Callable[[], Memory]]:
    """A Memory on the test's backend, with two episodes of user ana."""
    opened: list[Memory] = []

    def opener() -> Memory:
        where = {"path": store_url} if backend == "sqlite" else {"url": store_url}
        memory = Memory(**where, embedder=EDGE, warm=False)  # type: ignore[arg-type]
        memory.add(["I live in Porto", "I work at Acme"], user_id="ana", session_id="s1")
        opened.append(memory)
        return memory

    yield opener
    for memory in opened:
        memory.close()


@pytest.mark.parametrize(("verb", "keyword", "low", "high"), INTEGER_ARGUMENTS)
def test_an_integer_past_its_range_is_invalid_input_on_every_backend(
    open_memory: Callable[[], Memory], verb: str, keyword: str, low: int, high: int
) -> None:
    memory = open_memory()
    for value in (high + 1, 2**63, 2**70, low - 1, MIN_INT - 1, True):
        with pytest.raises(InvalidInputError) as raised:
            call(memory, verb, keyword, value)
        message = str(raised.value)
        assert keyword in message and f"from {low} to {high}" in message, message
        assert repr(value) in message, message


@pytest.mark.parametrize(("verb", "keyword", "low", "high"), INTEGER_ARGUMENTS)
def test_the_bounds_themselves_work_on_every_backend(
    open_memory: Callable[[], Memory], verb: str, keyword: str, low: int, high: int
) -> None:
    memory = open_memory()
    call(memory, verb, keyword, high)
    call(memory, verb, keyword, low)


def test_the_reported_calls_raise_typed_errors(tmp_path: Path) -> None:
    with Memory(path=tmp_path / "m.db", embedder=EDGE, warm=False) as memory:
        memory.add("I live in Porto", user_id="ana")
        with pytest.raises(InvalidInputError, match="offset must be an integer from 0 to"):
            memory.get_all(user_id="ana", offset=2**63)
        with pytest.raises(InvalidInputError, match="limit must be an integer from 1 to"):
            memory.facts(user_id="ana", limit=2**63)
        assert memory.get_all(user_id="ana", offset=MAX_INT).items == []


def test_a_metadata_filter_takes_only_integers_a_store_can_compare(
    open_memory: Callable[[], Memory],
) -> None:
    memory = open_memory()
    memory.add("tagged", user_id="ana", metadata={"n": MAX_INT})
    found = memory.get_all(user_id="ana", filters={"metadata": {"n": MAX_INT}})
    assert [e.content for e in found.items] == ["tagged"]
    for too_big in (MAX_INT + 1, MIN_INT - 1, 2**70):
        with pytest.raises(InvalidInputError, match="filters metadata 'n'"):
            memory.get_all(user_id="ana", filters={"metadata": {"n": too_big}})
        with pytest.raises(InvalidInputError, match="filters metadata 'n'"):
            memory.search("tagged", user_id="ana", filters={"metadata": {"n": too_big}})


def test_async_memory_checks_the_same_ranges(tmp_path: Path) -> None:
    async def scenario() -> None:
        async with AsyncMemory(path=tmp_path / "m.db", embedder=EDGE, warm=False) as memory:
            await memory.add("I live in Porto", user_id="ana")
            for verb, keyword, _, high in INTEGER_ARGUMENTS:
                with pytest.raises(InvalidInputError, match=re.escape(f"to {high}, got")):
                    await call(memory, verb, keyword, high + 1)

    asyncio.run(scenario())
    for readers in (0, 2**63, True):
        with pytest.raises(InvalidInputError, match="readers must be an integer"):
            AsyncMemory(path=tmp_path / "m.db", embedder=EDGE, warm=False, readers=readers)


@pytest.mark.parametrize("interval", [float("inf"), float("nan"), 2**1100, 1e300, 0, -1, True])
def test_a_consolidation_interval_must_be_a_wait_a_thread_can_do(
    tmp_path: Path, interval: object
) -> None:
    with Memory(path=tmp_path / "m.db", embedder=EDGE, warm=False) as memory:
        with pytest.raises(InvalidInputError, match="interval must be a number of seconds"):
            memory.start_consolidation(interval=interval)  # type: ignore[arg-type]
        assert memory.capabilities["consolidation"] == "manual"


@pytest.mark.parametrize(
    "policy",
    [
        {"base_stability_days": float("inf")},
        {"base_stability_days": 2**1100},
        {"growth": 10**400},
        {"growth": True},
        {"archive_below": float("nan")},
    ],
)
def test_a_decay_policy_takes_only_finite_numbers(policy: dict[str, object]) -> None:
    with pytest.raises(InvalidInputError, match="decay policy"):
        DecayPolicy(**policy)  # type: ignore[arg-type]


def test_an_episode_retrieved_more_often_than_a_float_can_count_stops_decaying() -> None:
    assert strength(age_days=365.0, retrievals=5000, salience=0.0) == 1.0


@pytest.mark.parametrize(
    ("argv", "option"),
    [
        (["list", "--user", "ana", "--offset", str(2**63)], "--offset"),
        (["list", "--user", "ana", "--limit", str(2**63)], "--limit"),
        (["search", "porto", "--user", "ana", "--limit", "0"], "--limit"),
        (["facts", "--user", "ana", "--limit", str(2**70)], "--limit"),
        (["context", "porto", "--user", "ana", "--budget", str(2**63)], "--budget"),
        (["consolidate", "--user", "ana", "--limit", str(2**63)], "--limit"),
    ],
)
def test_the_cli_refuses_an_integer_out_of_range_without_a_traceback(
    tmp_path: Path, argv: list[str], option: str
) -> None:
    store = tmp_path / "m.db"
    with Memory(path=store, embedder=EDGE, warm=False) as memory:
        memory.add("I live in Porto", user_id="ana")
    result = CliRunner().invoke(main, ["--path", str(store), "--embedder", "edge", *argv])
    assert result.exit_code == EXIT_BAD_INPUT, result.output
    assert isinstance(result.exception, SystemExit), repr(result.exception)
    assert "Traceback" not in result.output and option in result.output, result.output


def test_the_reported_command_exits_2_in_a_real_process(tmp_path: Path) -> None:
    store = tmp_path / "m.db"
    with Memory(path=store, embedder=EDGE, warm=False) as memory:
        memory.add("I live in Porto", user_id="ana")
    argv = ["--path", str(store), "list", "--user", "ana", "--offset", str(2**63)]
    env = {**os.environ, "HOME": str(tmp_path)}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(Path.cwd()), env.get("PYTHONPATH")]))
    result = subprocess.run(
        [sys.executable, "-m", "anamnesis.cli", *argv],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
        check=False,
    )
    assert result.returncode == EXIT_BAD_INPUT, result.stderr
    assert "Traceback" not in result.stderr and "--offset" in result.stderr, result.stderr
    assert result.stdout == ""
