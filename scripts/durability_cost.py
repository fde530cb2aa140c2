"""What ``durability="full"`` costs per ``add`` against ``"normal"``, measured in one run.

Two SQLite stores in the same directory (so on the same disk) take one ``add`` each in
turn, each its own transaction, so both meet the same machine noise; the median time
per add of each, and their ratio, are printed. The store directory must be on the disk
you care about (a tmpfs has no sync to pay for).

    python scripts/durability_cost.py --adds 300 --embedder edge --dir .
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

from anamnesis import Memory


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--adds", type=int, default=300, help="adds per durability")
    parser.add_argument("--embedder", default="edge", help="edge isolates the write's cost")
    parser.add_argument("--dir", type=Path, default=Path("."), help="where the stores go")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(dir=args.dir) as where:
        memories = {
            level: Memory(
                path=Path(where) / f"{level}.db",
                embedder=args.embedder,
                warm=False,
                durability=level,
            )
            for level in ("normal", "full")
        }
        seconds: dict[str, list[float]] = {level: [] for level in memories}
        try:
            for memory in memories.values():  # load the model, create the tables
                memory.add("warm-up", user_id="bench")
            for turn in range(args.adds):
                for level, memory in memories.items():
                    text = f"turn {turn}: I moved my beehives to the north field"
                    started = time.perf_counter()
                    memory.add(text, user_id="bench", session_id="s")
                    seconds[level].append(time.perf_counter() - started)
        finally:
            for memory in memories.values():
                memory.close()
    median = {level: statistics.median(times) * 1000 for level, times in seconds.items()}
    for level, value in median.items():
        print(f"{level:>6}: median {value:.2f} ms per add ({args.adds} adds, {args.embedder})")
    print(f"full / normal: {median['full'] / median['normal']:.2f}x")


if __name__ == "__main__":
    main()
