"""Forgetting is complete: after forget, delete or delete_all, no byte of the text is
left in any file of the store, with FTS5's secure-delete (erasing in place) and on an
SQLite without it (rewriting the index); scope holds; a dry run changes nothing; a
forget cut by SIGKILL leaves all or nothing.

Real SQLite files in ``tmp_path``, the static edge embedder, the rule extractor.
"""

from __future__ import annotations

import io
import json
import random
import subprocess
import sys
import threading
import time
import warnings
from pathlib import Path

import pytest
from click.testing import CliRunner
from erasure_checks import spelled_separators

from anamnesis import InvalidInputError, Memory, ScopeError, StoreError
from anamnesis.bench.reliability import read_journal, run_kills
from anamnesis.cli import main
from anamnesis.embed import get_embedder
from anamnesis.store.sqlite import driver
from anamnesis.store.sqlite.driver import sqlite3

EDGE = get_embedder("edge")
SECRET = "Xqzvorpluntek"
#: FTS5 stores terms lower-cased and prefix-compressed: its tail is searched too.
NEEDLES = (SECRET, SECRET.lower(), SECRET.lower()[-8:])
KILLS = 50


def occurrences(directory: Path) -> dict[str, int]:
    """Per file under ``directory``: occurrences of the secret in UTF-8 and UTF-16."""
    found = {}
    for file in sorted(directory.rglob("*")):
        if not file.is_file():
            continue
        data = file.read_bytes()
        found[file.name] = sum(
            data.count(needle.encode(encoding))
            for needle in NEEDLES
            for encoding in ("utf-8", "utf-16-le", "utf-16-be")
        )
    return found


def old_sqlite(monkeypatch: pytest.MonkeyPatch) -> None:
    """The store behaves as on an SQLite older than 3.44, whose FTS5 has no
    secure-delete (the standard library's, where sqlean-py is not installed)."""
    monkeypatch.setattr(driver, "SECURE_DELETE", False)
    monkeypatch.setattr(driver, "_warned", False)


