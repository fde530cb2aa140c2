"""Fusion weights by a documented sweep, and learned (logistic) fusion, on channel dumps.

Two steps, both reproducible:

1. ``dump``: ingest every case of a benchmark like ``anamnesis bench`` does (same
   loaders, same stores, same as-of filter) and record, per question, every channel's
   ranked candidates (evidence key and raw score) under the ``sweep`` configuration
   below. Nothing is tuned here.

       python docs/experiments/scripts/fusion_sweep.py dump locomo --data ../shared/data/locomo10.json.gz \\
           --embedding-cache-dir ../vector-cache --out out/locomo.dump.jsonl.gz

2. ``sweep``: on the dumps, (a) choose weighted-RRF weights by coordinate ascent over
   a fixed grid on the A splits (the first half of each dataset's cases) and report
   them on the B splits, and the other way round; (b) fit a logistic model over
   channel ranks and scores the same way, and one per whole dataset evaluated on the
   other datasets. Writes a markdown report and, with ``--save-model``, the logistic
   model fitted on the A splits.

       python docs/experiments/scripts/fusion_sweep.py sweep out/locomo.dump.jsonl.gz out/beam.dump.jsonl.gz \\
           --report out/sweep.md --save-model anamnesis/data/fusion-logistic.json

The objective is mean evidence recall@10 over scored questions (LoCoMo categories 1-4,
LongMemEval turn evidence without abstention, BEAM questions with evidence). The
neighbour and session channels are dumped as seeded by the dump configuration's own
weights; the sweep re-weights their lists but does not re-seed them (noted in the
report).
"""

from __future__ import annotations

import argparse
import gzip
import json
from pathlib import Path
from typing import Any

import numpy as np

from anamnesis.bench import datasets
from anamnesis.bench.fitting import newton_logistic
from anamnesis.bench.metrics import recall_at_k
from anamnesis.bench.presets import BENCH_PRESETS
from anamnesis.bench.runner import dev_questions
from anamnesis.bench.tokens import CachingEmbedder
from anamnesis.config import SearchConfig
from anamnesis.embed import get_embedder
from anamnesis.retrieve.fusion import LogisticFusion, channel_features
from anamnesis.store.base import Candidate

#: The channels dumped (every candidate channel of issue 5), seeded as in ``full``.
SWEEP_CHANNELS = BENCH_PRESETS["full-equal"].channels
#: Candidates per channel in the dump (the sweep cuts them to ``--depth``).
DUMP_DEPTH = 100
#: Weight grid of the coordinate ascent (0 switches a channel off).
GRID = (0.0, 0.25, 0.5, 0.75, 1.0, 1.5, 2.0, 3.0)


def sweep_config() -> SearchConfig:
    """The dump configuration: every channel, seeded like the ``full`` preset."""
    return BENCH_PRESETS["full"].with_(channels=SWEEP_CHANNELS, candidates=DUMP_DEPTH, fusion="rrf")


def dump(
    name: str,
    data: Path,
    out: Path,
    cache_dir: Path | None,
    limit: int | None,
    preset: str | None = None,
) -> None:
    """Write one JSON line per scored question with every channel's candidates.

    With ``preset``, the channels are that preset's, seeded as it seeds them, and each
    line also holds the preset's own ranking (``fused``: fusion and every post-fusion
    stage, 50 deep) for comparison.
    """
    dataset = datasets.load(name, data, limit=limit)
    embedder = get_embedder("minilm")
    caching = CachingEmbedder.with_cache_dir(embedder, cache_dir)
    config = sweep_config() if preset is None else BENCH_PRESETS[preset]
    out.parent.mkdir(parents=True, exist_ok=True)
    with gzip.open(out, "wt", encoding="utf-8") as handle:
        for dev in dev_questions(dataset, caching, config, out.parent / "stores"):
            key, q = dev.key, dev.question
            lists = dev.retriever.candidates(dev.request)
            record: dict[str, Any] = {
                "dataset": name,
                "case": dev.case.id,
                "id": q.id,
                "category": q.category,
                "evidence": list(q.evidence),
                "channels": {
                    c: [[key[x.episode_id], x.score] for x in lst] for c, lst in lists.items()
                },
            }
            if preset is not None:
                ranked = dev.retriever.rank(dev.request)[:50]
                record["fused"] = [key[f.episode_id] for f in ranked]
            handle.write(json.dumps(record) + "\n")


