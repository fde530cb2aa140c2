"""Per-category paired comparison of two configs of one benchmark run.

    python scripts/category_compare.py RESULTS_DIR BASELINE CANDIDATE METRIC [BINARY]

RESULTS_DIR is a ``bench`` results folder (its ``records.jsonl``); METRIC is a key of the
records' ``metrics`` (``recall@10``, ``recall@20``, ``lme.session.recall_all@5``, ...);
BINARY (default: ``hit@`` of METRIC's k, or METRIC itself when it is 0/1) is the metric
McNemar's test counts. Prints a markdown table: per category and overall, the two means,
the difference (candidate - baseline) with its paired bootstrap 95% interval and p, and
the McNemar counts (questions only the baseline / only the candidate got).
"""

from __future__ import annotations

import json
import sys
from collections import defaultdict
from pathlib import Path

from anamnesis.bench.metrics import binary_metric, mcnemar_exact, paired_bootstrap


def main(folder: str, baseline: str, candidate: str, metric: str, binary: str | None) -> None:
    if binary is None:
        binary = binary_metric(metric)
    values: dict[tuple[str, str], dict[str, dict]] = defaultdict(dict)
    for line in Path(folder, "records.jsonl").open():
        record = json.loads(line)
        if record["abstention"] or record["metrics"].get(metric) is None:
            continue
        values[(record["category"], record["question_id"])][record["config"]] = record["metrics"]
    by_category: dict[str, list[tuple[dict, dict]]] = defaultdict(list)
    for (category, _), configs in sorted(values.items()):
        if baseline in configs and candidate in configs:
            pair = (configs[baseline], configs[candidate])
            by_category[category].append(pair)
            by_category["all"].append(pair)
    print(f"| category | n | {baseline} | {candidate} | diff [95% CI] | p | McNemar |")
    print("|---|---|---|---|---|---|---|")
    for category, pairs in sorted(by_category.items(), key=lambda kv: (kv[0] == "all", kv[0])):
        a = [p[0][metric] for p in pairs]
        b = [p[1][metric] for p in pairs]
        test = paired_bootstrap(b, a)
        p = "<0.0005" if test["p_value"] == 0 else f"{test['p_value']:.2g}"
        counts = (
            mcnemar_exact([p[0][binary] for p in pairs], [p[1][binary] for p in pairs])
            if binary is not None
            else {"a_only": "-", "b_only": "-", "p_value": float("nan")}
        )
        print(
            f"| {category} | {len(pairs)} | {100 * sum(a) / len(a):.1f} | "
            f"{100 * sum(b) / len(b):.1f} | {100 * test['diff']:+.1f} "
            f"[{100 * test['low']:+.1f}, {100 * test['high']:+.1f}] | {p} | "
            f"{counts['a_only']}/{counts['b_only']}, p={counts['p_value']:.2g} |"
        )


if __name__ == "__main__":
    if len(sys.argv) not in (5, 6):
        sys.exit(__doc__)
    main(*sys.argv[1:5], sys.argv[5] if len(sys.argv) == 6 else None)
