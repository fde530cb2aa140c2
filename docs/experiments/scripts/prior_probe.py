"""Turn priors on channel dumps: which turns the default ranks high that are not evidence.

Reads dumps written by ``docs/experiments/scripts/fusion_sweep.py dump --config full-replies`` and the
benchmark files they came from (for each turn's text), then prints:

1. how many evidence turns fall outside the preset's top 50, and how many of those no
   channel proposed at all (then fusion and reranking cannot reach them);
2. among each question's top 20 (the preset as it ranks), how often evidence turns and
   other turns end with "?", and their mean length in words;
3. recall@10/20/50 on each half of the cases (A: first half of the sorted case ids) when
   the preset's fusion (recomputed from the dumped lists, without post-fusion stages)
   is followed by a prior: turns ending with "?" of at most N words scaled by a
   factor, or every turn scaled by (words / mean words of the top 50) ** alpha.

    python docs/experiments/scripts/prior_probe.py locomo ../shared/data/locomo10.json.gz out/locomo.dump.jsonl.gz \\
        beam ../shared/data/beam_128k.json.gz out/beam.dump.jsonl.gz

Nothing is tuned here; ``docs/experiments/scripts/sweep.py`` runs the chosen priors through the real
pipeline.
"""

from __future__ import annotations

import sys
from collections import Counter
from collections.abc import Callable
from pathlib import Path

from fusion_sweep import evaluate, halves, load_dump

from anamnesis.bench import datasets
from anamnesis.bench.presets import BENCH_PRESETS
from anamnesis.retrieve.fusion import weighted_rrf
from anamnesis.retrieve.understanding import only_asks
from anamnesis.store.base import Candidate

Prior = Callable[[str], float]


def question_prior(factor: float, words: int | None) -> Prior:
    """The ``question_prior`` stage's rule as a multiplier (``words=None``: any length)."""
    limit = sys.maxsize if words is None else words
    return lambda text: factor if only_asks(text, limit) else 1.0


def probe(name: str, data: Path, dump: Path) -> None:
    dataset = datasets.load(name, data)
    text = {
        (case.id, str(m["metadata"][dataset.evidence_key])): m["content"]
        for case in dataset.cases
        for m in case.messages
    }
    records = load_dump(dump)
    config = BENCH_PRESETS["full-replies"]
    fused: dict[str, list[tuple[str, float]]] = {}
    seen: Counter[tuple[str, str]] = Counter()
    for r in records:
        lists = {
            channel: [Candidate(key, float(score)) for key, score in items]
            for channel, items in r["channels"].items()
        }
        ranked = weighted_rrf(lists, config.weights, config.rrf_k, config.score_mix)
        fused[r["id"]] = [(f.episode_id, f.score) for f in ranked]
        evidence = set(r["evidence"])
        for key in r["fused"][:20]:
            words = text[(r["case"], key)]
            label = "evidence" if key in evidence else "other"
            seen[label, "turns"] += 1
            seen[label, "ends with ?"] += words.rstrip().endswith("?")
            seen[label, "words"] += len(words.split())
    outside = [
        (r, key) for r in records for key in r["evidence"] if key not in set(r["fused"][:50])
    ]
    unproposed = sum(
        all(key not in {k for k, _ in items} for items in r["channels"].values())
        for r, key in outside
    )
    print(f"## {name}: evidence turns outside the preset's top 50: {len(outside)}")
    print(f"- of them in no channel's candidate list: {unproposed}")
    print(f"## {name}: top 20 of the preset as it ranks")
    for label in ("evidence", "other"):
        n = seen[label, "turns"]
        print(
            f"- {label}: {n} turns, {100 * seen[label, 'ends with ?'] / n:.0f}% end with '?', "
            f"{seen[label, 'words'] / n:.0f} words on average"
        )

    def ranking(prior: Prior | None, alpha: float = 0.0) -> Callable[[dict], list[str]]:
        def rank(r: dict) -> list[str]:
            items = fused[r["id"]]
            lengths = {key: len(text[(r["case"], key)].split()) + 1 for key, _ in items[:50]}
            mean = sum(lengths.values()) / max(1, len(lengths))
            scored = []
            for key, score in items:
                if prior is not None:
                    score *= prior(text[(r["case"], key)])
                if alpha:
                    score *= (lengths.get(key, mean) / mean) ** alpha
                scored.append((key, score))
            return [key for key, _ in sorted(scored, key=lambda x: -x[1])]

        return rank

    first, second = halves(records)
    variants: list[tuple[str, Callable[[dict], list[str]]]] = [("fusion only", ranking(None))]
    for words in (15, 25, 40, None):
        for factor in (0.5, 0.6, 0.7, 0.8):
            label = f"'?' x{factor}, {'any length' if words is None else f'<= {words} words'}"
            variants.append((label, ranking(question_prior(factor, words))))
    for alpha in (0.05, 0.1, 0.2):
        variants.append((f"length ** {alpha}", ranking(None, alpha)))
    print(f"\n| {name} | A R@10 | A R@20 | A R@50 | B R@10 | B R@20 | B R@50 |")
    print("|---|---|---|---|---|---|---|")
    for label, rank in variants:
        a, b = evaluate(first, rank), evaluate(second, rank)
        cells = [100 * half[f"R@{k}"] for half in (a, b) for k in (10, 20, 50)]
        print(f"| {label} | " + " | ".join(f"{c:.1f}" for c in cells) + " |")
    print()


if __name__ == "__main__":
    args = sys.argv[1:]
    for i in range(0, len(args), 3):
        probe(args[i], Path(args[i + 1]), Path(args[i + 2]))
