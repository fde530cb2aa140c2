"""What the encoding gate adds to ingest against a grown store.

Fills one user's store with SIZE LongMemEval S turns (``edge`` embedder, no gate),
then adds the next 1,000 turns twice, to a copy without a gate and to one with the
default gate, and prints milliseconds per added episode (the vectors are computed
before each timed add, so both time the same work apart from the gate):

    python docs/experiments/scripts/gate_cost.py 20000
"""

from __future__ import annotations

import sys
import tempfile
import time
from pathlib import Path

from anamnesis import Memory
from anamnesis.bench import datasets
from anamnesis.embed import get_embedder

DATA = "../shared/data/longmemeval_s_dev.json.gz"


def main(size: int) -> None:
    dataset = datasets.load("longmemeval", DATA, limit=80)
    turns = [
        {k: v for k, v in turn.items() if k != "session_id"}
        for case in dataset.cases
        for turn in case.messages
    ]
    base, probe = turns[:size], turns[size : size + 1000]
    embedder = get_embedder("edge")
    with tempfile.TemporaryDirectory() as work:
        for gate in (None, "default"):
            path = Path(work) / f"{gate}.db"
            with Memory(path=path, embedder=embedder, warm=False) as memory:
                memory.add_many(base, user_id="u")
            with Memory(path=path, embedder=embedder, warm=False, gate=gate) as memory:
                memory.search("warm up", user_id="u")
                embedder.embed_documents([t["content"] for t in probe])
                start = time.perf_counter()
                memory.add_many(probe, user_id="u")
                seconds = time.perf_counter() - start
            per_episode = 1000 * seconds / len(probe)
            print(f"store {size}: gate {gate or 'off'}: {per_episode:.2f} ms/episode")


if __name__ == "__main__":
    main(int(sys.argv[1]))
