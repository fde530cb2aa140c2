"""Where the time of an exact-MiniLM ingest goes (study 2026-11-26-ingest).

    python docs/experiments/scripts/ingest_probe.py e2e LOCOMO [N] [sqlite|postgres] [EMBEDDER]
    python docs/experiments/scripts/ingest_probe.py ops LOCOMO [N]
    python docs/experiments/scripts/ingest_probe.py batch LOCOMO [N] [SIZES]
    python docs/experiments/scripts/ingest_probe.py indexing LOCOMO [N] [sync|background]
    python docs/experiments/scripts/ingest_probe.py adds LOCOMO [N] [sync|background]
    python docs/experiments/scripts/ingest_probe.py calls LOCOMO [N]

``e2e``: one ``Memory.add_many`` of the first N LoCoMo turns (sessions kept apart per
conversation); prints turns per wall second and per CPU second, the calling thread's
CPU seconds, and the share of wall time spent inside the batch writes. ``postgres``
needs ANAMNESIS_TEST_POSTGRES_URL (a scratch schema is made and dropped). EMBEDDER is
``minilm`` (the default), ``edge``, or ``fixed`` (one constant vector for every text,
so the run measures the write alone). ``ops``: onnxruntime's own profile of the fused
fp32 graph, time per operator type, one thread. ``batch``: texts per CPU second of the
embedder alone (one worker, one thread) at each texts-per-run size, with the padding
each size adds. ``indexing``: one ``add_many`` of N turns into a fresh SQLite store
with MiniLM and ``Memory(indexing=...)``: the rate until ``add_many`` returns (wall,
per CPU second of the process and of the calling thread), then until
``wait_indexed`` returns (every vector written: the sustained rate). ``adds``: N
single ``Memory.add`` calls one after another, each call's latency (p50, p95), then
the wait for the backlog. ``calls``: the embedder alone on N turns, in calls of 512
(``add_many``'s), sorted by length across 512 then 64 per call (the indexer's), and
unsorted calls of 64, two rounds alternating. Times are CPU
seconds where the machine is shared: compare ratios within one run.
"""

from __future__ import annotations

import collections
import json
import os
import sys
import tempfile
import time
import uuid
from pathlib import Path

import numpy as np

import anamnesis.embed.minilm as minilm
from anamnesis import Memory
from anamnesis.bench import datasets
from anamnesis.embed import get_embedder
from anamnesis.ingest.normalise import embedding_text


def turns(path: str, count: int) -> list[dict]:
    data = datasets.load("locomo", path)
    out = [
        dict(m, session_id=f"c{i}-{m['session_id']}")
        for i, case in enumerate(data.cases)
        for m in case.messages
    ]
    return out[:count]


class FixedEmbedder:
    """The same unit vector for every text: no embedding cost at all."""

    name, dim = "fixed-unit-vector", 384

    def embed_documents(self, texts: list[str]) -> np.ndarray:
        vectors = np.zeros((len(texts), self.dim), dtype=np.float32)
        vectors[:, 0] = 1.0
        return vectors

    def embed_query(self, text: str) -> np.ndarray:
        return self.embed_documents([text])[0]


def e2e(path: str, count: int, backend: str, name: str = "minilm") -> None:
    messages = turns(path, count)
    embedder = FixedEmbedder() if name == "fixed" else get_embedder(name)
    embedder.embed_documents(["warm up"])
    schema = None
    if backend == "postgres":
        import psycopg

        url = os.environ["ANAMNESIS_TEST_POSTGRES_URL"]
        schema = f"ingest_{uuid.uuid4().hex[:8]}"
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute(f'CREATE SCHEMA "{schema}"')
        options = f"options=-csearch_path%3D{schema},public"
        memory = Memory(url=f"{url}{'&' if '?' in url else '?'}{options}", embedder=embedder)
    else:
        memory = Memory(path=Path(tempfile.mkdtemp()) / "m.db", embedder=embedder)
    inside = [0.0]
    write = memory._write_batch

    def timed(*args, **kwargs):
        start = time.perf_counter()
        try:
            return write(*args, **kwargs)
        finally:
            inside[0] += time.perf_counter() - start

    memory._write_batch = timed
    load = os.getloadavg()[0]
    wall, cpu, main = time.perf_counter(), time.process_time(), time.thread_time()
    memory.add_many(messages, user_id="u")
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    main = time.thread_time() - main
    memory.close()
    if schema is not None:
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute(f'DROP SCHEMA "{schema}" CASCADE')
    print(
        json.dumps(
            {
                "backend": backend,
                "embedder": embedder.name,
                "turns": len(messages),
                "per_wall_s": round(len(messages) / wall, 1),
                "per_cpu_s": round(len(messages) / cpu, 1),
                "cpu_s": round(cpu, 2),
                "calling_thread_cpu_s": round(main, 2),
                "write_wall_share": round(inside[0] / wall, 3),
                "load": round((load + os.getloadavg()[0]) / 2, 1),
            }
        )
    )


