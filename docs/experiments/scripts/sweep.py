"""The sweeps behind the default (BENCHMARKS.md, "Score-aware fusion and replies" and
"Calendar dates and asking turns").

Registers the swept presets and runs the ``anamnesis`` CLI with the given arguments:

- ``mix-M``: ``full-role`` with ``score_mix`` = M, the share of each channel's RRF vote
  taken from its z-scored score (``mix-0`` is ``full-role``, ``mix-0.2`` is ``full-mix``);
- ``replies-W``: ``full-mix`` plus the ``replies`` channel at weight W;
- ``dprf-W``: ``full-mix`` plus the ``dense_prf`` channel at weight W;
- ``no-C`` / ``x2-C``: ``full-replies`` without channel C / with C's weight doubled (a
  one-step probe around the default's weights under score-aware fusion);
  ``candidates-N``: ``full-replies`` with N candidates per channel;
- ``k-N``: ``full-replies`` with the RRF constant k = N (60 in every preset);
- ``qp-F``: ``full-replies`` then the ``question_prior`` stage with factor F (turns of
  at most 40 words; ``qp-F-Nw``: N words, ``qp-F-any``: any length);
- ``tx-B``: ``full-replies`` with ``time_match``'s extra boost B for the named calendar
  time itself; ``tx-B-qp-F``: both (``full-priors`` is ``tx-3.0-qp-0.6``);
- ``tx-3.0-relative`` / ``qp-0.6-roles``: ``full-priors`` with the boost for relative
  times too / with the question prior on turns with a chat role too;
- ``fp-dated``: ``full-priors`` then the ``dated`` stage; ``fp-x2-C``: ``full-priors``
  with role channel C's weight doubled; ``fp-exact-B``: ``full-priors`` with the
  calendar-date boost B instead of 3.

    python docs/experiments/scripts/sweep.py bench locomo --data ../shared/data/locomo10.json.gz \\
        --config mix-0,mix-0.1,mix-0.2,mix-0.3,mix-0.4

Each value is chosen on the first half of each data set's cases (in run order) and
reported on the second:

    python docs/experiments/scripts/sweep.py halves RESULTS recall@10

prints each configuration's mean metric over the scored questions of each half.

The learned ranker is fitted on one half and judged on the other
(``scripts/ranker_train.py``); with both ``full-ranker`` (the models fitted on the
first halves) and ``ranker-second`` (fitted on the second) in a run,

    python docs/experiments/scripts/sweep.py crossfit RESULTS OUT

writes the run's records to ``OUT`` with a ``ranker-heldout`` configuration: every
question ranked by the models that did not see its case.
"""

from __future__ import annotations

import json
import sys
from collections import defaultdict
from pathlib import Path

from anamnesis.bench import fitting
from anamnesis.bench.presets import BENCH_PRESETS, plus, then, without
from anamnesis.cli import main
from anamnesis.config import SearchConfig


def _doubled(base: SearchConfig, channel: str) -> SearchConfig:
    """``base`` with ``channel``'s weight doubled."""
    return base.with_(weights={**base.weights, channel: 2 * base.weights.get(channel, 1.0)})


for mix in (0, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6):
    BENCH_PRESETS[f"mix-{mix}"] = BENCH_PRESETS["full-role"].with_(score_mix=float(mix))
for weight in (0.5, 1.0, 2.0, 3.0, 4.0):
    BENCH_PRESETS[f"replies-{weight}"] = plus(BENCH_PRESETS["full-mix"], "replies", weight)
for weight in (1.0, 2.0):
    BENCH_PRESETS[f"dprf-{weight}"] = plus(BENCH_PRESETS["full-mix"], "dense_prf", weight)
_DEFAULT = BENCH_PRESETS["full-replies"]
for channel in _DEFAULT.channels:
    BENCH_PRESETS[f"no-{channel}"] = without(_DEFAULT, channel=channel)
    BENCH_PRESETS[f"x2-{channel}"] = _doubled(_DEFAULT, channel)
