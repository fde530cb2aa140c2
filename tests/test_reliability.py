"""Crashes lose nothing acknowledged; concurrent writers and readers see no error.

A bounded run of the fault-injection harness (``anamnesis.bench.reliability``): each
workload is SIGKILLed at random moments, and after every kill the store passes its
integrity checks and holds every acknowledged write (and no acknowledged delete).
``anamnesis bench reliability`` runs the same for thousands of kills.
"""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path

import pytest
from store_fixtures import postgres_schema_url_fixture  # noqa: F401  (a fixture by name)

from anamnesis import Memory
from anamnesis.bench.reliability import EMBEDDER, USER, WORKLOADS, run_concurrent, run_kills

KILLS = int(os.environ.get("ANAMNESIS_RELIABILITY_KILLS", "7"))


#: Every workload on SQLite; on PostgreSQL the background indexer's, whose backlog
#: lives in the server's tables (``create`` makes SQLite files only).
CASES = [(workload, "sqlite") for workload in WORKLOADS] + [("index", "postgres")]


@pytest.mark.parametrize(("workload", "backend"), CASES)
def test_killed_workloads_lose_no_acknowledged_write(
    tmp_path: Path, workload: str, backend: str, request: pytest.FixtureRequest
) -> None:
    url = request.getfixturevalue("postgres_schema_url") if backend == "postgres" else None
    report = run_kills(tmp_path, workload, KILLS, seed=WORKLOADS.index(workload) + 1, url=url)
    assert report.problems == []
    assert report.kills == KILLS
    if workload != "create":
        assert report.acknowledged + report.deleted > 0  # the kills landed mid-work
    if workload == "index":
        assert report.left_pending > 0  # some landed while vectors were still to write


def test_concurrent_writer_and_reader_processes_see_no_error(tmp_path: Path) -> None:
    report = run_concurrent(tmp_path, writers=3, readers=3, seconds=8)
    assert report.errors == []
    assert report.problems == []
    assert report.writes > 0 and report.searches > 0


def test_threads_sharing_one_memory_see_no_error(tmp_path: Path) -> None:
    errors: list[BaseException] = []
    written: list[str] = []
    until = time.monotonic() + 4
    with Memory(path=tmp_path / "m.db", embedder=EMBEDDER, warm=False) as memory:

        def write(n: int) -> None:
            try:
                i = 0
                while time.monotonic() < until:
                    i += 1
                    (episode,) = memory.add(f"thread {n} note {i}", user_id=USER)
                    written.append(episode.id)
            except BaseException as exc:  # noqa: BLE001  (collected, asserted below)
                errors.append(exc)

        def read() -> None:
            try:
                while time.monotonic() < until:
                    memory.search("note", user_id=USER)
                    memory.context("which notes?", user_id=USER)
            except BaseException as exc:  # noqa: BLE001
                errors.append(exc)

        threads = [threading.Thread(target=write, args=(n,)) for n in range(2)]
        threads += [threading.Thread(target=read) for _ in range(2)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        assert errors == []
        assert memory.check() == []
        assert memory.stats(user_id=USER)["episodes"] == len(written) > 0


def test_a_call_cut_short_must_leave_whole_batches_in_order() -> None:
    """The check behind the add_many kill loop: what a killed call left stored is its
    first whole batches, or everything."""
    from anamnesis.bench.reliability import _many_text, _partial_batches
    from anamnesis.memory.writes import WRITE_BATCH

    count = 2 * WRITE_BATCH + 44
    records = [{"op": "adding", "tag": "t", "count": count}]

    def stored(indexes: range | list[int]) -> dict[str, str]:
        return {f"ep{i}": _many_text("t", i) for i in indexes}

    assert _partial_batches(records, stored(range(0))) == []
    assert _partial_batches(records, stored(range(WRITE_BATCH))) == []
    assert _partial_batches(records, stored(range(count))) == []
    assert _partial_batches(records, stored(range(WRITE_BATCH - 1)))  # half a batch
    assert _partial_batches(records, stored(range(1, WRITE_BATCH + 1)))  # not the first


def test_the_index_check_flags_a_vector_that_is_not_its_texts(tmp_path: Path) -> None:
    """The check behind the index kill loop: an index behind the store (a vector of
    another text) does not pass unnoticed."""
    import numpy as np

    from anamnesis.bench.reliability import _stale_vectors

    with Memory(path=tmp_path / "m.db", embedder=EMBEDDER, warm=False) as memory:
        first, second = memory.add(["the lamp was lit", "the lamp went out"], user_id=USER)
        assert _stale_vectors(memory) == []
        other = memory.embedder.embed_documents(["a different text entirely"])[0]
        memory.store.replace_vectors({second.id: np.asarray(other)})
        assert _stale_vectors(memory) == [f"episode {second.id}'s vector is not its text's"]