def _fresh_memory(path: str, count: int, mode: str) -> tuple[list, Memory]:
    """``count`` turns of ``path`` and a new Memory (MiniLM, warmed) indexing by ``mode``."""
    messages = turns(path, count)
    embedder = get_embedder("minilm")
    embedder.embed_documents(["warm up"])
    memory = Memory(
        path=Path(tempfile.mkdtemp()) / "m.db", embedder=embedder, indexing=mode, warm=False
    )
    return messages, memory


def indexing(path: str, count: int, mode: str) -> None:
    """``mode``: ``sync``, ``background``, or ``background:B`` (B episodes per indexer
    transaction instead of ``INDEX_BATCH``)."""
    import anamnesis.indexer

    mode, _, size = mode.partition(":")
    if size:
        anamnesis.indexer.INDEX_BATCH = int(size)
    messages, memory = _fresh_memory(path, count, mode)
    load = os.getloadavg()[0]
    wall, cpu, main = time.perf_counter(), time.process_time(), time.thread_time()
    memory.add_many(messages, user_id="u")
    added_wall, added_cpu = time.perf_counter() - wall, time.process_time() - cpu
    added_main = time.thread_time() - main
    backlog = memory.capabilities["vector_backlog"]
    assert memory.wait_indexed()
    indexed_wall, indexed_cpu = time.perf_counter() - wall, time.process_time() - cpu
    memory.close()
    n = len(messages)
    print(
        json.dumps(
            {
                "indexing": mode,
                "index_batch": anamnesis.indexer.INDEX_BATCH,
                "turns": n,
                "added_per_wall_s": round(n / added_wall, 1),
                "added_per_cpu_s": round(n / added_cpu, 1),
                "added_per_calling_thread_cpu_s": round(n / added_main, 1),
                "backlog_at_return": backlog,
                "indexed_per_wall_s": round(n / indexed_wall, 1),
                "indexed_per_cpu_s": round(n / indexed_cpu, 1),
                "load": round((load + os.getloadavg()[0]) / 2, 1),
            }
        )
    )


