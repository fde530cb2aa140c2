"""Leave one data set out for the default's fitted numbers: refit them on two data sets'
candidates, judge them on the third.

The default's fusion weights, its score mix and the strengths of its two priors were
chosen on the benchmarks (LoCoMo and BEAM for the weights and the mix; all three for
the priors). Rerunning the pipeline for every trial value would take hours, so this
module replays the last two steps of the pipeline offline, from the candidate dumps
that ``scripts/ranker_train.py dump`` writes (the ``full-priors`` pipeline's best 100
candidates per question, with each channel's rank and standardised score, whether the
candidate is dated in the time the question names, and whether it is a short asking
turn):

    score = sum_c w_c * max(0, (1 - m) / (k + rank_c) + m * z_c / k)
            * 1.3 ** in_window * exact ** in_calendar * factor ** (asks and no role)

``lodo`` fits the numbers by coordinate ascent on every data set but one (each data
set weighing the same) and judges the fit on the one left out, beside the shipped
numbers and beside plain hybrid fusion (lexical and dense at weight 1, no mix, no
priors) replayed over the same candidates; paired bootstrap intervals throughout.

The replay is an approximation, and says so: it sees only the 100 candidates the
shipped pipeline kept (a weight that would bring in an episode from outside them is
not credited), and a channel's score is standardised among those 100 rather than
over the channel's own list. ``fidelity`` prints how closely the replay of the numbers
a dump was made with reproduces that pipeline's own order. Figures for the default itself come
from the benchmark runs (``anamnesis bench lodo``), not from here.
"""

from __future__ import annotations

import gzip
import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np

from ..config import DEFAULT_RRF_K, PRESETS, SearchConfig
from ..retrieve.ranker import FEATURES, RANKED_CHANNELS
from ..retrieve.stages import TIME_MATCH_BOOST
from .metrics import paired_bootstrap

#: The recall cut-off of each data set (its issue-5 target metric).
CUTOFF = {"locomo": 10, "beam": 20, "longmemeval": 10}
#: The values coordinate ascent tries for each number.
WEIGHT_GRID = (0.0, 0.25, 0.5, 0.75, 1.0, 1.5, 2.0, 3.0, 4.0)
MIX_GRID = (0.0, 0.1, 0.2, 0.3, 0.4)
EXACT_GRID = (1.0, 1.5, 2.0, 3.0, 4.0)
FACTOR_GRID = (0.4, 0.6, 0.8, 1.0)
#: Sweeps over every number before coordinate ascent stops.
PASSES = 3

_COLUMN = {name: i for i, name in enumerate(FEATURES)}


@dataclass(frozen=True, slots=True)
class Numbers:
    """The fitted numbers of the default: channel weights, score mix, the calendar-time
    boost (``time_match``'s ``exact``) and the asking-turn factor (``question_prior``)."""

    weights: Mapping[str, float]
    mix: float
    exact: float
    factor: float
    window: float = TIME_MATCH_BOOST

    @classmethod
    def of(cls, config: SearchConfig) -> Numbers:
        """The numbers of a pipeline that runs the default's channels and priors."""
        options = config.stage_options
        return cls(
            weights={c: config.weights.get(c, 1.0) for c in RANKED_CHANNELS},
            mix=config.score_mix,
            exact=float(options.get("time_match", {}).get("exact", 1.0)),
            factor=float(options.get("question_prior", {}).get("factor", 1.0)),
        )

    @classmethod
    def shipped(cls) -> Numbers:
        """The default's own numbers."""
        return cls.of(PRESETS["default"])

    @classmethod
    def hybrid(cls) -> Numbers:
        """Plain hybrid fusion over the same candidates: BM25 and dense at weight 1."""
        weights = dict.fromkeys(RANKED_CHANNELS, 0.0) | {"lexical": 1.0, "dense": 1.0}
        return cls(weights=weights, mix=0.0, exact=1.0, factor=1.0, window=1.0)

    def describe(self) -> str:
        """One line: every number."""
        weights = ", ".join(f"{c} {w:g}" for c, w in self.weights.items())
        return f"{weights}; mix {self.mix:g}; exact {self.exact:g}; factor {self.factor:g}"


