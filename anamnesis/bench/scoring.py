"""Scoring one question's ranked retrieval against its evidence.

The result is a flat dict of metric name → value (nan where a metric is undefined,
e.g. recall for a question without evidence), so records can be averaged by name.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from . import metrics as m

#: Cut-offs for LoCoMo and BEAM tables.
DEFAULT_KS = (1, 3, 5, 10, 20, 50)
#: LongMemEval's own cut-offs (src/retrieval/run_retrieval.py).
LONGMEMEVAL_KS = (1, 3, 5, 10, 30, 50)
#: Context budgets, in tokens, for evidence-recall-at-budget.
DEFAULT_BUDGETS = (1000, 2000, 4000)

#: The metric each dataset's headline table and paired test use.
HEADLINE = {
    "locomo": ("recall@10", "hit@10"),
    "longmemeval": ("lme.session.recall_all@5", "lme.session.recall_all@5"),
    "beam": ("recall@20", "hit@20"),
}


@dataclass(frozen=True, slots=True)
class CorpusStats:
    """What the official LongMemEval NDCG needs to know about the whole haystack."""

    size: int
    session_of: Mapping[str, str]
    session_sizes: Mapping[str, int]


def score(
    dataset: str,
    ranked: Sequence[str],
    ranked_sessions: Sequence[str],
    tokens: Sequence[int],
    evidence: Sequence[str],
    evidence_sessions: Sequence[str],
    corpus: CorpusStats,
    *,
    ks: Sequence[int] = DEFAULT_KS,
    budgets: Sequence[int] = DEFAULT_BUDGETS,
) -> dict[str, float]:
    """Every metric for one question. ``ranked`` holds evidence keys in rank order and
    ``ranked_sessions`` the session of each; ``tokens`` the token count of each hit."""
    out: dict[str, float] = {}
    sessions = m.dedupe(ranked_sessions)
    for k in ks:
        out[f"recall@{k}"] = m.recall_at_k(ranked, evidence, k)
        out[f"hit@{k}"] = m.hit_at_k(ranked, evidence, k)
        out[f"all@{k}"] = m.all_at_k(ranked, evidence, k)
        out[f"ndcg@{k}"] = m.ndcg_at_k(ranked, evidence, k)
        out[f"session_recall@{k}"] = m.recall_at_k(sessions, evidence_sessions, k)
        out[f"session_hit@{k}"] = m.hit_at_k(sessions, evidence_sessions, k)
    out["mrr"] = m.reciprocal_rank(ranked, evidence)
    for budget in budgets:
        out[f"budget_recall@{budget}"] = m.budget_recall(ranked, tokens, evidence, budget)
    if dataset == "longmemeval":
        out.update(longmemeval_official(ranked, evidence, evidence_sessions, corpus, ks))
    return out


def longmemeval_official(
    ranked: Sequence[str],
    evidence: Sequence[str],
    evidence_sessions: Sequence[str],
    corpus: CorpusStats,
    ks: Sequence[int] = LONGMEMEVAL_KS,
) -> dict[str, float]:
    """LongMemEval's turn-level metrics and their turn→session mapping, by its definitions."""
    out: dict[str, float] = {}
    present = [e for e in dict.fromkeys(evidence) if e in corpus.session_of]
    wanted_sessions = set(evidence_sessions)
    session_turns = sum(corpus.session_sizes.get(s, 0) for s in wanted_sessions)
    for k in ks:
        any_, all_, ndcg = m.longmemeval_retrieval(ranked, present, len(present), k)
        out[f"lme.turn.recall_any@{k}"] = any_
        out[f"lme.turn.recall_all@{k}"] = all_
        out[f"lme.turn.ndcg_any@{k}"] = ndcg
        any_, all_, ndcg = m.longmemeval_turn2session(
            ranked, corpus.session_of, wanted_sessions, session_turns, k, corpus.size
        )
        out[f"lme.session.recall_any@{k}"] = any_
        out[f"lme.session.recall_all@{k}"] = all_
        out[f"lme.session.ndcg_any@{k}"] = ndcg
    return out
