"""Turning per-question records into summary numbers: means with 95% intervals,
per-category breakdowns, speed, and paired comparisons between configurations."""

from __future__ import annotations

import itertools
import math
from collections import defaultdict
from collections.abc import Iterable, Sequence
from typing import Any

from . import metrics as m
from .runner import FULL_CONTEXT, RunResult
from .scoring import HEADLINE

#: Metrics shown per category (all metrics are kept in the overall block).
CATEGORY_METRICS = {
    "locomo": ("recall@5", "recall@10", "hit@10", "mrr", "budget_recall@2000"),
    "beam": ("recall@10", "recall@20", "hit@20", "mrr", "budget_recall@2000"),
    "longmemeval": (
        "lme.session.recall_any@5",
        "lme.session.recall_all@5",
        "lme.session.ndcg_any@5",
        "lme.turn.recall_all@10",
        "budget_recall@2000",
    ),
}

#: The group a question falls in for reporting: reported apart from the main table.
SEPARATE_GROUP = {
    "locomo": "adversarial (category 5)",
    "longmemeval": "abstention (_abs)",
    "beam": "abstention",
}


def _estimates(records: Sequence[dict[str, Any]], names: Iterable[str]) -> dict[str, Any]:
    return {n: m.estimate(r["metrics"][n] for r in records).as_dict() for n in names}


def _latency(records: Sequence[dict[str, Any]]) -> dict[str, float]:
    values = [r["latency_ms"] for r in records]
    return {
        "p50": m.percentile(values, 50),
        "p95": m.percentile(values, 95),
        "mean": sum(values) / len(values) if values else math.nan,
        "n": len(values),
    }


def summarise(result: RunResult) -> dict[str, Any]:
    """Summary of a run: per config overall / by category / separate group, speed,
    the full-context baseline and paired tests between configurations."""
    by_config: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for record in result.records:
        by_config[record["config"]].append(record)
    metric_names = list(result.records[0]["metrics"]) if result.records else []
    category_metrics = CATEGORY_METRICS.get(result.dataset, ())

    configs: dict[str, Any] = {}
    for name, records in by_config.items():
        main = [r for r in records if not r["abstention"]]
        separate = [r for r in records if r["abstention"]]
        categories: dict[str, list[dict[str, Any]]] = defaultdict(list)
        for record in main:
            categories[record["category"]].append(record)
        configs[name] = {
            "questions": len(main),
            "overall": _estimates(main, metric_names),
            "by_category": {
                cat: {"questions": len(rs), **_estimates(rs, category_metrics)}
                for cat, rs in sorted(categories.items())
            },
            "separate": {
                "name": SEPARATE_GROUP.get(result.dataset, "separate"),
                "questions": len(separate),
                **_estimates(separate, category_metrics),
            },
            "latency_ms": _latency(records),
            "mean_hits": (
                sum(len(r["retrieved"]) for r in records) / len(records) if records else 0.0
            ),
            "mean_context_tokens": _mean(sum(h["tokens"] for h in r["retrieved"]) for r in main),
            "empty_results": {
                "answerable": _mean(float(r.get("returned", 1) == 0) for r in main),
                "separate": _mean(float(r.get("returned", 1) == 0) for r in separate),
            },
        }
        graded = [r for r in records if "qa" in r]
        if graded:
            configs[name]["qa"] = _qa_block(graded)

    return {
        **result.meta(),
        "headline": HEADLINE.get(result.dataset),
        "ks": list(result.ks),
        "configs": configs,
        "full_context": _full_context(result),
        "speed": _speed(result),
        "comparisons": _comparisons(result, by_config),
        "qa_usage": result.qa_usage,
    }


