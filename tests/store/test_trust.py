"""A SQLite store that is damaged, foreign, missing, full or read-only says so with a
typed error, never writes into damage, and leaves other files untouched."""

from __future__ import annotations

import os
import random
import shutil
import stat
import subprocess
import warnings
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner

from anamnesis import (
    AnamnesisError,
    CorruptStoreError,
    Memory,
    ReadOnlyStoreError,
    StoreFullError,
)
from anamnesis.cli import main
from anamnesis.embed import get_embedder
from anamnesis.store.sqlite.driver import sqlite3

EDGE = get_embedder("edge")
TRIALS = int(os.environ.get("ANAMNESIS_CORRUPTION_TRIALS", "8"))
PAGE = 4096


@pytest.fixture(scope="module")
def healthy(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A store of 1,500 turns and their facts, built once."""
    path = tmp_path_factory.mktemp("healthy") / "m.db"
    with Memory(path=path, embedder=EDGE, warm=False) as memory:
        memory.add_many(
            [
                f"Turn {i}: I talked about topic {i % 37}, number {i * 7919 % 10007}"
                for i in range(1500)
            ],
            user_id="u",
            session_id="s",
        )
        memory.add("I work at Acme", user_id="u")
        memory.consolidate(user_id="u")
    return path


def _open(path: Path) -> Memory:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # "opened for reading only"
        return Memory(path=path, embedder=EDGE, warm=False)


def _damaged_copy(healthy: Path, directory: Path, rng: random.Random) -> Path:
    copy = directory / "m.db"
    shutil.copy(healthy, copy)
    page = rng.randrange(copy.stat().st_size // PAGE)
    with copy.open("r+b") as handle:
        handle.seek(page * PAGE)
        handle.write(rng.randbytes(PAGE))
    return copy


VERBS = {
    "search": lambda m: m.search("topic 5 number", user_id="u"),
    "context": lambda m: m.context("topic 3", user_id="u"),
    "list": lambda m: m.get_all(user_id="u", limit=1000),
    "facts": lambda m: m.facts(user_id="u"),
    "stats": lambda m: m.stats(),
}


def test_a_damaged_page_is_detected_and_the_store_takes_no_write(healthy, tmp_path) -> None:
    rng = random.Random(20261124)
    detected = 0
    for trial in range(TRIALS):
        directory = tmp_path / f"trial{trial}"
        directory.mkdir()
        path = _damaged_copy(healthy, directory, rng)
        try:
            memory = _open(path)
        except CorruptStoreError:
            detected += 1
            continue
        with memory:
            for verb in VERBS.values():
                try:
                    verb(memory)
                except AnamnesisError:
                    pass  # any other exception fails the test
            problems = memory.check()
            if problems:
                detected += 1
                assert memory.capabilities["store_health"].startswith("damaged")
                with pytest.raises(CorruptStoreError, match="anamnesis check"):
                    memory.add("a write into a damaged file", user_id="u")
    assert detected == TRIALS


def test_damage_is_remembered_until_a_check_passes(healthy, tmp_path) -> None:
    path = tmp_path / "m.db"
    shutil.copy(healthy, path)
    original = path.read_bytes()
    page = len(original) // PAGE // 2
    path.write_bytes(original[: page * PAGE] + bytes(PAGE) + original[(page + 1) * PAGE :])
    with _open(path) as memory:
        assert memory.check()
    with _open(path) as memory:  # a new process would see the same
        with pytest.raises(CorruptStoreError):
            memory.add("still refused", user_id="u")
    cli = ["--path", str(path), "--embedder", "edge", "check"]
    assert CliRunner().invoke(main, cli).exit_code == 5
    path.write_bytes(original)  # restored from a backup
    result = CliRunner().invoke(main, cli)
    assert result.exit_code == 0, result.output
    with _open(path) as memory:
        memory.add("accepted again", user_id="u")
        assert memory.capabilities["store_health"] == "ok"


def test_a_foreign_sqlite_file_is_left_byte_for_byte_untouched(tmp_path) -> None:
    path = tmp_path / "other.db"
    with sqlite3.connect(path) as conn:
        conn.execute("CREATE TABLE invoices (id INTEGER, total REAL)")
        conn.execute("INSERT INTO invoices VALUES (1, 9.5)")
    conn.close()
    before = (path.read_bytes(), path.stat().st_mtime_ns)
    with pytest.raises(CorruptStoreError, match="not an Anamnesis store"):
        Memory(path=path, embedder=EDGE, warm=False)
    assert (path.read_bytes(), path.stat().st_mtime_ns) == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["other.db"]


def test_store_files_and_directories_are_private(tmp_path) -> None:
    old = os.umask(0o022)
    try:
        path = tmp_path / "new" / "deeper" / "m.db"
        with Memory(path=path, embedder=EDGE, warm=False) as memory:
            memory.add("a private thought", user_id="u")
            files = [path, Path(f"{path}-wal"), Path(f"{path}-shm")]
            modes = {p.name: stat.S_IMODE(p.stat().st_mode) for p in files if p.exists()}
        assert modes and set(modes.values()) == {0o600}, modes
        for directory in (path.parent, path.parent.parent):
            assert stat.S_IMODE(directory.stat().st_mode) == 0o700
    finally:
        os.umask(old)


def test_reading_a_missing_store_creates_nothing(tmp_path) -> None:
    path = tmp_path / "nowhere" / "m.db"
    for command in (["stats"], ["search", "anything"], ["list"], ["export"], ["check"]):
        result = CliRunner().invoke(main, ["--path", str(path), *command])
        assert result.exit_code == 3, (command, result.output)
        assert "no store" in result.output
    assert not path.parent.exists()


def test_an_unknown_embedder_is_bad_input(tmp_path) -> None:
    result = CliRunner().invoke(
        main, ["--path", str(tmp_path / "m.db"), "--embedder", "nonesuch", "add", "x"]
    )
    assert result.exit_code == 2
    assert "unknown embedder" in result.output


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    """A 2 MB file system of its own (tmpfs; needs root)."""
    mount = tmp_path / "disk"
    mount.mkdir()
    made = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=2m", "tmpfs", str(mount)],
        capture_output=True,
        check=False,
    )
    if made.returncode != 0:
        reason = f"cannot mount a tmpfs here: {made.stderr.decode().strip()}"
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail(f"CI=true but {reason}", pytrace=False)
        pytest.skip(reason)
    yield mount
    subprocess.run(["umount", str(mount)], check=False)


def test_a_full_disk_is_a_typed_error_and_the_store_stays_readable(small_disk: Path) -> None:
    path = small_disk / "m.db"
    acknowledged = 0
    with Memory(path=path, embedder=EDGE, warm=False) as memory:
        with pytest.raises(StoreFullError, match="Free disk space"):
            for i in range(10_000):
                memory.add(f"turn {i}: " + "words that fill the disk " * 40, user_id="u")
                acknowledged += 1
        assert memory.stats()["episodes"] == acknowledged
        assert memory.search("turn 1", user_id="u")
    with Memory(path=path, embedder=EDGE, warm=False) as memory:
        assert memory.stats()["episodes"] == acknowledged
        assert memory.check() == []


def test_a_read_only_file_system_reads_and_refuses_writes(small_disk: Path) -> None:
    path = small_disk / "m.db"
    with Memory(path=path, embedder=EDGE, warm=False) as memory:
        memory.add_many([f"turn {i} about bees" for i in range(20)], user_id="u")
    subprocess.run(["mount", "-o", "remount,ro", str(small_disk)], check=True)
    with Memory(path=path, embedder=EDGE, warm=False) as memory:
        assert memory.stats()["episodes"] == 20
        assert memory.search("bees", user_id="u")
        with pytest.raises(ReadOnlyStoreError):
            memory.add("one more", user_id="u")
