"""Fault injection: kill writers at random moments, then prove nothing acknowledged was lost.

A *workload* runs in a child process and writes through the public ``Memory`` API, to
an SQLite file or (``url``) a PostgreSQL database. After each call returns (the write
is acknowledged) it appends a line to a journal and fsyncs it. The parent SIGKILLs the
child at a random moment, reads the store's counts (``stats``, which must match its
rows) before anything resumes the kill's backlog, then *verifies* the store: SQLite's
and FTS5's integrity checks, episodes, full-text rows and vectors in agreement
(``Memory.check``), every journaled episode present with its exact text, every
journaled delete gone, every fact's and every summary's and profile's provenance
present, and a consolidation able to finish. ``run_kills`` repeats that;
``run_concurrent`` runs writer and reader processes side by side and counts the
errors they saw.

``anamnesis bench reliability`` runs both (the soak); tests/test_reliability.py runs
a bounded form of it in CI.
"""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from ..memory.writes import WRITE_BATCH

WORKLOADS = ("add", "add_many", "import", "consolidate", "delete", "forget", "create", "index")
#: Episodes in one group the ``forget`` workload writes and then forgets whole.
FORGET_GROUP = 6
#: The embedder the workloads use: fast to load, so a kill loop spends its time writing.
EMBEDDER = "edge"
USER = "reliability"
#: Seconds ``verify`` lets the indexer catch up on the backlog a kill left.
INDEX_WAIT = 120.0


# -- the child ------------------------------------------------------------------------------
class Journal:
    """Append-only, fsynced record of acknowledged operations (one JSON line each)."""

    def __init__(self, path: Path) -> None:
        self._file = path.open("a", encoding="utf-8")

    def ack(self, **record: Any) -> None:
        self.ack_all([record])

    def ack_all(self, records: list[dict[str, Any]]) -> None:
        """Append several records with one sync."""
        self._file.write("".join(json.dumps(record) + "\n" for record in records))
        self._file.flush()
        os.fsync(self._file.fileno())


def read_journal(path: Path) -> list[dict[str, Any]]:
    """The complete lines of a journal (a line cut by the kill is ignored)."""
    if not path.exists():
        return []
    records = []
    for line in path.read_text(encoding="utf-8").splitlines():
        try:
            records.append(json.loads(line))
        except json.JSONDecodeError:
            continue
    return records


def _many_text(tag: str, index: int) -> str:
    return f"batch {tag} turn {index}: we talked about boats"


def _export_lines(tag: str, count: int) -> list[str]:
    header = {"type": "anamnesis-export", "version": 1, "embedder": "none", "dim": 0}
    lines = [json.dumps(header)]
    for n in range(count):
        lines.append(
            json.dumps(
                {
                    "type": "episode",
                    "id": f"ep_{tag}_{n}",
                    "user_id": USER,
                    "content": f"imported {tag} {n}: a line about the harbour",
                    "event_time": "2024-01-01T00:00:00+00:00",
                    "recorded_at": "2024-01-01T00:00:00+00:00",
                }
            )
        )
    return lines


def is_url(store: str | Path) -> bool:
    """Whether ``store`` names a database server rather than an SQLite file."""
    return str(store).startswith(("postgresql://", "postgres://"))


def open_memory(store: str | Path, **options: Any) -> Any:
    """A ``Memory`` on ``store``: an SQLite file's path, or a database URL."""
    from anamnesis import Memory

    if is_url(store):
        return Memory(url=str(store), embedder=EMBEDDER, warm=False, **options)
    return Memory(path=store, embedder=EMBEDDER, warm=False, **options)


