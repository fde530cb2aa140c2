"""Erasure at scale: the time of one ``forget`` and one ``delete`` in a large SQLite
store, and the bytes of the erased text left in the store's files afterwards.

``build`` fills DIR/memory.db with N episodes of one user straight through the store's
insert path (texts of words drawn from a Zipf law over a synthetic vocabulary, each
distinct; random unit vectors at the ``edge`` embedder's dimension, since erasure
does not depend on what the vectors mean), with SECRETS episodes spread over the
rowids that each hold a word of their own. ``erase`` opens the store with a
``Memory`` as an application would, searches once (so the in-memory indexes are
loaded), then forgets the planted episodes one at a time (half with ``forget``, half
with ``delete``), timing each, and counts the bytes of each erased word in every
file of the store (UTF-8 and UTF-16, the word and its lower-case tail):

    python docs/experiments/scripts/scale_erasure.py build 100000 STORE_DIR
    cp -r STORE_DIR STORE_DIR-b
    python docs/experiments/scripts/scale_erasure.py erase STORE_DIR

``sample DIR K`` forgets K episodes drawn at random (no search), and reports the
spread of their times and how many had to rewrite a full-text index (a page separator
left to clear; with FTS5 secure-delete only):

    python docs/experiments/scripts/scale_erasure.py sample STORE_DIR 200

``erase DIR --no-search`` skips the searches (at a million episodes, the first search
and the one after each forget reload every vector, which takes longer than erasing).

Build with the code that is to be compared against (a store erased by a SQLite with
FTS5 ``secure-delete`` cannot be read by an older one), copy, and erase each copy
with one version of the code.
"""

from __future__ import annotations

import json
import mmap
import statistics
import sys
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import numpy as np

from anamnesis import Memory
from anamnesis.types import Episode, Session

USER = "scale"
SECRETS = 8
BATCH = 20_000
LETTERS = np.array(list("abcdefghijklmnopqrstuvwxyz"))


def vocabulary(rng: np.random.Generator, size: int) -> list[str]:
    """``size`` distinct pseudo-words of 3 to 10 letters."""
    words: set[str] = set()
    while len(words) < size:
        length = int(rng.integers(3, 11))
        words.add("".join(rng.choice(LETTERS, length)))
    return sorted(words)


def secret_word(index: int) -> str:
    """The word only the ``index``-th planted episode holds: an X (no other word has a
    capital) and 14 letters drawn for it, so no two share a tail."""
    rng = np.random.default_rng(1000 + index)
    return "X" + "".join(rng.choice(LETTERS, 14))


def needles(word: str) -> tuple[str, ...]:
    """FTS5 keeps terms lower-cased and prefix-compressed: its tail is searched too."""
    return (word, word.lower(), word.lower()[-8:])


def bytes_left(directory: Path, word: str) -> dict[str, int]:
    """Per file of the store: occurrences of ``word`` (see ``needles``)."""
    patterns = [
        needle.encode(encoding)
        for needle in needles(word)
        for encoding in ("utf-8", "utf-16-le", "utf-16-be")
    ]
    found = {}
    for file in sorted(directory.iterdir()):
        if not file.is_file() or file.stat().st_size == 0 or file.name == "planted.json":
            continue
        with file.open("rb") as handle, mmap.mmap(handle.fileno(), 0, access=mmap.ACCESS_READ) as m:
            count = 0
            for pattern in patterns:
                at = m.find(pattern)
                while at != -1:
                    count += 1
                    at = m.find(pattern, at + 1)
            found[file.name] = count
    return found


def build(size: int, directory: Path) -> None:
    rng = np.random.default_rng(7)
    words = np.array(vocabulary(rng, 50_000))
    # Zipf ranks over the vocabulary: a few words are in most texts, most in few.
    weights = 1.0 / np.arange(1, len(words) + 1) ** 1.07
    weights /= weights.sum()
    planted = {int(p): i for i, p in enumerate(np.linspace(size * 0.05, size * 0.95, SECRETS))}
    directory.mkdir(parents=True, exist_ok=True)
    memory = Memory(path=directory / "memory.db", embedder="edge", warm=False)
    store = memory.store
    dim = memory.embedder.dim
    start = time.perf_counter()
    base = datetime(2025, 1, 1, tzinfo=UTC)
    with store.bulk_load():  # type: ignore[attr-defined]
        for first in range(0, size, BATCH):
            count = min(BATCH, size - first)
            lengths = rng.integers(8, 25, count)
            drawn = rng.choice(len(words), int(lengths.sum()), p=weights)
            episodes, sessions, at = [], [], 0
            for offset, length in enumerate(lengths):
                n = first + offset
                text = " ".join(words[drawn[at : at + length]]) + f" n{n}"
                at += length
                if n in planted:
                    text = f"{text} {secret_word(planted[n])} again"
                session = f"s{n // 20}"
                if n % 20 == 0:
                    sessions.append(
                        Session(id=session, user_id=USER, agent_id=None, started_at=base)
                    )
                moment = base + timedelta(seconds=n)
                episodes.append(
                    Episode(
                        id=f"e{n:08d}",
                        user_id=USER,
                        agent_id=None,
                        session_id=session,
                        role="user",
                        speaker=None,
                        content=text,
                        modality="text",
                        event_time=moment,
                        recorded_at=moment,
                        metadata={},
                        content_hash=f"h{n}",
                        turn_index=n % 20,
                    )
                )
            vectors = rng.standard_normal((count, dim), dtype=np.float32)
            vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
            store.insert_episodes(episodes, vectors, sessions)
            print(f"{first + count} episodes, {time.perf_counter() - start:.0f} s", flush=True)
    memory.close()
    (directory / "planted.json").write_text(
        json.dumps({f"e{n:08d}": secret_word(i) for n, i in planted.items()})
    )
    print(f"built {size} in {time.perf_counter() - start:.0f} s")


