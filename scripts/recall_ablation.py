"""The candidate-side ablation of issue 5: one command, three benchmarks, one table.

    python scripts/recall_ablation.py run --out results/recall-ablation \\
        --data-dir ../shared/data --embedding-cache-dir ../vector-cache [--lme-limit N]
    python scripts/recall_ablation.py table results/recall-ablation   # re-print only

``run`` calls ``anamnesis bench`` once per dataset with every configuration of
``CONFIGS`` (so paired comparisons are on the same stores and questions), then prints
the markdown rows for BENCHMARKS.md: LoCoMo recall@10/@50 and recall@10 by category,
LongMemEval-S dev session recall_all@5 and turn recall_all@10 (abstention excluded),
BEAM 128K recall@20 by category, each with search p50 latency.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from collections import defaultdict
from pathlib import Path

import numpy as np

#: The ablation rows, in order: the baseline, each candidate stage added alone on top
#: of the speaker-aware hybrid, everything with RRF (equal and swept weights) and with
#: learned fusion, then ``full`` with one stage left out.
CONFIGS = (
    "hybrid",
    "hybrid-speakers",
    "hybrid-decompose",
    "hybrid-entity",
    "hybrid-prf",
    "hybrid-neighbours",
    "hybrid-session",
    "full-equal",
    "full",
    "full-learned",
    "full-no-speakers",
    "full-no-decompose",
    "full-no-prf",
    "full-no-neighbours",
    "full-no-session",
    "full-lean",
    "full-fast",
)
DATASETS = {
    "locomo": "locomo10.json.gz",
    "longmemeval": "longmemeval_s_dev.json.gz",
    "beam": "beam_128k.json.gz",
}


def run(out: Path, data_dir: Path, cache: Path | None, lme_limit: int | None) -> None:
    for name, file in DATASETS.items():
        command = [
            sys.executable,
            "-m",
            "anamnesis.cli",
            "bench",
            name,
            "--data",
            str(data_dir / file),
            "--config",
            ",".join(CONFIGS),
            "--depth",
            "50",
            "--out",
            str(out / name),
        ]
        if cache is not None:
            command += ["--embedding-cache-dir", str(cache)]
        if name == "longmemeval" and lme_limit:
            command += ["--limit", str(lme_limit)]
        print("$", " ".join(command), file=sys.stderr)
        subprocess.run(command, check=True)
    print(table(out))


def _records(out: Path, name: str) -> list[dict]:
    """Records of ``out/<name>`` and of its shards ``out/<name>-*`` (runs split with
    ``--skip``/``--limit``)."""
    records = []
    for path in sorted(out.glob(f"{name}*/records.jsonl")):
        with open(path, encoding="utf-8") as handle:
            records.extend(json.loads(line) for line in handle)
    return records


def _mean(values) -> str:
    values = [v for v in values if v is not None]
    return f"{100 * float(np.mean(values)):.1f}" if values else "–"


def _rows(records, metrics, category_metric):
    by_config: dict[str, list[dict]] = defaultdict(list)
    for r in records:
        if r["abstention"] or not (r["evidence"] or r["evidence_sessions"]):
            continue
        by_config[r["config"]].append(r)
    categories = sorted({r["category"] for rs in by_config.values() for r in rs})
    header = (
        ["config", "n"]
        + [label for label, _ in metrics]
        + [f"{c} {category_metric[0]}" for c in categories]
        + ["p50 ms"]
    )
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    order = [c for c in CONFIGS if c in by_config] + [c for c in by_config if c not in CONFIGS]
    for config in order:
        rs = by_config[config]
        cells = [config, str(len(rs))]
        cells += [_mean(r["metrics"].get(key) for r in rs) for _, key in metrics]
        for c in categories:
            cells.append(
                _mean(r["metrics"].get(category_metric[1]) for r in rs if r["category"] == c)
            )
        cells.append(f"{np.median([r['latency_ms'] for r in rs]):.1f}")
        lines.append("| " + " | ".join(cells) + " |")
    return lines


def table(out: Path) -> str:
    parts = []
    specs = {
        "locomo": (
            [("R@10", "recall@10"), ("R@50", "recall@50"), ("R@2k tok", "budget_recall@2000")],
            ("R@10", "recall@10"),
        ),
        "longmemeval": (
            [
                ("S all@5", "lme.session.recall_all@5"),
                ("T all@10", "lme.turn.recall_all@10"),
                ("T all@50", "lme.turn.recall_all@50"),
            ],
            ("S all@5", "lme.session.recall_all@5"),
        ),
        "beam": (
            [("R@10", "recall@10"), ("R@20", "recall@20"), ("R@50", "recall@50")],
            ("R@20", "recall@20"),
        ),
    }
    for name, (metrics, category_metric) in specs.items():
        records = _records(out, name)
        if not records:
            continue
        cases = len({r["case"] for r in records})
        parts.append(f"### {name} ({cases} cases)\n")
        parts.extend(_rows(records, metrics, category_metric))
        parts.append("")
    return "\n".join(parts)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    sub = parser.add_subparsers(dest="command", required=True)
    r = sub.add_parser("run")
    r.add_argument("--out", type=Path, required=True)
    r.add_argument("--data-dir", type=Path, required=True)
    r.add_argument("--embedding-cache-dir", type=Path)
    r.add_argument("--lme-limit", type=int)
    t = sub.add_parser("table")
    t.add_argument("out", type=Path)
    args = parser.parse_args(argv)
    if args.command == "run":
        run(args.out, args.data_dir, args.embedding_cache_dir, args.lme_limit)
    else:
        print(table(args.out))


if __name__ == "__main__":
    main()