def work(store: str | Path, journal_path: Path, workload: str, seed: int) -> None:
    """Run ``workload`` until killed (the child's body)."""
    from anamnesis import Memory

    rng = random.Random(seed)
    journal = Journal(journal_path)
    if workload == "create":
        if is_url(store):
            raise SystemExit("the create workload creates SQLite files; it takes no URL")
        print("ready", flush=True)
        while True:
            path = Path(store).parent / f"created-{seed}-{rng.randrange(10**9)}.db"
            journal.ack(op="creating", path=str(path))
            with Memory(path=path, embedder=EMBEDDER, warm=False) as memory:
                (episode,) = memory.add("the first words of a new store", user_id=USER)
            journal.ack(op="add", path=str(path), id=episode.id, content=episode.content)
    indexing = "background" if workload == "index" else "sync"
    with open_memory(store, indexing=indexing) as memory:
        print("ready", flush=True)
        n = 0
        while True:
            n += 1
            tag = f"{seed}-{n}"
            if workload == "add":
                (episode,) = memory.add(f"note {tag}: the tide was high", user_id=USER)
                journal.ack(op="add", id=episode.id, content=episode.content)
            elif workload == "add_many":
                # every other call spans three transactions, so kills land between them
                count = 20 if n % 2 else 2 * WRITE_BATCH + 44
                texts = [_many_text(tag, i) for i in range(count)]
                journal.ack(op="adding", tag=tag, count=count)
                episodes = memory.add_many(texts, user_id=USER, session_id=f"s{seed}")
                journal.ack_all([{"op": "add", "id": e.id, "content": e.content} for e in episodes])
            elif workload == "import":
                lines = _export_lines(tag, 20)
                memory.import_jsonl(lines)
                for line in lines[1:]:
                    record = json.loads(line)
                    journal.ack(op="add", id=record["id"], content=record["content"])
            elif workload == "consolidate":
                (episode,) = memory.add(f"I work at Company{tag} now", user_id=USER)
                journal.ack(op="add", id=episode.id, content=episode.content)
                memory.consolidate(user_id=USER)
                journal.ack(op="consolidated")
            elif workload == "delete":
                (episode,) = memory.add(f"a secret {tag} to forget", user_id=USER)
                journal.ack(op="add", id=episode.id, content=episode.content)
                journal.ack(op="deleting", id=episode.id)  # from here it may be gone
                memory.delete(episode.id, user_id=USER)
                journal.ack(op="delete", id=episode.id)
            elif workload == "forget":
                _forget_group(memory, journal, tag, rng)
            elif workload == "index":
                _index_round(memory, journal, tag, rng)
            else:
                raise SystemExit(f"unknown workload {workload!r}")


def _forget_group(memory: Any, journal: Journal, tag: str, rng: random.Random) -> None:
    """Write a session of episodes (one updated, a fact drawn from them), keep some
    background episodes, and forget the session: it must go whole or not at all."""
    if rng.random() < 0.3:
        (kept,) = memory.add(f"background {tag}: the harbour was quiet", user_id=USER)
        journal.ack(op="add", id=kept.id, content=kept.content)
    texts = [
        f"I live in Secretville{tag.replace('-', 'x')} now, turn {i}" for i in range(FORGET_GROUP)
    ]
    episodes = memory.add_many(texts, user_id=USER, session_id=f"forget-{tag}")
    memory.update(episodes[0].id, content=f"updated {tag}", user_id=USER)
    memory.consolidate(user_id=USER)
    ids = [e.id for e in episodes]
    journal.ack(op="forgetting", ids=ids, session=f"forget-{tag}")
    for episode_id in ids:
        journal.ack(op="deleting", id=episode_id)
    memory.forget(user_id=USER, session_id=f"forget-{tag}")
    for episode_id in ids:
        journal.ack(op="delete", id=episode_id)


def _index_round(memory: Any, journal: Journal, tag: str, rng: random.Random) -> None:
    """Add a burst with background indexing (the indexer falls behind), then change
    some of it while it may be in the indexer's hands: update one, delete another;
    now and then wait for the backlog. Kills land in the indexer's batches."""
    count = rng.choice((1, 20, 300))
    texts = [f"pending {tag} turn {i}: the lamp was lit" for i in range(count)]
    episodes = memory.add_many(texts, user_id=USER)
    journal.ack_all([{"op": "add", "id": e.id, "content": e.content} for e in episodes])
    if rng.random() < 0.3:
        journal.ack(op="deleting", id=episodes[0].id)  # its text changes: not checked
        memory.update(episodes[0].id, content=f"updated {tag}: the lamp went out", user_id=USER)
    if count > 1 and rng.random() < 0.3:
        journal.ack(op="deleting", id=episodes[-1].id)
        memory.delete(episodes[-1].id, user_id=USER)
        journal.ack(op="delete", id=episodes[-1].id)
    if rng.random() < 0.1:
        memory.wait_indexed()


