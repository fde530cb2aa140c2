"""Fit the learned ranker (``anamnesis/retrieve/ranker.py``) and judge it on held-out cases.

Three steps, all reproducible:

1. ``dump``: ingest every case of a benchmark as ``anamnesis bench`` does (same loaders,
   stores and as-of filter), run the pipeline the ranker reorders on each scored
   question (``ranker_fit.BASE_CONFIG``: the default's channels and priors; before issue
   22's refit it was ``full-priors``, which the dumps in BENCHMARKS.md ran) and write
   the ranker's features of its best 100 candidates, with which of them are evidence.
   Nothing is fitted here. ``anamnesis bench lodo --dumps`` replays these dumps too.

       python scripts/ranker_train.py dump locomo --data ../shared/data/locomo10.json.gz \\
           --embedding-cache-dir VECTORS --out out/locomo.ranker.jsonl.gz

2. ``fit``: an L2-regularised logistic model per chat kind (named people, or a user and
   an assistant) over every candidate of the first half of each dump's cases (in run
   order, as ``docs/experiments/scripts/sweep.py halves`` splits them), judged on the
   second half; then the other way round. Prints recall before and after reordering
   for both, and with ``--save`` writes the models fitted on the first halves (the
   bundled ones); with ``--save-second`` those fitted on the second halves (the
   ``ranker-second`` preset's), so that every question can be judged by a model that
   has not seen its case (``bench.fitting.crossfit``).

       python scripts/ranker_train.py fit out/locomo.ranker.jsonl.gz out/beam.ranker.jsonl.gz \\
           out/lme.ranker.jsonl.gz out/lme-edge.ranker.jsonl.gz \\
           --save anamnesis/data/ranker-logistic.json \\
           --save-second anamnesis/data/ranker-logistic-second-halves.json

3. ``lodo``: leave one data set out. For each data set of the dumps (a dump's
   ``dataset`` field: both LongMemEval dumps are one data set), fit on the dumps of
   the other data sets only and judge on every case of this one: the question issue
   22 asks of every fitted default. Two fits: per chat kind (a kind no other data set
   has falls back to the pooled model, never to the bundled one, which saw every data
   set), and one pooled model for every kind. Prints recall@k, all@k and MRR of the
   pipeline's order and of each fit, with paired bootstrap 95% intervals.

       python scripts/ranker_train.py lodo out/locomo.ranker.jsonl.gz out/beam.ranker.jsonl.gz \
           out/lme.ranker.jsonl.gz

   A dump is named by its file name up to the first dot. The LongMemEval dumps of both
   embedders (``dump longmemeval ... --embedder edge``) train the model of user–assistant
   chats to read either one's dense ranks: fitted on the MiniLM dump alone, it lost
   turn recall under the edge embedder. ``--without FEATURE`` zeroes a feature in
   every dump first: the same fit without it, an ablation row.
"""

from __future__ import annotations

import argparse
import gzip
import json
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from anamnesis.bench import datasets
from anamnesis.bench.fitting import first_half, fit_pooled
from anamnesis.bench.metrics import paired_bootstrap
from anamnesis.bench.runner import dev_questions
from anamnesis.bench.tokens import CachingEmbedder
from anamnesis.embed import get_embedder
from anamnesis.retrieve.ranker import (
    FEATURES,
    RANKER_DEPTH,
    RankerModel,
    candidate_features,
)
from anamnesis.retrieve.ranker_fit import (
    BASE_CONFIG,
    example_kind,
    fit_ranker,
    save_ranker,
)

#: Recall cut-off reported per data set (the issue-5 target metrics).
CUTOFF = {"locomo": 10, "beam": 20, "longmemeval": 10}