# -- evaluation on dumps ----------------------------------------------------------------------
def load_dump(path: Path) -> list[dict[str, Any]]:
    with gzip.open(path, "rt", encoding="utf-8") as handle:
        return [json.loads(line) for line in handle]


def rrf_rank(record: dict[str, Any], weights: dict[str, float], k: float, depth: int) -> list[str]:
    score: dict[str, float] = {}
    for name, items in record["channels"].items():
        w = weights.get(name, 0.0)
        if not w:
            continue
        for rank, (key, _) in enumerate(items[:depth], start=1):
            score[key] = score.get(key, 0.0) + w / (k + rank)
    return sorted(score, key=lambda x: -score[x])


def evaluate(records, rank, ks=(10, 20, 50)) -> dict[str, Any]:
    """Mean recall@k overall and recall@10 by category."""
    per_cat: dict[str, list[float]] = {}
    rows = []
    for r in records:
        ranked = rank(r)
        values = [recall_at_k(ranked, r["evidence"], k) for k in ks]
        rows.append(values)
        per_cat.setdefault(r["category"], []).append(values[0])
    arr = np.array(rows)
    return {
        **{f"R@{k}": float(arr[:, i].mean()) for i, k in enumerate(ks)},
        "by_category": {c: float(np.mean(v)) for c, v in sorted(per_cat.items())},
        "n": len(records),
    }


def coordinate_ascent(splits, channels, k, depth, passes=3) -> dict[str, float]:
    """RRF weights maximising recall@10 averaged over the datasets in ``splits`` (each
    dataset weighs the same, whatever its number of questions), one channel at a time."""
    weights = {c: 1.0 for c in channels}

    def objective(w):
        return float(
            np.mean(
                [
                    evaluate(recs, lambda r: rrf_rank(r, w, k, depth), ks=(10,))["R@10"]
                    for recs in splits
                ]
            )
        )

    best = objective(weights)
    for _ in range(passes):
        improved = False
        for c in channels:
            for value in GRID:
                trial = {**weights, c: value}
                if not any(trial.values()):
                    continue
                score = objective(trial)
                if score > best + 1e-9:
                    best, weights, improved = score, trial, True
        if not improved:
            break
    return weights


def features(record, channels, k, depth):
    lists = {
        name: [Candidate(key, float(score)) for key, score in items[:depth]]
        for name, items in record["channels"].items()
    }
    ids, rows = channel_features(lists, channels, k)
    evidence = set(record["evidence"])
    labels = [1.0 if i in evidence else 0.0 for i in ids]
    return ids, np.asarray(rows, dtype=float), np.asarray(labels)


def fit_logistic(records, channels, k, depth, l2=1.0, trained_on="") -> LogisticFusion:
    """Newton's method on L2-regularised logistic loss over all candidates."""
    xs, ys = [], []
    for r in records:
        _, x, y = features(r, channels, k, depth)
        if len(x):
            xs.append(x)
            ys.append(y)
    x, y = np.concatenate(xs), np.concatenate(ys)
    mean, scale = x.mean(0), x.std(0) + 1e-9
    z = np.c_[(x - mean) / scale, np.ones(len(x))]
    w = newton_logistic(z, y, l2)
    return LogisticFusion(
        channels=tuple(channels),
        mean=tuple(float(v) for v in mean),
        scale=tuple(float(v) for v in scale),
        coef=tuple(float(v) for v in w[:-1]),
        intercept=float(w[-1]),
        k=k,
        trained_on=trained_on,
    )


def logistic_rank(model: LogisticFusion, depth: int):
    def rank(record):
        ids, x, _ = features(record, model.channels, model.k, depth)
        if not ids:
            return []
        s = ((x - np.asarray(model.mean)) / np.asarray(model.scale)) @ np.asarray(model.coef)
        return [ids[i] for i in np.argsort(-s, kind="stable")]

    return rank


def fmt(result) -> str:
    cats = " ".join(f"{c} {100 * v:.1f}" for c, v in result["by_category"].items())
    return (
        f"R@10 {100 * result['R@10']:.1f} | R@20 {100 * result['R@20']:.1f} | "
        f"R@50 {100 * result['R@50']:.1f} | R@10 by category: {cats}"
    )


