"""The lifecycle benchmark: what usage counters cost a search, and what forgetting costs.

One store (one user's scope) grows through the requested sizes with LongMemEval S
turns, as ``bench scale`` grows it (the same text, the ``edge`` embedder so a 100k
store builds in minutes). At each size:

- **counter cost**: the same questions are searched with the usage counters on and
  with them replaced by a tally that does nothing, alternating per question (so both
  see the same caches); reported are both p50s and the p50 of the per-question
  difference, and the time to write the pending counts in one batch (which happens
  on a background thread, off the search path);
- **forget**: one episode by id (the typical erasure), a batch of ids, a session, and
  a scan for an exact text, each timed end to end (the transaction with the FTS5
  merge, then the WAL truncation); and one more episode's forget redone by hand,
  phase by phase, to show where the time goes.
"""

from __future__ import annotations

import json
import random
import shlex
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from functools import partial
from pathlib import Path
from typing import Any

import click

from ..memory import Memory
from ..store.sqlite.driver import sqlite3
from ..store.sqlite.erasure import secure_delete_state
from ..types import Scope
from ..usage import UsageLog
from . import datasets
from .options import data_option, results_option
from .presets import BENCH_PRESETS
from .runner import environment
from .scale import _chunks, source_texts

USER = "lifecycle"
#: The search configuration timed (the counters cost the same under any).
CONFIG = "hybrid"


class _NoTally:
    """A usage log that counts nothing: the baseline of the counter cost."""

    def retrieved(self, *args: Any) -> None:
        return None

    def read(self, *args: Any) -> None:
        return None

    def flush(self, **kwargs: Any) -> None:
        return None

    def close(self) -> None:
        return None


def _ms(fn: Callable[..., object], *args: Any) -> float:
    start = time.perf_counter()
    fn(*args)
    return (time.perf_counter() - start) * 1000


def _counter_cost(memory: Memory, questions: Sequence[str], rounds: int) -> dict[str, Any]:
    counted = memory._usage
    silent = _NoTally()
    silent_tally = UsageLog(memory.store)  # a private tally, never written:
    silent_tally._closed = True  # closed, so it starts no writer thread
    now = datetime.now(UTC)
    on: list[float] = []
    off: list[float] = []
    for question in questions:  # warm every cache first
        memory.search(question, user_id=USER)
    for round_ in range(rounds):
        for n, question in enumerate(questions):
            order = [(counted, on), (silent, off)]
            if (n + round_) % 2:
                order.reverse()
            for tally, sink in order:
                memory._usage = tally  # type: ignore[assignment]
                sink.append(_ms(partial(memory.search, question, user_id=USER)))
    memory._usage = counted
    ids = [f"ep_{n}" for n in range(10)]

    def thousand_tallies() -> None:
        for _ in range(1000):
            silent_tally.retrieved(USER, ids, now)

    tally_us = 1000 * _ms(thousand_tallies)
    pending = len(counted._pending)
    flush_ms = _ms(counted.flush)
    return {
        "searches": len(on),
        "p50_counters_on_ms": statistics.median(on),
        "p50_counters_off_ms": statistics.median(off),
        "p50_paired_difference_ms": statistics.median(a - b for a, b in zip(on, off, strict=True)),
        "tally_10_hits_us": tally_us / 1000,
        "batch_episodes": pending,
        "batch_write_ms": flush_ms,
    }


def _forget_costs(memory: Memory, db: Path, seed: int) -> dict[str, Any]:
    rng = random.Random(seed)
    store = memory.store
    ids = [e.id for e, _ in store.iter_episodes()]
    rng.shuffle(ids)
    singles = [_ms(partial(memory.forget, [i], user_id=USER)) for i in ids[:5]]
    batch, rest = ids[5:1005], ids[1005:]
    batch_ms = _ms(lambda: memory.forget(batch, user_id=USER))
    (seed_episode,) = store.get_episodes(rest[:1], Scope(USER))
    session = seed_episode.session_id or "none"
    session_report: list[Any] = []
    session_ms = _ms(lambda: session_report.append(memory.forget(user_id=USER, session_id=session)))
    (probe,) = store.get_episodes(rest[-1:], Scope(USER))
    needle = probe.content[:40]
    dry_ms = _ms(lambda: memory.forget(user_id=USER, containing=needle, dry_run=True))
    text_report: list[Any] = []
    text_ms = _ms(lambda: text_report.append(memory.forget(user_id=USER, containing=needle)))
    phases = _forget_phases(db, store.get_episodes(rest[1:2], Scope(USER))[0].id)
    return {
        "one_episode_ms": statistics.median(singles),
        "one_episode_all_ms": singles,
        "batch_episodes": len(batch),
        "batch_1000_ms": batch_ms,
        "batch_episodes_per_second": len(batch) / (batch_ms / 1000),
        "session_episodes": session_report[0].counts.episodes,
        "session_ms": session_ms,
        "containing_scan_dry_run_ms": dry_ms,
        "containing_episodes": text_report[0].counts.episodes,
        "containing_ms": text_ms,
        **phases,
    }