for k in (10, 15, 20, 30, 45, 90, 120):
    BENCH_PRESETS[f"k-{k}"] = _DEFAULT.with_(rrf_k=float(k))
_ASKS = then(_DEFAULT, "question_prior")
for factor in (0.5, 0.6, 0.7, 0.8, 0.9):
    for words in (15, 25, 40, 10**6):
        suffix = "" if words == 40 else "-any" if words == 10**6 else f"-{words}w"
        BENCH_PRESETS[f"qp-{factor}{suffix}"] = _ASKS.with_options(
            "question_prior", factor=factor, words=words
        )
for boost in (1.3, 1.6, 2.0, 3.0):
    BENCH_PRESETS[f"tx-{boost}"] = _DEFAULT.with_options("time_match", exact=boost)
    for factor in (0.6, 0.8):
        BENCH_PRESETS[f"tx-{boost}-qp-{factor}"] = _ASKS.with_options(
            "time_match", exact=boost
        ).with_options("question_prior", factor=factor)
_PRIORS = BENCH_PRESETS["full-priors"]
# The two rules of full-priors switched off (ablations): the extra boost for relative
# times too, the question prior for turns with a chat role too.
BENCH_PRESETS["tx-3.0-relative"] = _PRIORS.with_options("time_match", relative=True)
BENCH_PRESETS["qp-0.6-roles"] = _PRIORS.with_options("question_prior", roles=True)
for boost in (2.0, 4.0, 6.0):
    BENCH_PRESETS[f"fp-exact-{boost}"] = _PRIORS.with_options("time_match", exact=boost)
for channel in ("role_lexical", "role_dense"):
    BENCH_PRESETS[f"fp-x2-{channel}"] = _doubled(_PRIORS, channel)
#: ``full-priors`` then the ``dated`` stage (turns that mention a time, for "when" and
#: "how long" questions).
BENCH_PRESETS["fp-dated"] = then(_PRIORS, "dated")
for candidates in (100,):
    BENCH_PRESETS[f"candidates-{candidates}"] = _DEFAULT.with_(candidates=candidates)


def crossfit(results: Path, out: Path) -> None:
    """Copy a run's records to ``out`` with one more configuration, ``ranker-heldout``:
    each question as ranked by the models fitted on the other half of the cases
    (``full-ranker``'s and ``ranker-second``'s), so every question is judged by a model
    that has not seen its case."""
    records = [json.loads(line) for line in (results / "records.jsonl").open()]
    heldout = fitting.crossfit(records, "full-ranker", "ranker-second", "ranker-heldout")
    out.mkdir(parents=True, exist_ok=True)
    with (out / "records.jsonl").open("w") as handle:
        for r in [*records, *heldout]:
            handle.write(json.dumps(r) + "\n")


def halves(results: Path, metric: str) -> None:
    """Print each configuration's mean ``metric`` on the first and second half of the
    cases (questions without the metric, abstention and LoCoMo category 5 excluded)."""
    records = [json.loads(line) for line in (results / "records.jsonl").open()]
    first = fitting.first_half(fitting.scored(records))
    values: dict[str, dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
    for r in records:
        value = r["metrics"].get(metric)
        if value is None or r["abstention"] or r["category"] == "adversarial":
            continue
        values[r["config"]]["A" if r["case"] in first else "B"].append(value)
    print(f"{'config':<12} {'A (n)':>12} {'B (n)':>12}")
    for config, by_half in values.items():
        cells = [f"{100 * sum(v) / len(v):.1f} ({len(v)})" for v in (by_half["A"], by_half["B"])]
        print(f"{config:<12} {cells[0]:>12} {cells[1]:>12}")


if __name__ == "__main__":
    if sys.argv[1:2] == ["halves"]:
        halves(Path(sys.argv[2]), sys.argv[3])
    elif sys.argv[1:2] == ["crossfit"]:
        crossfit(Path(sys.argv[2]), Path(sys.argv[3]))
    else:
        main(sys.argv[1:])