# -- the parent -----------------------------------------------------------------------------
@dataclass
class KillReport:
    """What a kill loop did and found."""

    workload: str
    kills: int = 0
    acknowledged: int = 0
    deleted: int = 0
    #: Kills that left episodes waiting for their vector (the indexer was behind).
    left_pending: int = 0
    problems: list[str] = field(default_factory=list)
    seconds: float = 0.0


def _child(store: str | Path, journal: Path, workload: str, seed: int) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [
            sys.executable,
            "-m",
            "anamnesis.bench.reliability",
            "work",
            str(store),
            str(journal),
            workload,
            str(seed),
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def _after_kill(store: str | Path) -> tuple[int, list[str]]:
    """How many episodes a kill left waiting for their vector, and where the store's
    counts (``stats``) differ from its rows; read without a ``Memory``, whose open
    would start indexing them."""
    from anamnesis.embed import get_embedder
    from anamnesis.store import open_url
    from anamnesis.store.sqlite import SQLiteStore
    from anamnesis.types import Scope

    if not is_url(store) and not Path(store).exists():
        return 0, []
    dim = get_embedder(EMBEDDER).dim
    opened = open_url(str(store), dim=dim) if is_url(store) else SQLiteStore(store, dim=dim)
    try:
        rows = [(e.user_id, v is not None) for e, v in opened.iter_episodes()]
        problems = []
        for scope in (None, Scope(USER)):
            mine = [has for user, has in rows if scope is None or user == scope.user_id]
            stats = opened.stats(scope)
            if (stats["episodes"], stats["vectors"]) != (len(mine), sum(mine)):
                problems.append(
                    f"stats({scope}) counts {stats['episodes']} episodes and "
                    f"{stats['vectors']} vectors; the store holds {len(mine)} and {sum(mine)}"
                )
        return opened.pending_count(None), problems
    finally:
        opened.close()


def verify(
    store: str | Path, journal: Path, *, vectors: bool = False
) -> tuple[list[str], int, int]:
    """(problems, acknowledged episodes, acknowledged deletes) for one store (an SQLite
    file's path or a database URL). Episodes left waiting for their vector are indexed
    first (as any open does), and must all be; ``vectors``: every vector must also be
    its episode's current text's, and find its episode in a dense search."""
    import warnings

    from anamnesis import AnamnesisError
    from anamnesis.types import Scope

    records = read_journal(journal)
    problems: list[str] = []
    by_path: dict[str, list[dict[str, Any]]] = {}
    for record in records:
        by_path.setdefault(record.get("path", str(store)), []).append(record)
    adds = deletes = 0
    for path, items in by_path.items():
        if not is_url(path) and not Path(path).exists():
            if any(r["op"] == "add" for r in items):
                problems.append(f"{path}: acknowledged, but the file is gone")
            continue
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("error", RuntimeWarning)
                memory = open_memory(path)
        except AnamnesisError as exc:
            if any(r["op"] == "add" for r in items):
                problems.append(f"{path}: does not open: {type(exc).__name__}: {exc}")
            continue
        except RuntimeWarning as exc:
            problems.append(f"{path}: opens damaged: {exc}")
            continue
        with memory:
            problems.extend(f"{path}: {p}" for p in memory.check())
            if not memory.wait_indexed(timeout=INDEX_WAIT):
                problems.append(f"{path}: the backlog was not indexed in {INDEX_WAIT} s")
            elif memory.capabilities["vector_backlog"]:
                problems.append(f"{path}: episodes still wait for vectors after the wait")
            else:
                problems.extend(f"{path}: after indexing: {p}" for p in memory.check())
            if vectors:
                problems.extend(f"{path}: {p}" for p in _stale_vectors(memory))
                problems.extend(f"{path}: {p}" for p in _unfound_by_vector(memory))
            stored = _stored_texts(memory)
            gone = {r["id"] for r in items if r["op"] == "delete"}
            going = {r["id"] for r in items if r["op"] == "deleting"}
            for record in items:
                if record["op"] != "add" or record["id"] in going:
                    continue
                adds += 1
                if record["id"] not in stored:
                    problems.append(f"{path}: acknowledged episode {record['id']} is missing")
                elif stored[record["id"]] != record["content"]:
                    problems.append(f"{path}: episode {record['id']} has other text")
            for episode_id in gone:
                deletes += 1
                if episode_id in stored:
                    problems.append(f"{path}: deleted episode {episode_id} is back")
            problems.extend(f"{path}: {p}" for p in _partial_forgets(memory, items, stored))
            problems.extend(f"{path}: {p}" for p in _partial_batches(items, stored))
            for fact in memory.facts(user_id=USER, include_superseded=True, limit=1000):
                found = memory.store.get_episodes(list(fact.provenance), Scope(USER))
                if len(found) != len(fact.provenance):
                    problems.append(f"{path}: fact {fact.id} cites an episode that is gone")
            for item, _ in memory.store.find_derived(Scope(USER)):
                found = memory.store.get_episodes(list(item.provenance), Scope(USER))
                if len(found) != len(item.provenance):
                    problems.append(f"{path}: {item.kind} {item.id} cites an episode that is gone")
            memory.consolidate(user_id=USER)
    return problems, adds, deletes


def _stale_vectors(memory: Any) -> list[str]:
    """Episodes whose stored vector is not their current text's (an index behind the
    store), or that have none."""
    import numpy as np

    from anamnesis.ingest.normalise import embedding_text
    from anamnesis.types import Scope

    episodes = [e for e, _ in memory.store.iter_episodes() if e.user_id == USER]
    problems = []
    for start in range(0, len(episodes), 1000):
        chunk = episodes[start : start + 1000]
        held = memory.store.episode_vectors([e.id for e in chunk], Scope(USER))
        expected = memory.embedder.embed_documents(
            [embedding_text(e.content, e.speaker) for e in chunk]
        )
        for episode, vector in zip(chunk, expected, strict=True):
            if episode.id not in held:
                problems.append(f"episode {episode.id} has no vector")
            elif not np.allclose(held[episode.id], vector, atol=1e-5):
                problems.append(f"episode {episode.id}'s vector is not its text's")
    return problems


#: Episodes ``_unfound_by_vector`` looks up per verification, the newest and a sample.
FOUND_SAMPLE = 60
#: How far below the episodes that tie with it (the workload's texts differ in numbers
#: a static embedder may not see) a dense search may place an episode.
FOUND_WITHIN = 5


def _unfound_by_vector(memory: Any) -> list[str]:
    """Episodes a dense search with their own text's vector does not find (the dense
    index, or the vectors behind it, lost them): the newest and a random sample."""
    import numpy as np

    from anamnesis.ingest.normalise import embedding_text
    from anamnesis.store.base import Filters
    from anamnesis.types import Scope

    episodes = [e for e, _ in memory.store.iter_episodes() if e.user_id == USER]
    newest = episodes[-FOUND_SAMPLE // 2 :]
    rest = episodes[: -FOUND_SAMPLE // 2]
    sample = newest + random.Random(len(episodes)).sample(rest, min(len(rest), FOUND_SAMPLE))
    if not sample:
        return []
    held = memory.store.episode_vectors([e.id for e in episodes], Scope(USER))
    stored = np.stack(list(held.values())) if held else np.zeros((0, memory.embedder.dim))
    texts = [embedding_text(e.content, e.speaker) for e in sample]
    vectors = memory.embedder.embed_documents(texts)
    problems = []
    for episode, vector in zip(sample, vectors, strict=True):
        ties = int(np.count_nonzero(stored @ vector >= 1.0 - 1e-5))
        hits = memory.store.dense_search(vector, Scope(USER), Filters(), ties + FOUND_WITHIN)
        if episode.id not in {hit.episode_id for hit in hits}:
            problems.append(f"episode {episode.id} is not found by its own vector")
    return problems


def _partial_batches(records: list[dict[str, Any]], stored: dict[str, str]) -> list[str]:
    """``add_many`` calls a kill cut short that left anything but whole batches, in
    order: what is stored of a call must be its first k × WRITE_BATCH messages, or all."""
    texts = set(stored.values())
    problems = []
    for record in records:
        if record["op"] != "adding":
            continue
        present = [_many_text(record["tag"], i) in texts for i in range(record["count"])]
        kept = sum(present)
        if present != [True] * kept + [False] * (record["count"] - kept) or (
            kept % WRITE_BATCH and kept != record["count"]
        ):
            problems.append(
                f"add_many {record['tag']}: {kept} of {record['count']} messages stored,"
                " not whole batches in order"
            )
    return problems


def _partial_forgets(
    memory: Any, records: list[dict[str, Any]], stored: dict[str, str]
) -> list[str]:
    """Groups a ``forget`` left half done: some of their episodes stored and others
    gone, or a session row without its episodes (or the reverse)."""
    sessions = {s.id for s in memory.store.iter_sessions()}
    problems = []
    for record in records:
        if record["op"] != "forgetting":
            continue
        present = [episode_id in stored for episode_id in record["ids"]]
        if any(present) != all(present):
            problems.append(f"forget of {record['session']} is partial: {present}")
        elif any(present) != (record["session"] in sessions):
            problems.append(f"session {record['session']} outlived its episodes or went early")
    return problems


def _stored_texts(memory: Any) -> dict[str, str]:
    """Every episode of the harness's user, id to text, read page by page."""
    texts: dict[str, str] = {}
    offset: int | None = 0
    while offset is not None:
        page = memory.get_all(user_id=USER, limit=1000, offset=offset)
        texts.update((episode.id, episode.content) for episode in page.items)
        offset = page.next_offset
    return texts


def run_kills(
    directory: Path,
    workload: str,
    kills: int,
    *,
    seed: int = 1,
    verify_every: int = 1,
    pause: tuple[float, float] = (0.05, 1.2),
    progress: Callable[[KillReport], None] | None = None,
    url: str | None = None,
) -> KillReport:
    """Kill ``workload`` ``kills`` times at random moments in one store, verifying it
    every ``verify_every`` kills; a kill comes a random ``pause`` (seconds) after the
    workload is ready. The store is an SQLite file in ``directory`` (which holds the
    journal), or the database at ``url``, which should be empty at the start."""
    directory.mkdir(parents=True, exist_ok=True)
    journal = directory / "journal.jsonl"
    store: str | Path = url if url is not None else directory / "store.db"
    rng = random.Random(seed)
    report = KillReport(workload)
    started = time.perf_counter()
    for kill in range(kills):
        child = _child(store, journal, workload, seed * 100_000 + kill)
        ready = child.stdout.readline() if child.stdout is not None else ""
        if not ready.startswith("ready"):
            child.wait(timeout=60)
            stderr = child.stderr.read() if child.stderr is not None else ""
            report.problems.append(f"kill {kill}: the workload did not start: {stderr[-500:]}")
            continue
        time.sleep(rng.uniform(*pause))
        child.send_signal(signal.SIGKILL)
        child.wait(timeout=60)
        report.kills += 1
        pending, problems = _after_kill(store)
        report.left_pending += pending > 0
        report.problems.extend(f"after kill {kill}: {p}" for p in problems)
        if (kill + 1) % verify_every == 0 or kill == kills - 1:
            problems, report.acknowledged, report.deleted = verify(
                store, journal, vectors=workload == "index"
            )
            report.problems.extend(f"after kill {kill}: {p}" for p in problems)
        if progress is not None:
            progress(report)
    report.seconds = time.perf_counter() - started
    return report


@dataclass
class ConcurrencyReport:
    """What writers and readers running side by side saw."""

    writers: int
    readers: int
    seconds: float
    writes: int = 0
    searches: int = 0
    errors: list[str] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)


def _reader(store: Path, until: float) -> None:
    from anamnesis import Memory

    searches = 0
    with Memory(path=store, embedder=EMBEDDER, warm=False) as memory:
        while time.time() < until:
            memory.search("what about the tide?", user_id=USER)
            searches += 1
    print(json.dumps({"searches": searches}), flush=True)


def _writer(store: Path, journal: Path, seed: int, until: float) -> None:
    from anamnesis import Memory

    log = Journal(journal)
    with Memory(path=store, embedder=EMBEDDER, warm=False) as memory:
        n = 0
        while time.time() < until:
            n += 1
            (episode,) = memory.add(f"writer {seed} note {n}: the tide turned", user_id=USER)
            log.ack(op="add", id=episode.id, content=episode.content)


def run_concurrent(
    directory: Path, writers: int, readers: int, seconds: float
) -> ConcurrencyReport:
    """``writers`` + ``readers`` processes on one store for ``seconds``; then verify."""
    from anamnesis import Memory

    directory.mkdir(parents=True, exist_ok=True)
    store, journal = directory / "store.db", directory / "journal.jsonl"
    with Memory(path=store, embedder=EMBEDDER, warm=False) as memory:
        memory.add("the first note: the tide was low", user_id=USER)
    until = time.time() + seconds + 3.0  # the children's start-up is not counted
    command = [sys.executable, "-m", "anamnesis.bench.reliability"]
    children = [
        subprocess.Popen(
            [*command, "write", str(store), str(journal), str(i), str(until)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for i in range(writers)
    ] + [
        subprocess.Popen(
            [*command, "read", str(store), str(until)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for _ in range(readers)
    ]
    report = ConcurrencyReport(writers, readers, seconds)
    for child in children:
        out, err = child.communicate(timeout=seconds + 120)
        if child.returncode != 0:
            report.errors.append(
                err.strip().splitlines()[-1] if err.strip() else f"exit {child.returncode}"
            )
        for line in out.splitlines():
            if line.startswith("{"):
                report.searches += json.loads(line)["searches"]
    problems, report.writes, _ = verify(store, journal)
    report.problems = problems
    return report


def summary(reports: list[KillReport], concurrency: ConcurrencyReport | None) -> dict[str, Any]:
    """A JSON-able summary of a soak."""
    return {
        "kills": sum(r.kills for r in reports),
        "acknowledged_episodes_checked": sum(r.acknowledged for r in reports),
        "acknowledged_deletes_checked": sum(r.deleted for r in reports),
        "problems": sum(len(r.problems) for r in reports),
        "workloads": [asdict(r) for r in reports],
        "concurrency": asdict(concurrency) if concurrency is not None else None,
    }


def _main(argv: list[str]) -> None:
    command, *rest = argv
    if command == "work":
        store, journal, workload, seed = rest
        work(store if is_url(store) else Path(store), Path(journal), workload, int(seed))
    elif command == "write":
        store, journal, seed, until = rest
        _writer(Path(store), Path(journal), int(seed), float(until))
    elif command == "read":
        store, until = rest
        _reader(Path(store), float(until))
    else:
        raise SystemExit(f"unknown command {command!r}")


def iter_workloads(names: str) -> Iterator[str]:
    """The workloads a comma-separated list names (``all``: every one)."""
    for name in WORKLOADS if names == "all" else names.split(","):
        if name not in WORKLOADS:
            raise ValueError(f"unknown workload {name!r}; choose from {', '.join(WORKLOADS)}")
        yield name


if __name__ == "__main__":
    _main(sys.argv[1:])
