"""Paired comparison of two ``bench`` runs of the same benchmark and configs: a baseline
run and one with a change of environment (the study "ANN forced recall": the
approximate graph forced on with ``ANAMNESIS_ANN_THRESHOLD=1``).

    python docs/experiments/scripts/ann_forced_compare.py BASELINE_DIR CANDIDATE_DIR [METRIC ...]

Each folder is a ``bench`` results folder (its ``records.jsonl``). Questions are paired
by config and question id; abstention questions are left out, as in the summary.
METRIC defaults to the benchmark's headline metric, ``recall@10`` and ``mrr``. Prints a
markdown table per config and metric: the two means, the difference (candidate -
baseline) with its paired bootstrap 95% interval, and how many questions changed; then,
per config, how many questions' top 10 and top 50 came back in another order, and how
the candidate's dense searches were answered (graph or exact scan).
"""

from __future__ import annotations

import json
import math
import sys
from collections import Counter, defaultdict
from pathlib import Path

from anamnesis.bench.metrics import paired_bootstrap
from anamnesis.bench.scoring import HEADLINE


def records(folder: str) -> dict[tuple[str, str], dict]:
    """Scored (not abstention) records of a run, by (config, question id)."""
    out = {}
    for line in Path(folder, "records.jsonl").open():
        record = json.loads(line)
        if not record["abstention"]:
            out[(record["config"], record["question_id"])] = record
    return out


def scored(value: float | None) -> bool:
    """Whether a metric was computed for the question (None or nan: no evidence)."""
    return value is not None and not math.isnan(value)


def keys(record: dict, k: int) -> list[str]:
    return [hit["key"] for hit in record["retrieved"][:k]]


def main(baseline: str, candidate: str, metrics: list[str]) -> None:
    base, cand = records(baseline), records(candidate)
    dataset = json.loads(Path(baseline, "run.json").read_text())["dataset"]
    if not metrics:
        metrics = list(dict.fromkeys([HEADLINE[dataset][0], "recall@10", "mrr"]))
    common = sorted(set(base) & set(cand))
    by_config: dict[str, list[tuple[dict, dict]]] = defaultdict(list)
    for key in common:
        by_config[key[0]].append((base[key], cand[key]))
    print(f"{dataset}: {len(common)} paired (config, question) of {len(base)} / {len(cand)}\n")
    print("| config | metric | n | baseline | candidate | diff [95% CI] | p | changed |")
    print("|---|---|---|---|---|---|---|---|")
    for config, pairs in by_config.items():
        for metric in metrics:
            both = [
                (b["metrics"][metric], c["metrics"][metric])
                for b, c in pairs
                if scored(b["metrics"].get(metric)) and scored(c["metrics"].get(metric))
            ]
            xs, ys = [x for x, _ in both], [y for _, y in both]
            test = paired_bootstrap(ys, xs)
            changed = sum(x != y for x, y in both)
            print(
                f"| {config} | {metric} | {len(both)} | {100 * sum(xs) / len(xs):.2f} "
                f"| {100 * sum(ys) / len(ys):.2f} | {100 * test['diff']:+.2f} "
                f"[{100 * test['low']:+.2f}, {100 * test['high']:+.2f}] "
                f"| {test['p_value']:.2f} | {changed} |"
            )
    print("\n| config | top 10 reordered | top 50 reordered | candidate dense searches |")
    print("|---|---|---|---|")
    for config, pairs in by_config.items():
        top10 = sum(keys(b, 10) != keys(c, 10) for b, c in pairs)
        top50 = sum(keys(b, 50) != keys(c, 50) for b, c in pairs)
        ways: Counter[str] = Counter()
        for _, c in pairs:
            ways.update(c.get("dense_searches", {}))
        print(
            f"| {config} | {top10} / {len(pairs)} | {top50} / {len(pairs)} "
            f"| graph {ways['graph']}, exact {ways['exact']} |"
        )


if __name__ == "__main__":
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    main(sys.argv[1], sys.argv[2], sys.argv[3:])