def secure_delete_off(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every new SQLite connection starts with secure_delete off, as upstream builds do
    (this machine's build turns it on by default)."""
    connect = sqlite3.connect

    def connect_like_upstream(*args, **kwargs):  # type: ignore[no-untyped-def]
        conn = connect(*args, **kwargs)
        conn.execute("PRAGMA secure_delete = OFF")
        return conn

    monkeypatch.setattr(sqlite3, "connect", connect_like_upstream)


def fill(memory: Memory) -> list[str]:
    """The secret in several episodes of ana (content, speaker, metadata, a fact drawn
    from them), with text of ana's and of bob's that must stay; the secret's ids."""
    secret = memory.add(
        [
            {"role": "user", "content": f"I live in {SECRET} now."},
            {"role": "user", "speaker": SECRET, "content": "my neighbours are kind"},
            {"role": "user", "content": "a note", "metadata": {"token": SECRET}},
            {"role": "user", "content": f"I live in {SECRET}, near the river."},
        ],
        user_id="ana",
        session_id="leak",
    )
    memory.add("I work at Acme as a tester.", user_id="ana", session_id="work")
    memory.add("I love hiking in the mountains.", user_id="bob")
    memory.consolidate(user_id="ana")
    memory.search(f"where is {SECRET}?", user_id="ana")  # the in-memory indexes hold it
    assert any(SECRET in f.text for f in memory.facts(user_id="ana"))
    return [e.id for e in secret]


def erase(memory: Memory, how: str, ids: list[str]) -> None:
    if how == "forget-containing":
        report = memory.forget(user_id="ana", containing=SECRET)
        assert sorted(report.episode_ids) == sorted(ids)
    elif how == "forget-session":
        memory.forget(user_id="ana", session_id="leak")
    elif how == "forget-ids":
        memory.forget(ids, user_id="ana")
    elif how == "delete":
        for episode_id in ids:
            memory.delete(episode_id, user_id="ana")
    elif how == "delete_all":
        memory.delete_all(user_id="ana")
    elif how == "archive-then-forget":
        assert sorted(memory.archive(user_id="ana", session_id="leak")) == sorted(ids)
        assert memory.forget(user_id="ana", containing=SECRET).counts.archived == len(ids)
    else:
        raise AssertionError(how)


@pytest.mark.parametrize("upstream", ["build-default", "secure-delete-off", "old-sqlite"], ids=str)
@pytest.mark.parametrize(
    "how",
    [
        "forget-containing",
        "forget-session",
        "forget-ids",
        "delete",
        "delete_all",
        "archive-then-forget",
    ],
)
def test_no_byte_of_the_secret_survives(tmp_path, monkeypatch, how, upstream) -> None:
    if upstream == "secure-delete-off":
        secure_delete_off(monkeypatch)
    if upstream == "old-sqlite":
        old_sqlite(monkeypatch)
    directory = tmp_path / "store"
    with warnings.catch_warnings(record=True) as warned:
        warnings.simplefilter("always")
        memory = Memory(path=directory / "m.db", embedder=EDGE, warm=False)
    in_place = upstream != "old-sqlite"
    assert memory.capabilities["erasure"].startswith(
        "fts5 secure-delete" if in_place else "fts5 rewrite per forget"
    )
    assert any("secure-delete" in str(w.message) for w in warned) is not in_place
    ids = fill(memory)
    assert sum(occurrences(directory).values()) > 0
    erase(memory, how, ids)
    assert sum(occurrences(directory).values()) == 0, occurrences(directory)  # still open
    assert memory.search(SECRET, user_id="ana") == [] or all(
        SECRET not in h.episode.content for h in memory.search(SECRET, user_id="ana")
    )
    memory.close()
    assert sum(occurrences(directory).values()) == 0, occurrences(directory)
    with Memory(path=directory / "m.db", embedder=EDGE, warm=False) as reopened:
        kept = reopened.get_all(user_id="bob").items
        assert [e.content for e in kept] == ["I love hiking in the mountains."]
        if how != "delete_all":
            assert [e.content for e in reopened.get_all(user_id="ana").items] == [
                "I work at Acme as a tester."
            ]
        assert reopened.check() == []


def test_update_keeps_the_old_text_until_it_is_forgotten(tmp_path) -> None:
    directory = tmp_path / "store"
    with Memory(path=directory / "m.db", embedder=EDGE, warm=False) as memory:
        (episode,) = memory.add(f"my token is {SECRET}", user_id="ana")
        memory.update(episode.id, content="my token is [redacted]", user_id="ana")
        assert SECRET in memory.history(episode.id, user_id="ana")[0].content
        report = memory.forget(user_id="ana", containing=SECRET)
        assert report.episode_ids == (episode.id,)
        assert (report.counts.episodes, report.counts.versions) == (1, 1)
        assert memory.get_all(user_id="ana").total == 0
    assert sum(occurrences(directory).values()) == 0, occurrences(directory)


def test_forget_never_crosses_users(tmp_path) -> None:
    with Memory(path=tmp_path / "m.db", embedder=EDGE, warm=False) as memory:
        (bobs,) = memory.add(f"bob also knows {SECRET}", user_id="bob", session_id="s")
        memory.add(f"ana knows {SECRET}", user_id="ana", session_id="s")
        assert memory.forget([bobs.id], user_id="ana").episode_ids == ()
        assert memory.forget(user_id="ana", session_id="s").counts.episodes == 1
        assert len(memory.forget(user_id="ana", containing=SECRET).episode_ids) == 0
        assert [e.id for e in memory.get_all(user_id="bob").items] == [bobs.id]
        assert [s.id for s in memory.store.iter_sessions()] == ["s"]


def test_dry_run_reports_the_same_counts_and_changes_nothing(tmp_path) -> None:
    with Memory(path=tmp_path / "m.db", embedder=EDGE, warm=False) as memory:
        ids = fill(memory)
        before = io.StringIO()
        memory.export_jsonl(before)
        preview = memory.forget(user_id="ana", containing=SECRET, dry_run=True)
        after = io.StringIO()
        memory.export_jsonl(after)
        assert before.getvalue() == after.getvalue()
        assert preview.dry_run and sorted(preview.episode_ids) == sorted(ids)
        assert memory.search(f"I live in {SECRET}", user_id="ana")[0].episode.id in ids
        done = memory.forget(user_id="ana", containing=SECRET)
        assert not done.dry_run
        assert (done.episode_ids, done.counts) == (preview.episode_ids, preview.counts)


def test_forget_counts_every_table_and_keeps_facts_with_other_sources(tmp_path) -> None:
    with Memory(path=tmp_path / "m.db", embedder=EDGE, warm=False) as memory:
        first, second = memory.add(
            ["I live in Porto now.", "I live in Porto, by the sea."], user_id="ana", session_id="a"
        )
        memory.update(first.id, content="I live in Porto now, yes.", user_id="ana")
        memory.consolidate(user_id="ana")
        (fact,) = memory.facts(user_id="ana")
        assert set(fact.provenance) == {first.id, second.id}
        counts = memory.forget([first.id], user_id="ana").counts
        assert (counts.episodes, counts.versions, counts.vectors) == (1, 1, 1)
        assert (counts.sources, counts.facts, counts.consolidated, counts.sessions) == (1, 0, 1, 0)
        (kept,) = memory.facts(user_id="ana")
        assert kept.provenance == (second.id,)
        counts = memory.forget([second.id], user_id="ana").counts
        assert (counts.facts, counts.sessions) == (1, 1)
        assert memory.facts(user_id="ana", include_superseded=True) == []


def test_forget_by_event_time_range(tmp_path) -> None:
    with Memory(path=tmp_path / "m.db", embedder=EDGE, warm=False) as memory:
        memory.add_many(
            [{"content": f"day {d}", "event_time": f"2024-03-{d:02d}"} for d in (1, 2, 3, 4)],
            user_id="ana",
        )
        report = memory.forget(
            user_id="ana", event_after="2024-03-02", event_before="2024-03-04", dry_run=True
        )
        assert len(report.episode_ids) == 2
        memory.forget(user_id="ana", event_after="2024-03-02", event_before="2024-03-04")
        assert [e.content for e in memory.get_all(user_id="ana").items] == ["day 1", "day 4"]


def test_forget_refuses_unclear_requests(tmp_path) -> None:
    with Memory(path=tmp_path / "m.db", embedder=EDGE, warm=False) as memory:
        memory.add("keep me", user_id="ana")
        with pytest.raises(ScopeError):
            memory.forget()  # the whole scope, but of whom?
        with pytest.raises(InvalidInputError):
            memory.forget(user_id="ana", event_after="2024-02-01", event_before="2024-01-01")
        with pytest.raises(InvalidInputError):
            memory.forget(user_id="ana", containing="  ")
        with pytest.raises(InvalidInputError):
            memory.forget(user_id="ana", containing="x", dry_run="yes")  # type: ignore[arg-type]
        with pytest.raises(InvalidInputError):
            memory.forget(42, user_id="ana")  # type: ignore[arg-type]
        assert memory.get_all(user_id="ana").total == 1


def test_cli_forget_dry_run_then_forget(tmp_path) -> None:
    path = tmp_path / "m.db"
    with Memory(path=path, embedder=EDGE, warm=False) as memory:
        (episode,) = memory.add(f"the code is {SECRET}", user_id="ana")
        memory.add("keep me", user_id="ana")
    base = ["--path", str(path), "--embedder", "edge", "forget", "--user", "ana"]
    runner = CliRunner()
    dry = runner.invoke(main, [*base, "--containing", SECRET, "--dry-run"])
    assert dry.exit_code == 0, dry.output
    assert json.loads(dry.output)["episode_ids"] == [episode.id]
    done = runner.invoke(main, [*base, "--containing", SECRET, "--yes"])
    assert done.exit_code == 0, done.output
    assert json.loads(done.output)["counts"]["episodes"] == 1
    with Memory(path=path, embedder=EDGE, warm=False) as memory:
        assert [e.content for e in memory.get_all(user_id="ana").items] == ["keep me"]


def test_a_forget_killed_at_random_moments_is_all_or_nothing(tmp_path) -> None:
    report = run_kills(tmp_path, "forget", KILLS, seed=7, verify_every=5, pause=(0.0, 0.4))
    assert report.problems == []
    assert report.kills == KILLS
    records = read_journal(tmp_path / "journal.jsonl")
    done = {r["id"] for r in records if r["op"] == "delete"}
    cut = [r for r in records if r["op"] == "forgetting" and not set(r["ids"]) <= done]
    assert report.deleted > 0 and cut  # some kills landed inside a forget


def segments(path: Path) -> set[int]:
    """The ids of the episodes index's FTS5 segments (each leaf page has a row in
    ``episodes_fts_idx``)."""
    with sqlite3.connect(path) as conn:
        return {row[0] for row in conn.execute("SELECT DISTINCT segid FROM episodes_fts_idx")}


def test_forget_erases_in_place_without_rewriting_the_index(tmp_path) -> None:
    """With secure-delete, a forget leaves the index's other segments as they were:
    its cost does not grow with the store (merging rewrote every segment)."""
    directory = tmp_path / "store"
    path = directory / "m.db"
    with Memory(path=path, embedder=EDGE, warm=False) as memory:
        for n in range(6):  # each add commits a segment of its own
            memory.add(f"note {n}: the harbour was quiet", user_id="ana")
        (secret,) = memory.add(f"I live in {SECRET} now", user_id="ana")
        before = segments(path)
        assert len(before) > 1
        memory.forget([secret.id], user_id="ana")
        assert segments(path) == before
        assert sum(occurrences(directory).values()) == 0, occurrences(directory)
        assert len(memory.search("harbour", user_id="ana")) == 6
    with sqlite3.connect(path) as conn:
        conn.execute("INSERT INTO episodes_fts (episodes_fts) VALUES ('integrity-check')")


def test_no_page_separator_spells_an_erased_word(tmp_path) -> None:
    """FTS5's secure-delete keeps each leaf page's separator (a prefix of the page's
    first word); when that word is erased, the forget must not leave its prefix."""
    path = tmp_path / "m.db"
    rng = random.Random(5)

    def word() -> str:
        return "".join(rng.choice("bcdfghjklmnpqrstvwz") for _ in range(12))

    kept = [f"{word()} {word()} {word()}" for _ in range(150)]
    erased = [word() for _ in range(30)]
    with Memory(path=path, embedder=EDGE, warm=False) as memory:
        with sqlite3.connect(path) as conn:  # small pages: many words start a page
            conn.execute("INSERT INTO episodes_fts (episodes_fts, rank) VALUES ('pgsz', 64)")
        memory.add_many(kept, user_id="ana", session_id="kept")
        gone = memory.add_many(erased, user_id="ana", session_id="gone")
        for episode in gone:
            memory.forget([episode.id], user_id="ana")
    assert spelled_separators(path, erased) == []


def test_a_store_erased_in_place_is_refused_by_an_older_sqlite(tmp_path, monkeypatch) -> None:
    """FTS5 indexes written with secure-delete cannot be read by an SQLite older than
    3.44: opening one there says what to install instead of failing at a search."""
    path = tmp_path / "m.db"
    with Memory(path=path, embedder=EDGE, warm=False) as memory:
        (episode,) = memory.add("a note", user_id="ana")
        memory.forget([episode.id], user_id="ana")
    old_sqlite(monkeypatch)
    with pytest.raises(StoreError, match="install sqlean-py"):
        Memory(path=path, embedder=EDGE, warm=False)


def test_a_forget_does_not_wait_for_the_lexical_index_build(tmp_path, monkeypatch) -> None:
    """Truncating the log waits for every open read; the store's own background build
    of the in-memory lexical index holds one for as long as it reads the postings. A
    forget stops it (the next search builds again) instead of waiting, even when it
    comes between two of the build's statements."""
    from anamnesis.store.sqlite import lexical

    reading = threading.Event()

    def slow_postings(conn, vocab):  # type: ignore[no-untyped-def]
        reading.set()
        # The forget lands before the statement starts (an interrupt alone misses it),
        # then a read that takes far longer than the test allows, unless stopped.
        time.sleep(1.0)
        conn.execute(
            "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c "
            "WHERE x < 400000000) SELECT count(*) FROM c"
        ).fetchone()
        return {}

    directory = tmp_path / "store"
    memory = Memory(path=directory / "m.db", embedder=EDGE, warm=False)
    (secret,) = memory.add(f"I live in {SECRET} now", user_id="ana")
    memory.add("I love hiking in the mountains.", user_id="ana")
    monkeypatch.setattr(lexical, "read_postings", slow_postings)
    build = threading.Thread(target=memory.store._lexical.warm_up)  # type: ignore[attr-defined]
    build.start()
    assert reading.wait(10)
    started = time.perf_counter()
    memory.forget([secret.id], user_id="ana")
    assert time.perf_counter() - started < 5
    assert sum(occurrences(directory).values()) == 0, occurrences(directory)
    build.join(10)
    assert not build.is_alive()
    monkeypatch.undo()
    assert [h.episode.content for h in memory.search("hiking", user_id="ana")] == [
        "I love hiking in the mountains."
    ]
    # The interrupted build is no failure.
    assert memory.store._lexical.failure is None  # type: ignore[attr-defined]
    assert "failed" not in memory.store.lexical_backend
    memory.close()


def test_on_the_standard_library_sqlite_a_forget_still_leaves_no_byte(tmp_path) -> None:
    """Where sqlean.py is not installed the store runs on Python's own sqlite3 (3.40 on
    this machine, no FTS5 secure-delete): it says so, once, and every forget merges the
    full-text indexes instead. Run in a fresh interpreter that cannot import sqlean."""
    directory = tmp_path / "store"
    script = f"""
import json, sys, warnings
sys.modules["sqlean"] = None  # as where the package is missing
from anamnesis import Memory
from anamnesis.store.sqlite import driver
with warnings.catch_warnings(record=True) as warned:
    warnings.simplefilter("always")
    memory = Memory(path={str(directory / "m.db")!r}, embedder="edge", warm=False)
    Memory(path={str(tmp_path / "other.db")!r}, embedder="edge", warm=False).close()
(secret,) = memory.add("I live in {SECRET} now", user_id="ana")
memory.add("I love hiking in the mountains.", user_id="ana")
memory.forget([secret.id], user_id="ana")
print(json.dumps({{
    "library": driver.LIBRARY,
    "in_place": driver.SECURE_DELETE,
    "erasure": memory.capabilities["erasure"],
    "warnings": [str(w.message) for w in warned if "secure-delete" in str(w.message)],
    "kept": [e.content for e in memory.get_all(user_id="ana").items],
}}))
memory.close()
"""
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=120, check=True
    )
    report = json.loads(done.stdout.strip().splitlines()[-1])
    assert report["library"] == "sqlite3"
    if not report["in_place"]:  # a Python whose own SQLite is 3.44 or later erases in place
        assert report["erasure"].startswith("fts5 rewrite per forget")
        assert len(report["warnings"]) == 1  # once per process, not per store
    assert report["kept"] == ["I love hiking in the mountains."]
    assert sum(occurrences(directory).values()) == 0, occurrences(directory)


@pytest.mark.parametrize("verb", ["forget", "archive"])
def test_the_loaded_vectors_lose_the_removed_rows_in_place(tmp_path, verb) -> None:
    """After this process's forget (or archive), its next search takes the rows out of
    the in-memory vectors rather than reading every row from the store again; what is
    left ranks exactly as a fresh process that reads the store ranks it."""
    path = tmp_path / "m.db"
    texts = [f"note {i}: {word} by the river" for i, word in enumerate(WORDS)]
    with Memory(path=path, embedder=EDGE, warm=False) as memory:
        added = memory.add_many(texts, user_id="ana")
        memory.search("river", user_id="ana")  # the vectors are loaded
        store = memory.store
        gone = [added[2].id, added[5].id]
        getattr(memory, verb)(gone, user_id="ana")
        store._dense_file.load = None  # type: ignore[attr-defined]  (reading every row fails)
        kept = [(h.episode.id, h.score) for h in memory.search("stones", user_id="ana", limit=8)]
        assert store._dense.size == len(texts) - 2  # type: ignore[attr-defined]
        assert not set(gone) & {i for i, _ in kept}
    with Memory(path=path, embedder=EDGE, warm=False) as fresh:
        assert [
            (h.episode.id, h.score) for h in fresh.search("stones", user_id="ana", limit=8)
        ] == kept


WORDS = ["stones", "pebbles", "boats", "herons", "willows", "stones again", "reeds", "mud", "fish"]
