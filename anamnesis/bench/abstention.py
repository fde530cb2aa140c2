"""Calibrating the abstention rule: a threshold sweep over a finished run's records.

Each record of a run carries the rule's inputs (``signals``: the best dense cosine
and how many hits the lexical channel proposed). For every threshold the sweep
reports what rejecting would do: the headline recall on answerable questions (a
rejected question counts as retrieving nothing) and how often answerable and
unanswerable questions (LoCoMo category 5, LongMemEval ``_abs``, BEAM abstention)
would get an empty result. No search is re-run, so every threshold is compared on
the same questions.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from ..retrieve.filters import rejects
from .scoring import HEADLINE

#: The best-cosine thresholds swept unless others are given.
THRESHOLDS = (0.0, 0.1, 0.15, 0.2, 0.25, 0.3, 0.35, 0.4, 0.45, 0.5)


@dataclass(frozen=True, slots=True)
class SweepRow:
    """What one threshold does."""

    threshold: float
    recall: float
    answerable_empty: float
    unanswerable_empty: float
    answerable: int
    unanswerable: int


def headline_metric(dataset: str) -> str:
    """The recall the sweep reports by default: ``dataset``'s headline metric."""
    return HEADLINE.get(dataset, ("recall@10",))[0]


def sweep(
    records: Sequence[dict[str, Any]],
    config: str,
    thresholds: Sequence[float],
    *,
    dataset: str,
    rule: str = "r1",
    metric: str | None = None,
) -> list[SweepRow]:
    """The effect of each threshold on ``config``'s records (which must carry signals)."""
    metric = metric or headline_metric(dataset)
    chosen = [r for r in records if r["config"] == config and "signals" in r]
    if not chosen:
        raise ValueError(f"no records of config {config!r} with abstention signals")
    answerable = [r for r in chosen if not r["abstention"]]
    unanswerable = [r for r in chosen if r["abstention"]]
    rows = []
    for threshold in thresholds:
        recalls, empty_a, empty_u = [], [], []
        for record in answerable:
            rejected = rejects(record["signals"], threshold, rule)
            value = record["metrics"].get(metric)
            if value is not None and not math.isnan(value):
                recalls.append(0.0 if rejected else value)
            empty_a.append(float(rejected or record.get("returned", 1) == 0))
        for record in unanswerable:
            rejected = rejects(record["signals"], threshold, rule)
            empty_u.append(float(rejected or record.get("returned", 1) == 0))
        rows.append(
            SweepRow(
                threshold=threshold,
                recall=_mean(recalls),
                answerable_empty=_mean(empty_a),
                unanswerable_empty=_mean(empty_u),
                answerable=len(answerable),
                unanswerable=len(unanswerable),
            )
        )
    return rows


def markdown(rows: Sequence[SweepRow], metric: str, rule: str) -> str:
    """The sweep as a Markdown table."""
    out = [
        f"| τ ({rule}) | {metric} (answerable) | empty, answerable | empty, unanswerable |",
        "|---|---|---|---|",
    ]
    for row in rows:
        out.append(
            f"| {row.threshold:.2f} | {100 * row.recall:.1f} | {100 * row.answerable_empty:.1f}"
            f" | {100 * row.unanswerable_empty:.1f} |"
        )
    if rows:
        out.append(
            f"\n{rows[0].answerable} answerable and {rows[0].unanswerable} unanswerable questions."
        )
    return "\n".join(out)


def _mean(values: Sequence[float]) -> float:
    return sum(values) / len(values) if values else math.nan
