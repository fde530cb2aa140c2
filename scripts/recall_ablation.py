"""Issue 5's ablation: one command, three benchmarks, a row for every retrieval stage.

    python scripts/recall_ablation.py run --out results/ablation \\
        --data-dir ../shared/data --embedding-cache-dir VECTORS
    python scripts/recall_ablation.py table results/ablation   # re-print only

``run`` calls ``anamnesis bench`` once per data set (``--only NAME`` for one; the three
can run side by side) with every configuration of ``ROWS``, so that every row of a data
set is measured on the same stores and questions (MiniLM on all three), then prints the
tables for BENCHMARKS.md and, for the default, the abstention threshold sweep.

The rows, in order:

- baselines: BM25, MiniLM dense, their RRF (``hybrid``);
- each candidate stage added alone to ``hybrid`` (query understanding, the derived
  channels, the event-time channel, the fact layer), and each post-fusion reranker
  alone after it;
- fusion: every channel with equal RRF weights, with the swept weights (``full``), with
  the learned (logistic) fusion;
- the default's fused stage (``full-priors``), the default, and the default with one of
  its stages switched off. The default's ranker is judged held out: each question is
  ranked by the models fitted on the half of the cases that does not hold it (every
  ranker row runs twice, with the bundled models and with ``ranker-second``'s; see
  ``bench.fitting.crossfit``). A stage switched off leaves the ranker's model as it
  is, so those rows say what switching the stage off costs a user of the shipped
  model, not what a ranker refitted without it would score.

``rerank-e5`` runs on LoCoMo only: e5-small embeds candidates at query time, a few
seconds per long BEAM or LongMemEval turn. ``hyde`` and ``rerank-ce`` need an LLM
endpoint or a cross-encoder model, neither available offline, and have no row.
"""

from __future__ import annotations

import argparse
import json
from collections import defaultdict
from pathlib import Path

import numpy as np

from anamnesis.bench import abstention, fitting
from anamnesis.bench.metrics import paired_bootstrap
from anamnesis.bench.presets import BENCH_PRESETS, SECOND_HALVES_RANKER, plus, without
from anamnesis.cli import main as anamnesis
from anamnesis.config import SearchConfig
from anamnesis.retrieve.filters import ABSTAIN_RULES

_HYBRID = BENCH_PRESETS["hybrid"]
_DEFAULT = BENCH_PRESETS["default"]


#: Ablation-only presets: the role channels and the replies channel added alone to
#: ``hybrid``, and the default with one stage switched off.
EXTRA: dict[str, SearchConfig] = {
    "hybrid-roles": plus(plus(_HYBRID, "role_lexical", 2.0), "role_dense", 2.0).with_(
        seed_channels=(*_HYBRID.seed_channels, "role_lexical", "role_dense")
    ),
    "hybrid-replies": plus(_HYBRID, "replies", 2.0),
    "default-no-speakers": without(_DEFAULT, channel="speaker_lexical", query="speakers"),
    "default-no-prf": without(_DEFAULT, channel="prf"),
    "default-no-session": without(_DEFAULT, channel="session"),
    "default-no-replies": without(_DEFAULT, channel="replies"),
    # A channel left out seeds nothing either (``candidates.seed_ranking``).
    "default-no-roles": without(without(_DEFAULT, channel="role_lexical"), channel="role_dense"),
    "default-no-time": without(_DEFAULT, channel="temporal", stage="time_match"),
    "default-no-question-prior": without(_DEFAULT, stage="question_prior"),
    "default-no-score-mix": _DEFAULT.with_(score_mix=0.0),
}

#: The rows of each table, by section.
SECTIONS: dict[str, tuple[str, ...]] = {
    "baselines": ("bm25", "dense", "hybrid"),
    "one candidate stage added to hybrid": (
        "hybrid-speakers",
        "hybrid-decompose",
        "hybrid-entity",
        "hybrid-prf",
        "hybrid-neighbours",
        "hybrid-session",
        "hybrid-roles",
        "hybrid-replies",
        "temporal",
        "facts",
    ),
    "one post-fusion stage after hybrid": (
        "facts-rerank",
        "rerank-memx",
        "rerank-surprise",
        "rerank-dedup",
        "rerank-e5",
    ),
    "fusion of every channel": ("full-equal", "full", "full-learned"),
    "the default and its stages": (
        "full-priors",
        "default",
        *(name for name in EXTRA if name.startswith("default-")),
    ),
}
ROWS = tuple(row for rows in SECTIONS.values() for row in rows)
#: Rows that run the learned ranker: judged held out (see the module's docstring).
RANKED = tuple(row for row in ROWS if row.startswith("default"))
SECOND = "@second"
LOCOMO_ONLY = ("rerank-e5",)

DATASETS = {
    "locomo": "locomo10.json.gz",
    "longmemeval": "longmemeval_s_dev.json.gz",
    "beam": "beam_128k.json.gz",
}


def register() -> None:
    """Add the ablation-only presets, and each ranked row's twin with the models fitted
    on the second halves, to ``BENCH_PRESETS`` (this process only)."""
    BENCH_PRESETS.update(EXTRA)
    for row in RANKED:
        BENCH_PRESETS[row + SECOND] = BENCH_PRESETS[row].with_options(
            "learned_rerank", model=SECOND_HALVES_RANKER
        )