def dump(
    name: str,
    data: Path,
    out: Path,
    cache_dir: Path | None,
    embedder: str,
    depth: int = RANKER_DEPTH,
    candidates: int | None = None,
) -> None:
    """Write one JSON line per scored question: its candidates' features and labels
    (``candidates``: how many each channel proposes, if not the base preset's)."""
    dataset = datasets.load(name, data)
    caching = CachingEmbedder.with_cache_dir(get_embedder(embedder), cache_dir)
    config = BASE_CONFIG
    if candidates is not None:
        config = config.with_(candidates=candidates)
    out.parent.mkdir(parents=True, exist_ok=True)
    with gzip.open(out, "wt", encoding="utf-8") as handle:
        for dev in dev_questions(dataset, caching, config, out.parent / "stores"):
            head = dev.retriever.rank(dev.request)[:depth]
            record = {
                "dataset": name,
                "case": dev.case.id,
                "id": dev.question.id,
                "category": dev.question.category,
                "evidence": list(dev.question.evidence),
                "keys": [dev.key[f.episode_id] for f in head],
                "features": candidate_features(dev.request, head).round(6).tolist(),
            }
            handle.write(json.dumps(record) + "\n")


def load(
    path: Path, without: Sequence[str] = ()
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """A dump's records, split into the first and second half of its cases; the
    ``without`` features are zeroed (a constant column gets no weight)."""
    with gzip.open(path, "rt", encoding="utf-8") as handle:
        records = [json.loads(line) for line in handle]
    columns = [FEATURES.index(name) for name in without]
    for r in records:
        for row in r["features"]:
            for c in columns:
                row[c] = 0.0
    first = first_half(records)
    return (
        [r for r in records if r["case"] in first],
        [r for r in records if r["case"] not in first],
    )


Order = Callable[[dict[str, Any]], list[str]]


def as_fused(record: dict[str, Any]) -> list[str]:
    """The pipeline's own order."""
    return record["keys"]


def by_model(models: dict[str, RankerModel]) -> Order:
    def order(record: dict[str, Any]) -> list[str]:
        if not record["features"]:
            return []
        logits = models[example_kind(record)].logits(
            np.asarray(record["features"], dtype=np.float64)
        )
        return [record["keys"][i] for i in np.argsort(-logits, kind="stable")]

    return order


def recall(records: Sequence[dict[str, Any]], order: Order, k: int) -> tuple[float, float]:
    """Mean evidence recall@k and the share of questions with all evidence in the top k."""
    fractions = []
    for r in records:
        top = set(order(r)[:k])
        fractions.append(sum(e in top for e in r["evidence"]) / len(r["evidence"]))
    return 100 * float(np.mean(fractions)), 100 * float(np.mean([f == 1.0 for f in fractions]))


def report(
    paths: Sequence[Path],
    save: Path | None,
    save_second: Path | None = None,
    without: Sequence[str] = (),
) -> None:
    """Fit on one half of every dump, judge on the other half, both ways round."""
    halves = {p: load(p, without) for p in paths}
    names = {p: p.name.split(".")[0] for p in paths}
    print("| fitted on | judged on | metric | full-priors | ranker, both chat kinds |")
    print("|---|---|---|---|---|")
    for fitted, judged in ((0, 1), (1, 0)):
        label = "first" if fitted == 0 else "second"
        models = fit_ranker(
            [r for p in paths for r in halves[p][fitted]],
            trained_on=f"{label} halves of " + ", ".join(names[p] for p in paths),
        )
        for p in paths:
            test = halves[p][judged]
            where = f"{names[p]} {'second' if judged else 'first'} half ({len(test)})"
            row = f"| {label} halves | {where} |"
            for k in (CUTOFF.get(names[p], 10), 50):
                before, before_all = recall(test, as_fused, k)
                after, after_all = recall(test, by_model(models), k)
                print(f"{row} recall@{k} | {before:.1f} | {after:.1f} |")
                print(f"{row} all@{k} | {before_all:.1f} | {after_all:.1f} |")
            depth = max((len(r["keys"]) for r in test), default=0)
            whole, _ = recall(test, as_fused, depth)
            print(f"{row} recall@{depth} | {whole:.1f} | {whole:.1f} |")
        target = save if fitted == 0 else save_second
        if target is not None:
            save_ranker(models, target)
            print(f"saved the models fitted on the {label} halves to {target}", file=sys.stderr)


def per_question(records: Sequence[dict[str, Any]], order: Order, k: int) -> dict[str, list[float]]:
    """Per question: evidence recall@k, all evidence in the top k (0/1), reciprocal rank
    of the first evidence within the candidates (0 when none is there)."""
    out: dict[str, list[float]] = {"recall": [], "all": [], "mrr": []}
    for r in records:
        ranked = order(r)
        evidence = set(r["evidence"])
        found = sum(e in set(ranked[:k]) for e in evidence) / len(evidence)
        first = next((i for i, key in enumerate(ranked, 1) if key in evidence), None)
        out["recall"].append(found)
        out["all"].append(float(found == 1.0))
        out["mrr"].append(1.0 / first if first else 0.0)
    return out


def leave_one_out(paths: Sequence[Path], without: Sequence[str] = ()) -> None:
    """Fit on the other data sets, judge on each one whole, both fits."""
    records: dict[str, list[dict[str, Any]]] = {}
    for path in paths:
        first, second = load(path, without)
        for r in first + second:
            records.setdefault(r["dataset"], []).append(r)
    print(
        "| judged on (questions) | fitted on | metric | full-priors | ranker per kind | diff "
        "| pooled ranker | diff |"
    )
    print("|---|---|---|---|---|---|---|---|")
    for judged, test in records.items():
        train = [r for name, rs in records.items() if name != judged for r in rs]
        fitted_on = " + ".join(sorted(n for n in records if n != judged))
        pooled = fit_pooled(train, trained_on=f"all but {judged}")
        # Fitting the pooled model proved there is evidence to learn from; a kind the
        # other data sets lack keeps the pooled model.
        per_kind = fit_ranker(train, base=pooled, trained_on=f"all but {judged}")
        k = CUTOFF.get(judged, 10)
        base = per_question(test, as_fused, k)
        fits = (per_question(test, by_model(per_kind), k), per_question(test, by_model(pooled), k))
        for metric, label in (("recall", f"recall@{k}"), ("all", f"all@{k}"), ("mrr", "MRR")):
            cells = [f"{100 * np.mean(base[metric]):.1f}"]
            for fit in fits:
                gain = paired_bootstrap(fit[metric], base[metric])
                interval = f"[{100 * gain['low']:+.1f}, {100 * gain['high']:+.1f}]"
                cells += [
                    f"{100 * np.mean(fit[metric]):.1f}",
                    f"{100 * gain['diff']:+.1f} {interval}",
                ]
            print(f"| {judged} ({len(test)}) | {fitted_on} | {label} | " + " | ".join(cells) + " |")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    d = sub.add_parser("dump", help="features and labels of full-priors' best candidates")
    d.add_argument("dataset", choices=("locomo", "longmemeval", "beam"))
    d.add_argument("--data", type=Path, required=True)
    d.add_argument("--out", type=Path, required=True)
    d.add_argument("--embedding-cache-dir", type=Path)
    d.add_argument("--embedder", default="minilm")
    d.add_argument("--depth", type=int, default=RANKER_DEPTH, help="candidates per question")
    d.add_argument("--candidates", type=int, help="candidates per channel (default: the preset's)")
    f = sub.add_parser("fit", help="fit on first halves, judge on second halves (and back)")
    f.add_argument("dumps", type=Path, nargs="+")
    f.add_argument("--save", type=Path, help="write the models fitted on the first halves")
    f.add_argument(
        "--save-second",
        type=Path,
        help="write the models fitted on the second halves (to judge the first halves)",
    )
    f.add_argument(
        "--without",
        action="append",
        default=[],
        choices=FEATURES,
        metavar="FEATURE",
        help="zero this feature before fitting (an ablation row); repeatable",
    )
    o = sub.add_parser("lodo", help="leave one data set out: fit on the others, judge on it")
    o.add_argument("dumps", type=Path, nargs="+")
    o.add_argument(
        "--without",
        action="append",
        default=[],
        choices=FEATURES,
        metavar="FEATURE",
        help="zero this feature before fitting; repeatable",
    )
    args = parser.parse_args(argv)
    if args.command == "lodo":
        leave_one_out(args.dumps, args.without)
    elif args.command == "dump":
        dump(
            args.dataset,
            args.data,
            args.out,
            args.embedding_cache_dir,
            args.embedder,
            args.depth,
            args.candidates,
        )
    else:
        report(args.dumps, args.save, args.save_second, args.without)


if __name__ == "__main__":
    main()
