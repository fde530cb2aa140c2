"""Thread CPU of searches with each kind of filter on a large scope (study
2026-11-27-filtered-searches).

    python docs/experiments/scripts/filtered_search_probe.py STORE.db USER

Opens the store (``edge``), warms it up, then for each filter (none, a role, a time
window, a metadata value no row has, ``as_of``) asks 8 questions twice and prints the
first search's CPU and the p50 of the rest, in ms of the searching thread.
"""

from __future__ import annotations

import sys
import time

from anamnesis import Memory

QUESTIONS = [
    "what did I buy last week",
    "where do I live now",
    "my favourite food",
    "the trip to Japan",
    "how old is my dog",
    "when did I start the new job",
    "what is my sister called",
    "which books did I read",
]
KINDS = {
    "none": {},
    "role": {"filters": {"role": "user"}},
    "time window": {"filters": {"event_after": "2023-06-01"}},
    "metadata": {"filters": {"metadata": {"topic": "x"}}},
    "as_of": {"as_of": "2023-06-01"},
}


def main() -> None:
    path, user = sys.argv[1], sys.argv[2]
    memory = Memory(path=path, embedder="edge", warm=False)
    memory.store.warm_up()
    for kind, arguments in KINDS.items():
        costs = []
        for question in QUESTIONS * 2:
            start = time.thread_time()
            memory.search(question, user_id=user, **arguments)
            costs.append((time.thread_time() - start) * 1000)
        rest = sorted(costs[1:])
        print(f"{kind}: first {costs[0]:.0f} ms CPU, then p50 {rest[len(rest) // 2]:.1f}")
    memory.close()


if __name__ == "__main__":
    main()