def halves(records):
    """Split A (the first half of the cases, in sorted order) and split B (the rest)."""
    cases = sorted({r["case"] for r in records})
    first = set(cases[: len(cases) // 2])
    return [r for r in records if r["case"] in first], [
        r for r in records if r["case"] not in first
    ]


def sweep(paths: list[Path], report: Path | None, save_model: Path | None, k: float, depth: int):
    dumps = {p.name.split(".")[0]: load_dump(p) for p in paths}
    splits = {name: halves(records) for name, records in dumps.items()}
    present = dict.fromkeys(c for rs in dumps.values() for r in rs for c in r["channels"])
    channels = [c for c in SWEEP_CHANNELS if c in present]
    channels += [c for c in present if c not in channels]
    lines = [
        "# Fusion sweep",
        "",
        "Every dataset is split by case (sorted ids): split A = the first half, B = the rest "
        + ", ".join(f"{n} {len(a)}/{len(b)} questions" for n, (a, b) in splits.items())
        + f". RRF k = {k}, depth {depth} per channel. Objective: recall@10, averaged over "
        "datasets. Weights and models are fitted on the A splits of every dataset and "
        "reported on the B splits (held out), and the other way round.",
        "",
    ]

    def show(title, rank):
        lines.append(f"- **{title}**")
        for name, (a, b) in splits.items():
            lines.append(f"  - {name} A: {fmt(evaluate(a, rank))}")
            lines.append(f"  - {name} B: {fmt(evaluate(b, rank))}")

    if all("fused" in r for rs in dumps.values() for r in rs):
        show("the dumped preset as it ranks (fusion and post-fusion stages)", lambda r: r["fused"])
    show("hybrid (lexical 1, dense 1)", lambda r: rrf_rank(r, {"lexical": 1, "dense": 1}, k, depth))
    show("dense alone", lambda r: rrf_rank(r, {"dense": 1}, k, depth))
    equal = {c: 1.0 for c in channels}
    show("all channels, equal weights", lambda r: rrf_rank(r, equal, k, depth))
    for train, test in (("A", "B"), ("B", "A")):
        index = 0 if train == "A" else 1
        train_sets = [pair[index] for pair in splits.values()]
        weights = coordinate_ascent(train_sets, channels, k, depth)
        lines.append(f"\nRRF weights swept on the {train} splits: `{json.dumps(weights)}`")
        show(
            f"swept RRF (fit on {train}, held out: {test})",
            lambda r, w=weights: rrf_rank(r, w, k, depth),
        )
        model = fit_logistic(
            [r for rs in train_sets for r in rs], channels, k, depth, trained_on=f"{train} splits"
        )
        show(f"logistic (fit on {train}, held out: {test})", logistic_rank(model, depth))
        if train == "A":
            final = model
    for name, records in dumps.items():
        others = [n for n in dumps if n != name]
        if not others:
            continue
        model = fit_logistic(records, channels, k, depth, trained_on=f"all of {name}")
        lines.append(f"\nLogistic fit on all of {name}, evaluated on the others:")
        for other in others:
            lines.append(f"  - {other}: {fmt(evaluate(dumps[other], logistic_rank(model, depth)))}")
    lines.append(
        "\nLogistic coefficients of the model fit on the A splits "
        "(standardised features; rr = k/(k+rank), s = score/top):"
    )
    for j, c in enumerate(final.channels):
        lines.append(f"- {c}: rr {final.coef[2 * j]:+.3f}, s {final.coef[2 * j + 1]:+.3f}")
    text = "\n".join(lines) + "\n"
    print(text)
    if report:
        report.parent.mkdir(parents=True, exist_ok=True)
        report.write_text(text, encoding="utf-8")
    if save_model:
        save_model.write_text(json.dumps(final.to_dict(), indent=1) + "\n", encoding="utf-8")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    sub = parser.add_subparsers(dest="command", required=True)
    d = sub.add_parser("dump")
    d.add_argument("dataset", choices=("locomo", "longmemeval", "beam"))
    d.add_argument("--data", type=Path, required=True)
    d.add_argument("--out", type=Path, required=True)
    d.add_argument("--embedding-cache-dir", type=Path)
    d.add_argument("--limit", type=int)
    d.add_argument("--config", help="dump this preset's channels (default: every channel)")
    s = sub.add_parser("sweep")
    s.add_argument("dumps", type=Path, nargs="+", help="the first one is the dev dataset")
    s.add_argument("--report", type=Path)
    s.add_argument("--save-model", type=Path)
    s.add_argument("--k", type=float, default=60.0)
    s.add_argument("--depth", type=int, default=50)
    args = parser.parse_args(argv)
    if args.command == "dump":
        dump(args.dataset, args.data, args.out, args.embedding_cache_dir, args.limit, args.config)
    else:
        sweep(args.dumps, args.report, args.save_model, args.k, args.depth)


if __name__ == "__main__":
    main()