def _forget_phases(db: Path, episode_id: str) -> dict[str, float]:
    """One episode's forget redone by hand on a connection of its own, phase by phase:
    the deletes, the FTS5 erase of both indexes (writing the in-place deletes out where
    ``secure-delete`` is on, else merging each index whole), the commit, the WAL
    truncation."""
    conn = sqlite3.connect(db, isolation_level=None)
    try:
        conn.execute("PRAGMA secure_delete = ON")
        conn.execute("BEGIN IMMEDIATE")
        delete_ms = _ms(conn.execute, "DELETE FROM episodes WHERE id = ?", (episode_id,))
        command = "flush" if secure_delete_state(conn) else "optimize"
        merge_ms = sum(
            _ms(conn.execute, f"INSERT INTO {table} ({table}) VALUES ('{command}')")
            for table in ("episodes_fts", "facts_fts")
        )
        commit_ms = _ms(conn.execute, "COMMIT")
        checkpoint_ms = _ms(lambda: conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchall())
    finally:
        conn.close()
    return {
        "phase_delete_ms": delete_ms,
        "phase_fts_merge_ms": merge_ms,
        "phase_commit_ms": commit_ms,
        "phase_wal_truncate_ms": checkpoint_ms,
    }


def run_lifecycle(
    data: Path, sizes: Sequence[int], queries: int, rounds: int, work_dir: Path
) -> dict[str, Any]:
    """Grow one store through ``sizes``; measure counter cost and forget cost at each."""
    turns, questions = source_texts(data)
    asked = questions[:queries]
    result: dict[str, Any] = {
        "data_path": str(data),
        "data_sha256": datasets.file_sha256(data),
        "sizes": list(sizes),
        "queries": len(asked),
        "rounds": rounds,
        "config": CONFIG,
        "started_at": datetime.now(UTC).isoformat(timespec="seconds"),
        "environment": environment("edge"),
        "points": [],
    }
    work_dir.mkdir(parents=True, exist_ok=True)
    for size in sorted(sizes):
        with tempfile.TemporaryDirectory(dir=work_dir) as directory:
            db = Path(directory) / "memory.db"
            with Memory(
                path=db, embedder="edge", config=BENCH_PRESETS[CONFIG], warm=False
            ) as memory:
                start = time.perf_counter()
                for chunk in _chunks(turns, 0, size):
                    memory.add_many(chunk, user_id=USER)
                ingest_s = time.perf_counter() - start
                memory.store.warm_up()
                point = {
                    "episodes": size,
                    "ingest_seconds": ingest_s,
                    "file_mb": db.stat().st_size / 1e6,
                    "counters": _counter_cost(memory, asked, rounds),
                    "forget": _forget_costs(memory, db, seed=size),
                }
            result["points"].append(point)
    return result


def lifecycle_markdown(result: dict[str, Any], command: str) -> str:
    """The two tables of BENCHMARKS.md."""
    lines = [
        f"    {command}",
        "",
        "| episodes (one user) | search p50, counters off / on ms | paired difference p50 ms "
        "| tally of 10 hits µs | batch write (episodes) ms |",
        "|---|---|---|---|---|",
    ]
    for p in result["points"]:
        c = p["counters"]
        lines.append(
            f"| {p['episodes']:,} | {c['p50_counters_off_ms']:.2f} / {c['p50_counters_on_ms']:.2f} "
            f"| {c['p50_paired_difference_ms']:+.3f} | {c['tally_10_hits_us']:.1f} "
            f"| {c['batch_write_ms']:.1f} ({c['batch_episodes']:,}) |"
        )
    lines += [
        "",
        "| episodes | forget 1 episode ms | forget 1,000 ids ms (episodes/s) | forget a session "
        "| forget by exact text (dry run) | one forget by phase: delete / FTS5 erase / commit "
        "/ WAL truncate ms |",
        "|---|---|---|---|---|---|",
    ]
    for p in result["points"]:
        f = p["forget"]
        lines.append(
            f"| {p['episodes']:,} | {f['one_episode_ms']:.0f} "
            f"| {f['batch_1000_ms']:.0f} ({f['batch_episodes_per_second']:,.0f}) "
            f"| {f['session_ms']:.0f} ms ({f['session_episodes']} episodes) "
            f"| {f['containing_ms']:.0f} ms ({f['containing_scan_dry_run_ms']:.0f}) "
            f"| {f['phase_delete_ms']:.0f} / {f['phase_fts_merge_ms']:.0f} "
            f"/ {f['phase_commit_ms']:.0f} / {f['phase_wal_truncate_ms']:.0f} |"
        )
    return "\n".join(lines)


def write_lifecycle(result: dict[str, Any], out_dir: Path, command: str) -> None:
    """results.json and results.md in ``out_dir``."""
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / "results.json").write_text(json.dumps(result, indent=2, default=str))
    (out_dir / "results.md").write_text(lifecycle_markdown(result, command) + "\n")


@click.command(name="lifecycle")
@data_option("A LongMemEval file whose haystack turns supply the text.")
@click.option("--sizes", default="10000,100000", show_default=True, help="Store sizes.")
@click.option("--queries", type=click.IntRange(min=1), default=200, show_default=True)
@click.option("--rounds", type=click.IntRange(min=1), default=2, show_default=True)
@results_option("lifecycle")
def lifecycle_command(
    data: Path, sizes: str, queries: int, rounds: int, out_dir: Path | None
) -> None:
    """Lifecycle: the usage counters' cost on search p50, and the cost of forget."""
    from ..cli_errors import handled
    from .api import default_out_dir

    try:
        counts = tuple(int(part) for part in sizes.split(","))
    except ValueError as exc:
        raise click.BadParameter(f"--sizes takes comma-separated integers: {exc}") from exc
    target = out_dir or default_out_dir("lifecycle")
    invocation = "anamnesis " + shlex.join(sys.argv[1:])
    with handled():
        result = run_lifecycle(data, counts, queries, rounds, target / "stores")
    write_lifecycle(result, target, invocation)
    click.echo(lifecycle_markdown(result, invocation))
    click.echo(f"results: {target}")
