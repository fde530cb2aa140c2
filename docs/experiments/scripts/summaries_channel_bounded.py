"""The summaries channel on a consolidated store, before and after a change (study
"The summaries channel, bounded").

    python docs/experiments/scripts/summaries_channel_bounded.py ranks STORE.db USER OUT.json
    python docs/experiments/scripts/summaries_channel_bounded.py compare A.json B.json
    python docs/experiments/scripts/summaries_channel_bounded.py channel STORE.db USER
    python docs/experiments/scripts/summaries_channel_bounded.py nearest STORE.db USER
    python docs/experiments/scripts/summaries_channel_bounded.py consolidation STORE.db USER COPY.db

``ranks``: the default's result lists (50 hits, ``explain``; ids and scores in full
precision) for 100 LongMemEval S questions, then for questions written close to the
user's profile (so that the profile ranks among the channel's items), each unfiltered,
with a role filter and with a time filter; run it with each checkout, then
``compare`` the two files. ``channel``: the channel alone on the same asks, its cited
turns scored through ``Store.derived_nearest`` (after) or through the shared SQL path
(``derived_episodes`` and ``episode_vectors``, the reads the channel made before),
interleaved ask by ask in one process, thread CPU p50. ``nearest``:
``Store.derived_nearest`` against the shared SQL path on the profile and three summaries
for 60 questions, four filters and three limits. ``consolidation``: copies STORE,
searches once, adds the next 300 distinct LongMemEval turns and consolidates them, then
times the next three searches and the item index's rebuild in the first.
"""

from __future__ import annotations

import glob
import json
import os
import shutil
import statistics
import sys
import time
from datetime import UTC, datetime
from pathlib import Path

from scale_default import distinct_turns  # the script beside this one

from anamnesis import Memory
from anamnesis.bench import datasets
from anamnesis.bench.presets import BENCH_PRESETS
from anamnesis.embed import get_embedder
from anamnesis.retrieve import summaries as channel
from anamnesis.retrieve.pipeline import Retriever
from anamnesis.store.base import Filters
from anamnesis.types import Scope

DATA = Path(__file__).parents[3] / ".." / "shared" / "data" / "longmemeval_s_dev.json.gz"
#: Close to the profiles of the two stores of the study (users ``scale`` and ``u``).
PROFILE_QUESTIONS = [
    "How old is the user and which events has the user attended?",
    "user attended a charity concert; user attended a museum gala event; "
    "user attended a playwriting workshop",
    "user is 37 years old; user allergic to cheese; user attended a theater production of Hamlet",
    "user is 32 years old; user attended a theater production of Hamlet; "
    "user attended a charity concert",
    "Which workshops did the user attend?",
]


def asks() -> list[tuple[str, Filters]]:
    dataset = datasets.load("longmemeval", str(DATA))
    out = [(case.questions[0].text, Filters()) for case in dataset.cases[:100]]
    for question in PROFILE_QUESTIONS:
        out += [
            (question, Filters()),
            (question, Filters(role="user")),
            (question, Filters(event_after=datetime(2023, 5, 1, tzinfo=UTC))),
        ]
    return out


def ranks(path: str, user: str, out: str) -> None:
    with Memory(path=path, embedder=get_embedder("edge")) as memory:
        retriever = Retriever(memory.store, memory.embedder, BENCH_PRESETS["default"])
        retriever.search("warm up", Scope(user), Filters(), 1, False)
        hits, cpu = [], []
        for question, filters in asks():
            start = time.thread_time()
            found = retriever.search(question, Scope(user), filters, 50, True)
            cpu.append(time.thread_time() - start)
            hits.append([(h.episode.id, repr(h.score)) for h in found])
    Path(out).write_text(json.dumps(hits))
    print(
        f"{len(hits)} searches, CPU p50 {statistics.median(cpu[:100]) * 1e3:.2f} ms over the "
        f"100 questions, {statistics.median(cpu[100:]) * 1e3:.2f} ms over the profile asks"
    )


def compare(first: str, second: str) -> None:
    a, b = json.loads(Path(first).read_text()), json.loads(Path(second).read_text())
    differ = [i for i, (x, y) in enumerate(zip(a, b, strict=True)) if x != y]
    print(f"{len(a)} result lists, {len(differ)} differ {differ[:10]}")