@dataclass(slots=True)
class Candidates:
    """One data set's dumped questions as arrays: ``ranks`` and ``z`` (questions ×
    candidates × channels; rank ``inf`` where a channel did not propose the candidate),
    the prior flags, which candidate is evidence, and the evidence count."""

    name: str
    ranks: np.ndarray
    z: np.ndarray
    in_window: np.ndarray
    in_calendar: np.ndarray
    asks: np.ndarray
    relevant: np.ndarray
    evidence: np.ndarray

    @classmethod
    def from_records(cls, name: str, records: Sequence[Mapping[str, Any]]) -> Candidates:
        depth = max(len(r["keys"]) for r in records)
        n, c = len(records), len(RANKED_CHANNELS)
        x = np.zeros((n, depth, len(FEATURES)))
        relevant = np.zeros((n, depth), dtype=bool)
        present = np.zeros((n, depth), dtype=bool)
        for i, r in enumerate(records):
            rows = np.asarray(r["features"], dtype=np.float64).reshape(-1, len(FEATURES))
            x[i, : len(rows)] = rows
            present[i, : len(rows)] = True
            relevant[i, : len(rows)] = np.isin(r["keys"], r["evidence"])
        rank_features = x[:, :, [_COLUMN[f"rank_{ch}"] for ch in RANKED_CHANNELS]]
        with np.errstate(divide="ignore"):
            ranks = np.where(rank_features > 0, np.round(10.0 / rank_features - 10.0), np.inf)
        ranks[~present] = np.inf
        no_role = x[:, :, _COLUMN["has_role"]] < 0.5
        return cls(
            name=name,
            ranks=ranks.reshape(n, depth, c),
            z=x[:, :, [_COLUMN[f"z_{ch}"] for ch in RANKED_CHANNELS]],
            in_window=x[:, :, _COLUMN["in_window"]] > 0.5,
            in_calendar=x[:, :, _COLUMN["in_calendar"]] > 0.5,
            asks=(x[:, :, _COLUMN["asks"]] > 0.5) & no_role & present,
            relevant=relevant,
            evidence=np.asarray([len(set(r["evidence"])) for r in records], dtype=np.float64),
        )

    def scores(self, numbers: Numbers, k: float = DEFAULT_RRF_K) -> np.ndarray:
        """The replayed score of every candidate (questions × candidates)."""
        w = np.asarray([numbers.weights.get(c, 0.0) for c in RANKED_CHANNELS])
        with np.errstate(invalid="ignore"):
            vote = (1.0 - numbers.mix) / (k + self.ranks) + numbers.mix * self.z / k
        vote = np.where(np.isfinite(self.ranks), np.maximum(vote, 0.0), 0.0)
        score = vote @ w
        score = score * np.where(self.in_window, numbers.window, 1.0)
        score = score * np.where(self.in_window & self.in_calendar, numbers.exact, 1.0)
        return score * np.where(self.asks, numbers.factor, 1.0)

    def measure(self, order: np.ndarray) -> dict[str, np.ndarray]:
        """Per question, for candidates in ``order`` (indices, best first): recall at the
        data set's cut-off, reciprocal rank of the first evidence, binary ndcg@5."""
        hits = np.take_along_axis(self.relevant, order, axis=1)
        cutoff = CUTOFF.get(self.name, 10)
        found = hits[:, :cutoff].sum(1) / self.evidence
        first = np.where(hits.any(1), hits.argmax(1) + 1, np.inf)
        gains = hits[:, :5] / np.log2(np.arange(2, 7))
        ideal = np.asarray(
            [(1.0 / np.log2(np.arange(2, 2 + min(int(e), 5)))).sum() for e in self.evidence]
        )
        return {"recall": found, "mrr": 1.0 / first, "ndcg@5": gains.sum(1) / ideal}

    def judge(self, numbers: Numbers) -> dict[str, np.ndarray]:
        """``measure`` of the replayed order under ``numbers`` (ties keep the fused order)."""
        return self.measure(np.argsort(-self.scores(numbers), axis=1, kind="stable"))

    def pipeline(self) -> dict[str, np.ndarray]:
        """``measure`` of the dumped pipeline's own order."""
        n, depth = self.relevant.shape
        return self.measure(np.broadcast_to(np.arange(depth), (n, depth)))


def load_dumps(paths: Iterable[Path]) -> dict[str, Candidates]:
    """Every dump's records, grouped by their ``dataset`` field."""
    grouped: dict[str, list[dict[str, Any]]] = {}
    for path in paths:
        with gzip.open(path, "rt", encoding="utf-8") as handle:
            for line in handle:
                record = json.loads(line)
                if record["features"]:
                    grouped.setdefault(record["dataset"], []).append(record)
    return {name: Candidates.from_records(name, rs) for name, rs in grouped.items()}


def objective(data: Sequence[Candidates], numbers: Numbers) -> float:
    """What the fit maximises: per data set the mean of recall and MRR, averaged over
    the data sets (each weighs the same, however many questions it has)."""
    values = []
    for d in data:
        m = d.judge(numbers)
        values.append((m["recall"].mean() + m["mrr"].mean()) / 2)
    return float(np.mean(values))


def fit(
    data: Sequence[Candidates],
    start: Numbers,
    passes: int = PASSES,
    frozen: Iterable[str] = (),
) -> Numbers:
    """Coordinate ascent from ``start`` over ``WEIGHT_GRID`` for each channel, then the
    mix, the calendar boost and the asking factor; a value must gain to be taken. The
    ``frozen`` numbers keep ``start``'s value."""
    best, value = start, objective(data, start)
    held = set(frozen)
    trials: list[tuple[str, tuple[float, ...]]] = [
        *((c, WEIGHT_GRID) for c in RANKED_CHANNELS),
        ("mix", MIX_GRID),
        ("exact", EXACT_GRID),
        ("factor", FACTOR_GRID),
    ]
    trials = [(name, grid) for name, grid in trials if name not in held]
    for _ in range(passes):
        moved = False
        for name, grid in trials:
            for v in grid:
                trial = _with(best, name, v)
                score = objective(data, trial)
                if score > value + 1e-9:
                    best, value, moved = trial, score, True
        if not moved:
            break
    return best