def configs(dataset: str) -> list[str]:
    """The configurations one data set's run holds."""
    rows = [r for r in ROWS if dataset == "locomo" or r not in LOCOMO_ONLY]
    return rows + [r + SECOND for r in RANKED]


def run(out: Path, data_dir: Path, cache: Path | None, only: str | None) -> None:
    register()
    for name, file in DATASETS.items():
        if only and name != only:
            continue
        argv = ["bench", name, "--data", str(data_dir / file), "--config"]
        argv += [",".join(configs(name)), "--out", str(out / name)]
        if cache is not None:
            argv += ["--embedding-cache-dir", str(cache)]
        anamnesis(argv, standalone_mode=False)
    print(table(out))


def _records(out: Path, name: str) -> list[dict]:
    """The run's records, each ranked row replaced by its held-out records."""
    path = out / name / "records.jsonl"
    if not path.exists():
        return []
    with open(path, encoding="utf-8") as handle:
        records = [json.loads(line) for line in handle]
    heldout = [r for row in RANKED for r in fitting.crossfit(records, row, row + SECOND, row)]
    return [r for r in records if r["config"] not in RANKED and SECOND not in r["config"]] + heldout


def _mean(values) -> str:
    values = [v for v in values if v is not None]
    return f"{100 * float(np.mean(values)):.1f}" if values else "–"


#: What each section's rows are compared with (paired, on the category metric).
REFERENCE = {"the default and its stages": "default"}


def _delta(rows: list[dict], reference: list[dict], metric: str) -> str:
    """``rows`` minus ``reference`` on ``metric``, question by question, with a bootstrap
    95% interval."""
    ref = {r["question_id"]: r["metrics"].get(metric) for r in reference}
    pairs = [
        (r["metrics"][metric], ref[r["question_id"]])
        for r in rows
        if r["metrics"].get(metric) is not None and ref.get(r["question_id"]) is not None
    ]
    if not pairs:
        return "–"
    test = paired_bootstrap([a for a, _ in pairs], [b for _, b in pairs])
    return f"{100 * test['diff']:+.1f} [{100 * test['low']:+.1f}, {100 * test['high']:+.1f}]"


def _rows(records: list[dict], metrics, category_metric) -> list[str]:
    by_config: dict[str, list[dict]] = defaultdict(list)
    for r in records:
        if r["abstention"] or not (r["evidence"] or r["evidence_sessions"]):
            continue
        by_config[r["config"]].append(r)
    categories = sorted({r["category"] for rs in by_config.values() for r in rs})
    label, metric = category_metric
    header = (
        ["config", "n"]
        + [name for name, _ in metrics]
        + [f"Δ {label} [95% CI]"]
        + [f"{c} {label}" for c in categories]
        + ["p50 ms"]
    )
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for section, rows in SECTIONS.items():
        present = [row for row in rows if row in by_config]
        if not present:
            continue
        reference = REFERENCE.get(section, "hybrid")
        lines.append(f"| *{section}; Δ against {reference}* |" + " |" * (len(header) - 1))
        for config in present:
            rs = by_config[config]
            cells = [f"{config} (held out)" if config in RANKED else config, str(len(rs))]
            cells += [_mean(r["metrics"].get(key) for r in rs) for _, key in metrics]
            same = config == reference or reference not in by_config
            cells.append("" if same else _delta(rs, by_config[reference], metric))
            for c in categories:
                cells.append(_mean(r["metrics"].get(metric) for r in rs if r["category"] == c))
            cells.append(f"{np.median([r['latency_ms'] for r in rs]):.1f}")
            lines.append("| " + " | ".join(cells) + " |")
    return lines


#: Per data set: the metrics of the table, and the one given by category.
METRICS = {
    "locomo": (
        [("R@10", "recall@10"), ("R@50", "recall@50"), ("R@2k tok", "budget_recall@2000")],
        ("R@10", "recall@10"),
    ),
    "longmemeval": (
        [
            ("S all@5", "lme.session.recall_all@5"),
            ("T all@10", "lme.turn.recall_all@10"),
            ("R@2k tok", "budget_recall@2000"),
        ],
        ("T all@10", "lme.turn.recall_all@10"),
    ),
    "beam": (
        [("R@10", "recall@10"), ("R@20", "recall@20"), ("R@50", "recall@50")],
        ("R@20", "recall@20"),
    ),
}


def table(out: Path) -> str:
    """The markdown tables of a finished run, and the default's abstention sweep."""
    out = Path(out)
    parts = []
    for name, (metrics, category_metric) in METRICS.items():
        records = _records(out, name)
        if not records:
            continue
        cases = len({r["case"] for r in records})
        parts.append(f"### {name} ({cases} cases)\n")
        parts.extend(_rows(records, metrics, category_metric))
        for rule in ABSTAIN_RULES:
            rows = abstention.sweep(
                records, "default", abstention.THRESHOLDS, dataset=name, rule=rule
            )
            parts += ["", f"Abstention, default (held out), rule {rule}:", ""]
            parts.append(abstention.markdown(rows, abstention.headline_metric(name), rule))
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
    r.add_argument("--only", choices=sorted(DATASETS), help="run one data set")
    t = sub.add_parser("table")
    t.add_argument("out", type=Path)
    args = parser.parse_args(argv)
    if args.command == "run":
        run(args.out, args.data_dir, args.embedding_cache_dir, args.only)
    else:
        print(table(args.out))


if __name__ == "__main__":
    main()
