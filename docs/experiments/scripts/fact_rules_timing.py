"""How long the rule fact extractor takes to load and to read turns, for one checkout.

    cd /tmp && PYTHONPATH=<checkout> python <this file> [--data ../shared/data]

Run it from outside the checkout (Python puts the current folder first on the path),
alternating two checkouts on a busy machine. Prints one JSON line: the CPU time of
``import anamnesis``, then of loading the rules (compiling their patterns), and the
extractor's best of three CPU times over two sets of turns: the labelled statement
sets, the agent-life personas and LoCoMo (``fact_rules_dump.turns``), and the distinct
user turns of the first 40 LongMemEval-S cases.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=HERE.parents[2].parent / "shared" / "data")
    args = parser.parse_args()
    start = time.process_time()
    import anamnesis  # noqa: F401 - timed

    imported = time.process_time()
    from anamnesis.facts.rules import RuleExtractor

    loaded = time.process_time()
    from anamnesis.bench import datasets

    sys.path.insert(0, str(HERE))
    from fact_rules_dump import _episode, turns

    short = []
    for source, _, episode in turns(args.data):
        if source == "longmemeval":
            break
        short.append(episode)
    seen: set[str] = set()
    long = []
    for case in datasets.load(
        "longmemeval", args.data / "longmemeval_s_dev.json.gz", limit=40
    ).cases:
        for message in case.messages:
            if message.get("role") == "user" and message["content"] not in seen:
                seen.add(message["content"])
                long.append(_episode(message["content"], "user", None, message["event_time"]))
    extractor = RuleExtractor()
    out: dict[str, object] = {
        "import_ms": round((imported - start) * 1000),
        "rules_ms": round((loaded - imported) * 1000),
    }
    for name, episodes in (("sets+agent-life+locomo", short), ("longmemeval-40", long)):
        best = float("inf")
        for _ in range(3):
            begun = time.process_time()
            for episode in episodes:
                extractor.extract(episode)
            best = min(best, time.process_time() - begun)
        out[name] = {
            "turns": len(episodes),
            "seconds": round(best, 2),
            "per_s": round(len(episodes) / best),
        }
    print(json.dumps(out))


if __name__ == "__main__":
    main()