def _with(numbers: Numbers, name: str, value: float) -> Numbers:
    """``numbers`` with one channel weight, or one of the other numbers, set."""
    if name in RANKED_CHANNELS:
        return replace(numbers, weights={**numbers.weights, name: value})
    if name not in ("mix", "exact", "factor", "window"):
        raise ValueError(f"no number called {name!r}")
    return replace(numbers, **{name: value})  # type: ignore[arg-type]


def _cell(a: np.ndarray, b: np.ndarray) -> str:
    test = paired_bootstrap(list(a), list(b))
    return f"{100 * test['diff']:+.1f} [{100 * test['low']:+.1f}, {100 * test['high']:+.1f}]"


def fidelity(data: Mapping[str, Candidates], dumped: Numbers) -> list[str]:
    """Markdown rows: the dumped pipeline's own order against the replay of the numbers
    it ran with (``dumped``)."""
    lines = [
        "| data set (questions) | metric | pipeline | replay of its numbers |",
        "|---|---|---|---|",
    ]
    for name, d in data.items():
        own, replay = d.pipeline(), d.judge(dumped)
        for metric in ("recall", "mrr", "ndcg@5"):
            label = f"recall@{CUTOFF.get(name, 10)}" if metric == "recall" else metric
            lines.append(
                f"| {name} ({len(d.evidence)}) | {label} | {100 * own[metric].mean():.1f} "
                f"| {100 * replay[metric].mean():.1f} |"
            )
    return lines


def lodo(data: Mapping[str, Candidates]) -> tuple[list[str], dict[str, Numbers]]:
    """Markdown rows of the leave-one-data-set-out refit, and the numbers fitted for
    each data set left out (plus ``"all"``: fitted on every data set)."""
    shipped, hybrid = Numbers.shipped(), Numbers.hybrid()
    fitted = {
        name: fit([d for other, d in data.items() if other != name], shipped) for name in data
    }
    fitted["all"] = fit(list(data.values()), shipped)
    lines = [
        "| judged on (questions) | metric | hybrid | shipped | fitted on the others "
        "| fitted on all | shipped − hybrid | held out − hybrid | all − hybrid "
        "| held out − shipped |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for name, d in data.items():
        h, s, o, a = (d.judge(n) for n in (hybrid, shipped, fitted[name], fitted["all"]))
        for metric in ("recall", "mrr", "ndcg@5"):
            label = f"recall@{CUTOFF.get(name, 10)}" if metric == "recall" else metric
            means = " | ".join(f"{100 * m[metric].mean():.1f}" for m in (h, s, o, a))
            lines.append(
                f"| {name} ({len(d.evidence)}) | {label} | {means} "
                f"| {_cell(s[metric], h[metric])} | {_cell(o[metric], h[metric])} "
                f"| {_cell(a[metric], h[metric])} | {_cell(o[metric], s[metric])} |"
            )
    return lines, fitted


#: Each stage of the default as the numbers that switch it off: a channel's weight 0,
#: a prior's strength 1, no score mix. Its other numbers are refitted without it.
STAGES: dict[str, dict[str, float]] = {
    "speakers": {"speaker_lexical": 0.0},
    "prf": {"prf": 0.0},
    "session": {"session": 0.0},
    "replies": {"replies": 0.0},
    "roles": {"role_lexical": 0.0, "role_dense": 0.0},
    "time": {"temporal": 0.0, "window": 1.0, "exact": 1.0},
    "calendar boost": {"exact": 1.0},
    "question prior": {"factor": 1.0},
    "score mix": {"mix": 0.0},
}


def _switched_off(numbers: Numbers, changes: Mapping[str, float]) -> Numbers:
    for name, value in changes.items():
        numbers = _with(numbers, name, value)
    return numbers


def stage_lodo(data: Mapping[str, Candidates], stages: Iterable[str] = STAGES) -> list[str]:
    """Markdown rows: for each stage and each data set left out, the numbers refitted on
    the other data sets with the stage and without it, both judged on the one left out
    (with − without, paired). A stage that changes nothing on a data set (no candidate
    of its channel, no prior applied) shows a zero difference there."""
    shipped = Numbers.shipped()
    with_stage = {
        name: fit([d for other, d in data.items() if other != name], shipped) for name in data
    }
    lines = [
        "| stage | judged on | recall: with − without | MRR | ndcg@5 |",
        "|---|---|---|---|---|",
    ]
    for stage in stages:
        changes = STAGES[stage]
        for name, d in data.items():
            train = [x for other, x in data.items() if other != name]
            start = _switched_off(shipped, changes)
            without = fit(train, start, frozen=changes)
            a, b = d.judge(with_stage[name]), d.judge(without)
            cells = " | ".join(_cell(a[m], b[m]) for m in ("recall", "mrr", "ndcg@5"))
            lines.append(f"| {stage} | {name} | {cells} |")
    return lines