def adds(path: str, count: int, mode: str) -> None:
    messages, memory = _fresh_memory(path, count, mode)
    load = os.getloadavg()[0]
    latencies = []
    start = time.perf_counter()
    for message in messages:
        before = time.perf_counter()
        memory.add(message, user_id="u")
        latencies.append(time.perf_counter() - before)
    added = time.perf_counter() - start
    assert memory.wait_indexed()
    indexed = time.perf_counter() - start
    memory.close()
    latencies.sort()
    print(
        json.dumps(
            {
                "indexing": mode,
                "adds": len(messages),
                "p50_ms": round(1000 * latencies[len(latencies) // 2], 2),
                "p95_ms": round(1000 * latencies[int(len(latencies) * 0.95)], 2),
                "added_per_wall_s": round(len(messages) / added, 1),
                "indexed_per_wall_s": round(len(messages) / indexed, 1),
                "load": round((load + os.getloadavg()[0]) / 2, 1),
            }
        )
    )


def calls(path: str, count: int) -> None:
    texts = [embedding_text(m["content"], m.get("speaker")) for m in turns(path, count)]
    embedder = get_embedder("minilm")
    embedder.embed_documents(["warm up"])

    def whole() -> None:
        for start in range(0, len(texts), 512):
            embedder.embed_documents(texts[start : start + 512])

    def sorted_chunks() -> None:
        for start in range(0, len(texts), 512):
            part = sorted(texts[start : start + 512], key=len)
            for at in range(0, len(part), 64):
                embedder.embed_documents(part[at : at + 64])

    def chunks() -> None:
        for start in range(0, len(texts), 64):
            embedder.embed_documents(texts[start : start + 64])

    for _ in range(2):
        for name, run in (("512", whole), ("512 sorted, 64", sorted_chunks), ("64", chunks)):
            wall, cpu = time.perf_counter(), time.process_time()
            run()
            wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
            print(
                f"{name}: {len(texts) / wall:.1f} texts/s wall, {len(texts) / cpu:.1f} per CPU s,"
                f" load {os.getloadavg()[0]:.1f}"
            )


def ops(path: str, count: int) -> None:
    import onnxruntime as ort

    texts = [embedding_text(m["content"], m.get("speaker")) for m in turns(path, count)]
    embedder = minilm.MiniLMEmbedder(workers=1, threads=1)
    embedder.embed_query("warm up")
    (graph,) = minilm.default_cache_dir().glob("minilm-*-fp32-*.onnx")
    options = ort.SessionOptions()
    options.intra_op_num_threads = options.inter_op_num_threads = 1
    options.add_session_config_entry("session.intra_op.allow_spinning", "0")
    options.enable_profiling = True
    options.profile_file_prefix = str(Path(tempfile.mkdtemp()) / "ort")
    embedder._session = ort.InferenceSession(
        str(graph),
        options,
        providers=["CPUExecutionProvider"],
        disabled_optimizers=["SkipLayerNormFusion"],
    )
    embedder.embed_documents(texts)
    events = json.loads(Path(embedder._session.end_profiling()).read_text())
    by_op: collections.Counter[str] = collections.Counter()
    for event in events:
        if event.get("cat") == "Node" and event["name"].endswith("_kernel_time"):
            by_op[event["args"]["op_name"]] += event["dur"]
    total = sum(by_op.values())
    for op, micros in by_op.most_common(8):
        print(f"{op:20s} {100 * micros / total:5.1f}%")


def batch(path: str, count: int, sizes: list[int], rounds: int = 3) -> None:
    texts = [embedding_text(m["content"], m.get("speaker")) for m in turns(path, count)]
    embedder = minilm.MiniLMEmbedder(workers=1, threads=1)
    embedder.embed_query("warm up")
    spent = dict.fromkeys(sizes, 0.0)
    for _ in range(rounds):
        for size in sizes:  # alternating, so the machine's load falls on every size alike
            minilm.BATCH_SIZE = size
            start = time.thread_time()
            embedder.embed_documents(texts)
            spent[size] += time.thread_time() - start
    lengths = np.sort([len(e.ids) for e in embedder._tokenizer.encode_batch(texts)])
    for size in sizes:
        groups = [lengths[i : i + size] for i in range(0, len(lengths), size)]
        padding = sum(g.max() * len(g) for g in groups) / lengths.sum() - 1
        print(
            f"batch {size:3d}: {rounds * len(texts) / spent[size]:6.1f} texts per CPU second,"
            f" padding {100 * padding:.1f}%"
        )


if __name__ == "__main__":
    what, data = sys.argv[1], sys.argv[2]
    n = int(sys.argv[3]) if len(sys.argv) > 3 else 1500
    if what == "e2e":
        e2e(data, n, *sys.argv[4:6])
    elif what == "ops":
        ops(data, n)
    elif what == "calls":
        calls(data, n)
    elif what == "adds":
        adds(data, n, sys.argv[4] if len(sys.argv) > 4 else "background")
    elif what == "indexing":
        indexing(data, n, sys.argv[4] if len(sys.argv) > 4 else "background")
    else:
        batch(
            data,
            n,
            [int(s) for s in (sys.argv[4] if len(sys.argv) > 4 else "1,4,8,16,32,64").split(",")],
        )
