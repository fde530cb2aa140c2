"""Retrieval metrics and the statistics around them. Pure functions, no I/O.

``ranked`` is always a list of evidence keys in rank order (best first, no
duplicates unless noted); ``evidence`` the set of keys that answer the question.

Two NDCG variants live here on purpose:

* ``ndcg_at_k`` is textbook binary NDCG: gain 1 per relevant item, discount
  ``log2(rank + 1)``, ideal = all evidence at the top. Used for LoCoMo and BEAM.
* ``longmemeval_retrieval`` reproduces LongMemEval's ``src/retrieval/eval_utils.py``
  exactly, including its DCG (the first *two* ranks undiscounted) and an ideal DCG
  computed over every relevant item in the corpus. Used for the LongMemEval tables
  so our numbers are comparable with published ones.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np

#: z for two-sided 95% intervals.
Z_95 = 1.959963984540054
#: Bootstrap resamples: enough for stable 95% percentiles at our sample sizes.
BOOTSTRAP_RESAMPLES = 2000


# -- per-question metrics ---------------------------------------------------------------------


def recall_at_k(ranked: Sequence[str], evidence: Iterable[str], k: int) -> float:
    """Fraction of the evidence found in the top ``k``. Undefined (nan) without evidence."""
    wanted = set(evidence)
    if not wanted:
        return math.nan
    return len(wanted.intersection(ranked[:k])) / len(wanted)


def hit_at_k(ranked: Sequence[str], evidence: Iterable[str], k: int) -> float:
    """1.0 when any evidence item is in the top ``k``, else 0.0 (nan without evidence)."""
    wanted = set(evidence)
    if not wanted:
        return math.nan
    return float(any(key in wanted for key in ranked[:k]))


def all_at_k(ranked: Sequence[str], evidence: Iterable[str], k: int) -> float:
    """1.0 when every evidence item is in the top ``k`` (nan without evidence)."""
    wanted = set(evidence)
    if not wanted:
        return math.nan
    return float(wanted.issubset(ranked[:k]))


def reciprocal_rank(ranked: Sequence[str], evidence: Iterable[str]) -> float:
    """1 / rank of the first evidence item; 0 when none was retrieved (nan without evidence)."""
    wanted = set(evidence)
    if not wanted:
        return math.nan
    for rank, key in enumerate(ranked, start=1):
        if key in wanted:
            return 1.0 / rank
    return 0.0


def ndcg_at_k(ranked: Sequence[str], evidence: Iterable[str], k: int) -> float:
    """Binary NDCG@k: ``sum rel_i / log2(i + 1)`` over ranks i = 1..k, over the ideal."""
    wanted = set(evidence)
    if not wanted:
        return math.nan
    dcg = sum(1.0 / math.log2(i + 1) for i, key in enumerate(ranked[:k], 1) if key in wanted)
    ideal = sum(1.0 / math.log2(i + 1) for i in range(1, min(len(wanted), k) + 1))
    return dcg / ideal


def budget_recall(
    ranked: Sequence[str], tokens: Sequence[int], evidence: Iterable[str], budget: int
) -> float:
    """Fraction of evidence inside the context an answerer would get within ``budget`` tokens.

    Hits are taken in rank order while their cumulative token count fits the budget;
    the first hit that does not fit ends the context.
    """
    wanted = set(evidence)
    if not wanted:
        return math.nan
    used = 0
    found: set[str] = set()
    for key, count in zip(ranked, tokens, strict=True):
        if used + count > budget:
            break
        used += count
        if key in wanted:
            found.add(key)
    return len(found) / len(wanted)


def dedupe(keys: Iterable[str]) -> list[str]:
    """Keys in first-occurrence order without repeats (e.g. turn hits mapped to sessions)."""
    return list(dict.fromkeys(keys))


# -- LongMemEval's official retrieval metrics -----------------------------------------------


def longmemeval_dcg(relevances: Sequence[float], k: int) -> float:
    """DCG as LongMemEval computes it: ``rel_1 + sum_{i>=2} rel_i / log2(i)``."""
    rel = np.asarray(relevances, dtype=float)[:k]
    if rel.size == 0:
        return 0.0
    return float(rel[0] + np.sum(rel[1:] / np.log2(np.arange(2, rel.size + 1))))


def longmemeval_retrieval(
    ranked: Sequence[str], correct: Iterable[str], n_relevant: int, k: int
) -> tuple[float, float, float]:
    """``(recall_any, recall_all, ndcg_any)`` at ``k``, as LongMemEval's ``evaluate_retrieval``.

    ``ranked`` may repeat ids (it does after mapping turns to sessions); ``n_relevant``
    is how many items of the whole corpus are relevant, which fixes the ideal DCG. As in
    the official code, ``recall_all`` is 1.0 and ``ndcg_any`` 0.0 when nothing is correct.
    """
    wanted = set(correct)
    top = set(ranked[:k])
    recall_any = float(any(doc in top for doc in wanted))
    recall_all = float(all(doc in top for doc in wanted))
    ideal = longmemeval_dcg([1.0] * n_relevant, k)
    actual = longmemeval_dcg([1.0 if doc in wanted else 0.0 for doc in ranked[:k]], k)
    return recall_any, recall_all, (actual / ideal if ideal else 0.0)


def longmemeval_turn2session(
    ranked_turns: Sequence[str],
    session_of: Callable[[str], str] | Mapping[str, str],
    correct_sessions: Iterable[str],
    n_relevant_turns: int,
    k: int,
    corpus_size: int,
) -> tuple[float, float, float]:
    """Turn rankings scored at session level, as ``evaluate_retrieval_turn2session``.

    Each ranked turn becomes its session (repeats kept); k grows until the top covers k
    distinct sessions or the corpus is exhausted, then ``longmemeval_retrieval`` runs
    with that effective k. ``n_relevant_turns`` counts the corpus turns that belong to
    a correct session; ``corpus_size`` is the number of turns in the corpus.
    """
    lookup = session_of.__getitem__ if isinstance(session_of, Mapping) else session_of
    sessions = [lookup(turn) for turn in ranked_turns]
    effective_k = k
    while effective_k <= corpus_size and len(set(sessions[:effective_k])) < k:
        if effective_k >= len(sessions):
            # A truncated ranking cannot reveal more sessions; the official loop would
            # only keep counting past its end.
            break
        effective_k += 1
    return longmemeval_retrieval(sessions, correct_sessions, n_relevant_turns, effective_k)


# -- aggregate statistics -------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Estimate:
    """A mean over questions with a 95% interval; ``n`` counts the defined values."""

    mean: float
    low: float
    high: float
    n: int

    def as_dict(self) -> dict[str, float | int]:
        """Plain dict for JSON."""
        return {"mean": self.mean, "low": self.low, "high": self.high, "n": self.n}


def wilson_interval(successes: float, n: int, z: float = Z_95) -> tuple[float, float]:
    """Wilson score interval for a binomial proportion (Wilson, 1927)."""
    if n == 0:
        return (math.nan, math.nan)
    p = successes / n
    denom = 1 + z * z / n
    centre = (p + z * z / (2 * n)) / denom
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / denom
    return (max(0.0, centre - half), min(1.0, centre + half))


def bootstrap_interval(
    values: Sequence[float], *, resamples: int = BOOTSTRAP_RESAMPLES, seed: int = 0
) -> tuple[float, float]:
    """Percentile bootstrap 95% interval of the mean (fixed seed: reports are reproducible)."""
    data = np.asarray(values, dtype=float)
    if data.size == 0:
        return (math.nan, math.nan)
    rng = np.random.default_rng(seed)
    means = data[rng.integers(0, data.size, size=(resamples, data.size))].mean(axis=1)
    return (float(np.percentile(means, 2.5)), float(np.percentile(means, 97.5)))


def estimate(values: Iterable[float]) -> Estimate:
    """Mean with a 95% interval: Wilson for 0/1 values, bootstrap otherwise. Ignores nan."""
    data = [v for v in values if not math.isnan(v)]
    if not data:
        return Estimate(math.nan, math.nan, math.nan, 0)
    mean = sum(data) / len(data)
    if all(v in (0.0, 1.0) for v in data):
        low, high = wilson_interval(sum(data), len(data))
    else:
        low, high = bootstrap_interval(data)
    return Estimate(mean, low, high, len(data))


def mcnemar_exact(a: Sequence[float], b: Sequence[float]) -> dict[str, float | int]:
    """Exact McNemar test on paired 0/1 outcomes (two-sided binomial on discordant pairs).

    Pairs where either value is nan are skipped. Returns the discordant counts
    (``a_only``: a succeeded and b failed) and the p-value.
    """
    a_only = b_only = 0
    for x, y in zip(a, b, strict=True):
        if math.isnan(x) or math.isnan(y):
            continue
        if x >= 0.5 > y:
            a_only += 1
        elif y >= 0.5 > x:
            b_only += 1
    n = a_only + b_only
    if n == 0:
        return {"a_only": 0, "b_only": 0, "p_value": 1.0}
    tail = sum(math.comb(n, i) for i in range(min(a_only, b_only) + 1)) / 2**n
    return {"a_only": a_only, "b_only": b_only, "p_value": min(1.0, 2 * tail)}


def paired_bootstrap(
    a: Sequence[float], b: Sequence[float], *, resamples: int = BOOTSTRAP_RESAMPLES, seed: int = 0
) -> dict[str, float]:
    """Mean difference ``a - b`` over paired questions with a bootstrap 95% interval and a
    two-sided p-value (share of resampled differences on the other side of zero, doubled)."""
    pairs = [(x, y) for x, y in zip(a, b, strict=True) if not (math.isnan(x) or math.isnan(y))]
    if not pairs:
        return {"diff": math.nan, "low": math.nan, "high": math.nan, "p_value": math.nan}
    diffs = np.asarray([x - y for x, y in pairs])
    rng = np.random.default_rng(seed)
    means = diffs[rng.integers(0, diffs.size, size=(resamples, diffs.size))].mean(axis=1)
    observed = float(diffs.mean())
    if observed == 0:
        p = 1.0
    else:
        p = float(min(1.0, 2 * np.mean(means <= 0 if observed > 0 else means >= 0)))
    return {
        "diff": observed,
        "low": float(np.percentile(means, 2.5)),
        "high": float(np.percentile(means, 97.5)),
        "p_value": p,
    }


def percentile(values: Sequence[float], q: float) -> float:
    """The q-th percentile (0-100, linear interpolation); nan for no values."""
    if not values:
        return math.nan
    return float(np.percentile(np.asarray(values, dtype=float), q))


def binary_metric(metric: str) -> str | None:
    """The 0/1 metric McNemar's test counts for ``metric``: the metric itself when it
    is already 0/1 per question (``hit@k``, ``recall_all@k``, ``recall_any@k``, whatever prefix it
    carries), else ``hit@k`` at the same k (``recall@10`` -> ``hit@10``); None for a
    metric with no cut-off (``mrr``)."""
    name = metric.rsplit(".", 1)[-1]
    if name.startswith(("hit@", "recall_all@", "recall_any@")):
        return metric
    if "@" not in name:
        return None  # no cut-off (MRR): nothing 0/1 to count
    return f"hit@{metric.rsplit('@', 1)[-1]}"