def erase(directory: Path, search: bool = True) -> None:
    planted = json.loads((directory / "planted.json").read_text())
    store_dir = directory
    opened = time.perf_counter()
    memory = Memory(path=directory / "memory.db", embedder="edge", warm=False)
    print(f"open {time.perf_counter() - opened:.2f} s; {memory.capabilities.get('erasure')}")
    if search:
        started = time.perf_counter()
        memory.search("what did I say about the river", user_id=USER)
        print(f"first search {time.perf_counter() - started:.2f} s")
    timings: dict[str, list[float]] = {"forget": [], "delete": []}
    left = {}
    for index, (episode_id, word) in enumerate(sorted(planted.items())):
        verb = "forget" if index % 2 == 0 else "delete"
        started = time.perf_counter()
        if verb == "forget":
            report = memory.forget([episode_id], user_id=USER)
            assert report.episode_ids == (episode_id,), report
        else:
            memory.delete(episode_id, user_id=USER)
        seconds = time.perf_counter() - started
        timings[verb].append(seconds)
        started = time.perf_counter()
        if search:
            memory.search("what did I say about the river", user_id=USER)
        after = time.perf_counter() - started
        left[word] = sum(bytes_left(store_dir, word).values())
        print(
            f"{verb} {episode_id}: {seconds * 1000:.0f} ms; next search {after * 1000:.0f} ms; "
            f"bytes of its word left (open): {left[word]}",
            flush=True,
        )
    memory.close()
    closed = {word: sum(bytes_left(store_dir, word).values()) for word in planted.values()}
    for verb, values in timings.items():
        print(
            f"{verb}: median {statistics.median(values) * 1000:.0f} ms, "
            f"max {max(values) * 1000:.0f} ms over {len(values)}"
        )
    print(f"bytes left while open: {sum(left.values())}; after close: {sum(closed.values())}")
    sizes = {f.name: f.stat().st_size for f in sorted(store_dir.iterdir()) if f.is_file()}
    print(f"files: {sizes}")


def sample(directory: Path, count: int) -> None:
    from anamnesis.store.sqlite import erasure

    rewrites: list[str] = []
    rewrite = erasure.rewrite

    def counted(conn: Any, index: str, column: str) -> None:
        rewrites.append(index)
        rewrite(conn, index, column)

    erasure.rewrite = counted  # type: ignore[assignment]
    memory = Memory(path=directory / "memory.db", embedder="edge", warm=False)
    size = memory.stats(user_id=USER)["episodes"]
    rng = np.random.default_rng(11)
    times, slow = [], []
    for n in rng.choice(size, count, replace=False):
        before = len(rewrites)
        started = time.perf_counter()
        report = memory.forget([f"e{n:08d}"], user_id=USER)
        seconds = time.perf_counter() - started
        if not report.episode_ids:
            continue  # erased before (a planted episode)
        times.append(seconds)
        if len(rewrites) > before:
            slow.append(seconds)
    memory.close()
    ms = np.array(times) * 1000
    p50, p90 = np.percentile(ms, [50, 90])
    print(
        f"{len(times)} forgets: p50 {p50:.0f} ms, p90 {p90:.0f} ms, "
        f"max {ms.max():.0f} ms; {len(slow)} rewrote an index "
        f"({', '.join(f'{t * 1000:.0f} ms' for t in slow)})"
    )


if __name__ == "__main__":
    if sys.argv[1] == "build":
        build(int(sys.argv[2]), Path(sys.argv[3]))
    elif sys.argv[1] == "sample":
        sample(Path(sys.argv[2]), int(sys.argv[3]))
    elif sys.argv[1] == "erase":
        erase(Path(sys.argv[2]), search="--no-search" not in sys.argv)
    else:
        raise SystemExit(__doc__)