def channel_ab(path: str, user: str) -> None:
    from anamnesis.store.shared.derived import DerivedReads

    with Memory(path=path, embedder=get_embedder("edge")) as memory:
        store = memory.store
        retriever = Retriever(store, memory.embedder, BENCH_PRESETS["default"])
        retriever.search("warm up", Scope(user), Filters(), 1, False)
        after = store.derived_nearest

        def before(*args):  # the shared path: every cited turn read through SQL
            return DerivedReads.derived_nearest(store, *args)

        cpu: dict[str, list[float]] = {"before": [], "after": []}
        profile_ranked = []
        for k, (question, filters) in enumerate(asks()):
            vector = memory.embedder.embed_query(question)
            order = [("before", before), ("after", after)]
            for name, method in order if k % 2 else order[::-1]:
                store.derived_nearest = method  # type: ignore[method-assign]
                request = retriever.request(question, Scope(user), filters)
                request._vector = vector
                start = time.thread_time()
                channel.summaries(request, 200)
                cpu[name].append((time.thread_time() - start) * 1e3)
            store.derived_nearest = after  # type: ignore[method-assign]
            ranked = channel.matching_items(
                store,
                Scope(user),
                request.analysis.terms,
                vector,
                None,
                retriever.resources,
                channel.TOP_ITEMS,
            )
            profile_ranked.append(any(item.startswith("prof") for item, _ in ranked))
    for label, part in (("100 questions", slice(0, 100)), ("15 profile asks", slice(100, None))):
        print(
            f"{label} (the profile among the {channel.TOP_ITEMS} best items in "
            f"{sum(profile_ranked[part])}): channel CPU p50 before "
            f"{statistics.median(cpu['before'][part]):.2f} ms, after "
            f"{statistics.median(cpu['after'][part]):.2f} ms"
        )


def nearest(path: str, user: str) -> None:
    from anamnesis.store.shared.derived import DerivedReads

    questions = [question for question, _ in asks()[:60]]
    later = Filters(event_after=datetime(2023, 5, 1, tzinfo=UTC))
    filters = (Filters(), Filters(role="user"), Filters(not_role="user"), later)
    with Memory(path=path, embedder=get_embedder("edge")) as memory:
        store, scope = memory.store, Scope(user)
        items = [item for item, _, _, _ in store.derived_texts(scope)]
        profiles = [item for item in items if item.startswith("prof")]
        calls = differ = 0
        for k, question in enumerate(questions):
            vector = memory.embedder.embed_query(question)
            asked = profiles + items[k * 7 : k * 7 + 3]
            for where in filters:
                for limit in (3, 8, 50):
                    calls += 1
                    shared = DerivedReads.derived_nearest(store, asked, vector, scope, where, limit)
                    differ += store.derived_nearest(asked, vector, scope, where, limit) != shared
    print(f"{calls} calls, {differ} differ from the shared path")


def consolidation(path: str, user: str, copy: str) -> None:
    for old in glob.glob(copy + "*"):
        os.remove(old)
    for name in glob.glob(path + "*"):
        shutil.copy(name, copy + name[len(path) :])
    built: list[float] = []
    read_index = channel._read_index

    def timed(*args):
        start = time.thread_time()
        try:
            return read_index(*args)
        finally:
            built.append((time.thread_time() - start) * 1e3)

    channel._read_index = timed  # type: ignore[assignment]
    questions = ["What did I say about my trip?", "Which concerts did I attend?", "How old am I?"]
    with Memory(path=copy, embedder=get_embedder("edge")) as memory:
        retriever = Retriever(memory.store, memory.embedder, BENCH_PRESETS["default"])
        retriever.search("What is my favourite food?", Scope(user), Filters(), 10, False)
        (held,) = memory.store._conn.execute("SELECT COUNT(*) FROM episodes").fetchone()
        memory.add_many(distinct_turns(str(DATA), held + 300)[held:], user_id=user)
        start = time.perf_counter()
        memory.consolidate(user_id=user)
        consolidated = time.perf_counter() - start
        searches = []
        for question in questions:
            wall, cpu = time.perf_counter(), time.thread_time()
            retriever.search(question, Scope(user), Filters(), 10, False)
            cpu, wall = time.thread_time() - cpu, time.perf_counter() - wall
            searches.append(f"{cpu * 1e3:.0f} ({wall * 1e3:.0f})")
    print(
        f"{held} turns + 300, consolidated in {consolidated:.1f} s; the next searches, CPU "
        f"(wall) ms: {', '.join(searches)}; the item index built in {built[-1]:.0f} ms CPU "
        f"(at the first search: {built[0]:.0f})"
    )


if __name__ == "__main__":
    command, *args = sys.argv[1:]
    if command == "ranks":
        ranks(*args)
    elif command == "compare":
        compare(*args)
    elif command == "channel":
        channel_ab(*args)
    elif command == "nearest":
        nearest(*args)
    else:
        consolidation(*args)