def _qa_block(records: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """Answer accuracy (or F1) over graded records: main, by category, separate group."""
    main = [r for r in records if not r["abstention"]]
    separate = [r for r in records if r["abstention"]]
    categories: dict[str, list[float]] = defaultdict(list)
    for record in main:
        categories[record["category"]].append(record["qa"]["score"])
    return {
        "score": m.estimate(r["qa"]["score"] for r in main).as_dict(),
        "separate": m.estimate(r["qa"]["score"] for r in separate).as_dict(),
        "all": m.estimate(r["qa"]["score"] for r in records).as_dict(),
        "by_category": {c: m.estimate(v).as_dict() for c, v in sorted(categories.items())},
        "errored": sum(1 for r in records if "error" in r["qa"]),
        "graded": len(records),
        "grader": next((r["qa"].get("grader") for r in records if "grader" in r["qa"]), None),
    }


def _mean(values: Iterable[float]) -> float:
    data = list(values)
    return sum(data) / len(data) if data else math.nan


def _full_context(result: RunResult) -> dict[str, Any]:
    """The baseline that hands over every turn: all evidence, at the cost of every token."""
    per_question: list[int] = []
    seen: set[str] = set()
    for record in result.records:
        if record["question_id"] in seen or record["abstention"]:
            continue
        seen.add(record["question_id"])
        per_question.append(result.full_context_tokens[record["case"]])
    meta = {r["question_id"]: r for r in result.records}
    qa = [
        {"qa": graded, "abstention": meta[qid]["abstention"], "category": meta[qid]["category"]}
        for qid, graded in result.full_context_qa.items()
        if qid in meta
    ]
    return {
        "config": FULL_CONTEXT,
        "qa": _qa_block(qa) if qa else None,
        "recall": 1.0,
        "questions": len(per_question),
        "mean_tokens": _mean(per_question),
        "max_tokens": max(per_question, default=0),
    }


def _speed(result: RunResult) -> dict[str, Any]:
    messages = sum(s.messages for s in result.ingest)
    seconds = sum(s.ingest_seconds for s in result.ingest)
    sizes = [s.store_bytes for s in result.ingest]
    return {
        "cases": len(result.ingest),
        "messages": messages,
        "ingest_seconds": seconds,
        "ingest_messages_per_second": messages / seconds if seconds else math.nan,
        "store_bytes_mean": _mean(sizes),
        "store_bytes_max": max(sizes, default=0),
        "store_bytes_per_message": sum(sizes) / messages if messages else math.nan,
        "peak_rss_bytes": result.peak_rss_bytes,
        "run_seconds": result.seconds,
        "consolidate_seconds": sum(s.consolidate_seconds for s in result.ingest),
        "facts": sum(s.facts for s in result.ingest),
        # How the questions' dense searches were answered: through the approximate
        # graph or by the exact scan.
        "dense_searches": {
            way: sum(r.get("dense_searches", {}).get(way, 0) for r in result.records)
            for way in ("graph", "exact")
        },
    }


#: Up to this many configurations a run compares every pair; beyond it (an ablation of
#: dozens of rows) each configuration against the first named, the baseline.
ALL_PAIRS = 6


def _comparisons(
    result: RunResult, by_config: dict[str, list[dict[str, Any]]]
) -> list[dict[str, Any]]:
    """Each pair of configurations on the headline metrics, over the same questions; with
    more than ``ALL_PAIRS`` configurations, each against the first one only."""
    if result.dataset not in HEADLINE or len(by_config) < 2:
        return []
    continuous, binary = HEADLINE[result.dataset]
    configs = list(by_config)
    pairs = (
        itertools.combinations(configs, 2)
        if len(configs) <= ALL_PAIRS
        else ((configs[0], b) for b in configs[1:])
    )
    out = []
    for a, b in pairs:
        pa = {r["question_id"]: r["metrics"] for r in by_config[a] if not r["abstention"]}
        pb = {r["question_id"]: r["metrics"] for r in by_config[b] if not r["abstention"]}
        common = sorted(set(pa) & set(pb))
        out.append(
            {
                "a": a,
                "b": b,
                "questions": len(common),
                "mcnemar": {
                    "metric": binary,
                    **m.mcnemar_exact(
                        [pa[q][binary] for q in common], [pb[q][binary] for q in common]
                    ),
                },
                "paired_bootstrap": {
                    "metric": continuous,
                    **m.paired_bootstrap(
                        [pa[q][continuous] for q in common], [pb[q][continuous] for q in common]
                    ),
                },
            }
        )
        qa_a = {r["question_id"]: r["qa"]["score"] for r in by_config[a] if "qa" in r}
        qa_b = {r["question_id"]: r["qa"]["score"] for r in by_config[b] if "qa" in r}
        both = sorted(set(qa_a) & set(qa_b))
        if both:
            xs, ys = [qa_a[q] for q in both], [qa_b[q] for q in both]
            out[-1]["qa"] = {
                "questions": len(both),
                "mcnemar": m.mcnemar_exact(xs, ys) if _binary(xs + ys) else None,
                "paired_bootstrap": m.paired_bootstrap(xs, ys),
            }
    return out


def _binary(values: Sequence[float]) -> bool:
    return all(v in (0.0, 1.0) for v in values)
