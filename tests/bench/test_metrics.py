"""Benchmark metrics against hand-computed values and LongMemEval's definitions."""

from __future__ import annotations

import math
import random

import pytest

from anamnesis.bench import metrics as m
from anamnesis.bench.scoring import CorpusStats, longmemeval_official

RANKED = ["a", "b", "c", "d", "e"]
EVIDENCE = {"b", "e"}


def test_recall_hit_all_at_k():
    assert m.recall_at_k(RANKED, EVIDENCE, 1) == 0.0
    assert m.recall_at_k(RANKED, EVIDENCE, 2) == 0.5
    assert m.recall_at_k(RANKED, EVIDENCE, 5) == 1.0
    assert m.hit_at_k(RANKED, EVIDENCE, 1) == 0.0
    assert m.hit_at_k(RANKED, EVIDENCE, 2) == 1.0
    assert m.all_at_k(RANKED, EVIDENCE, 4) == 0.0
    assert m.all_at_k(RANKED, EVIDENCE, 5) == 1.0


def test_metrics_are_undefined_without_evidence():
    for value in (
        m.recall_at_k(RANKED, [], 3),
        m.hit_at_k(RANKED, [], 3),
        m.reciprocal_rank(RANKED, []),
        m.ndcg_at_k(RANKED, [], 3),
        m.budget_recall(RANKED, [1] * 5, [], 10),
    ):
        assert math.isnan(value)


def test_reciprocal_rank():
    assert m.reciprocal_rank(RANKED, EVIDENCE) == 0.5
    assert m.reciprocal_rank(RANKED, {"z"}) == 0.0


def test_ndcg_hand_computed():
    # Relevant at ranks 2 and 5: DCG = 1/log2(3) + 1/log2(6); ideal = 1 + 1/log2(3).
    dcg = 1 / math.log2(3) + 1 / math.log2(6)
    ideal = 1 + 1 / math.log2(3)
    assert m.ndcg_at_k(RANKED, EVIDENCE, 5) == pytest.approx(dcg / ideal)
    assert m.ndcg_at_k(RANKED, EVIDENCE, 5) == pytest.approx(0.62405, abs=1e-5)
    # At k=2 only one relevant item fits; the ideal is capped at min(|evidence|, k) = 2.
    assert m.ndcg_at_k(RANKED, EVIDENCE, 2) == pytest.approx((1 / math.log2(3)) / ideal)
    assert m.ndcg_at_k(["b", "e"], EVIDENCE, 5) == pytest.approx(1.0)


def test_budget_recall_stops_at_first_hit_that_does_not_fit():
    tokens = [100, 900, 50, 10, 10]
    assert m.budget_recall(RANKED, tokens, {"c"}, 1000) == 0.0
    assert m.budget_recall(RANKED, tokens, {"c"}, 1050) == 1.0
    assert m.budget_recall(RANKED, tokens, {"a", "e"}, 1000) == 0.5
    assert m.budget_recall(RANKED, tokens, {"a"}, 99) == 0.0


def test_wilson_interval_known_values():
    low, high = m.wilson_interval(8, 10)
    assert (low, high) == (pytest.approx(0.4902, abs=1e-4), pytest.approx(0.9433, abs=1e-4))
    low, high = m.wilson_interval(0, 20)
    assert low == 0.0 and high == pytest.approx(0.1611, abs=1e-4)
    assert all(math.isnan(v) for v in m.wilson_interval(0, 0))


def test_estimate_uses_wilson_for_binary_and_skips_nan():
    est = m.estimate([1.0, 0.0, 1.0, 1.0, math.nan])
    assert est.n == 4 and est.mean == 0.75
    assert (est.low, est.high) == m.wilson_interval(3, 4)
    cont = m.estimate([0.5, 0.25, 0.75])
    assert cont.low <= cont.mean <= cont.high


def test_mcnemar_exact():
    a = [1, 1, 1, 1, 1, 0, 1]
    b = [0, 0, 0, 0, 0, 0, 1]
    result = m.mcnemar_exact(a, b)
    assert result["a_only"] == 5 and result["b_only"] == 0
    assert result["p_value"] == pytest.approx(2 / 32)
    assert m.mcnemar_exact([1, 0], [1, 0])["p_value"] == 1.0
    # 6 vs 2 discordant: two-sided p = 2 * P(X <= 2 | n=8, 1/2) = 2 * 37/256.
    a = [1] * 6 + [0] * 2
    b = [0] * 6 + [1] * 2
    assert m.mcnemar_exact(a, b)["p_value"] == pytest.approx(74 / 256)


def test_paired_bootstrap_sign():
    result = m.paired_bootstrap([1.0] * 30, [0.0] * 30)
    assert result["diff"] == 1.0 and result["p_value"] == 0.0
    same = m.paired_bootstrap([0.5, 0.2], [0.5, 0.2])
    assert same["diff"] == 0.0 and same["p_value"] == 1.0


# -- LongMemEval ------------------------------------------------------------------------------


def test_longmemeval_dcg_leaves_first_two_ranks_undiscounted():
    assert m.longmemeval_dcg([1, 1, 1], 3) == pytest.approx(1 + 1 + 1 / math.log2(3))
    assert m.longmemeval_dcg([0, 1, 1], 3) == pytest.approx(1 + 1 / math.log2(3))
    assert m.longmemeval_dcg([], 5) == 0.0


def test_longmemeval_retrieval_hand_computed():
    ranked = ["x", "s1", "y", "s2"]
    # 3 relevant items exist in the corpus; two are retrieved at ranks 2 and 4.
    any_, all_, ndcg = m.longmemeval_retrieval(ranked, ["s1", "s2", "s3"], 3, 4)
    assert (any_, all_) == (1.0, 0.0)
    expected = (1 / math.log2(2) + 1 / math.log2(4)) / (1 + 1 + 1 / math.log2(3))
    assert ndcg == pytest.approx(expected)
    # No correct documents: recall_all is vacuously 1, ndcg 0 (as in the official code).
    assert m.longmemeval_retrieval(ranked, [], 0, 4) == (0.0, 1.0, 0.0)


def _reference(rankings, correct_docs, corpus_ids, k):
    """LongMemEval's evaluate_retrieval re-derived from its definition: rankings are
    indices into corpus_ids covering the whole corpus."""
    recalled = {corpus_ids[i] for i in rankings[:k]}
    recall_any = float(any(d in recalled for d in correct_docs))
    recall_all = float(all(d in recalled for d in correct_docs))
    relevances = [1 if d in correct_docs else 0 for d in corpus_ids]

    def dcg(rel, kk):
        rel = rel[:kk]
        if not rel:
            return 0.0
        return rel[0] + sum(r / math.log2(i + 1) for i, r in enumerate(rel) if i >= 1)

    ideal = dcg(sorted(relevances, reverse=True), k)
    actual = dcg([relevances[i] for i in rankings[:k]], k)
    return recall_any, recall_all, (actual / ideal if ideal else 0.0)


def _reference_turn2session(rankings, correct_turns, corpus_ids, k):
    def strip(doc):
        return "_".join(doc.split("_")[:-1])

    correct = list({strip(d) for d in correct_turns})
    sessions = [strip(d) for d in corpus_ids]
    effective_k = k
    while effective_k <= len(sessions) and len({sessions[i] for i in rankings[:effective_k]}) < k:
        effective_k += 1
    return _reference(rankings, correct, sessions, effective_k)


def _random_haystack(rng: random.Random):
    corpus = []
    for s in range(rng.randint(3, 12)):
        prefix = "answer" if s < 2 else "sess"
        corpus += [f"{prefix}{s}_{t + 1}" for t in range(rng.randint(1, 8))]
    evidence_sessions = {c.rsplit("_", 1)[0] for c in corpus if c.startswith("answer")}
    evidence = [c for c in corpus if c.startswith("answer") and rng.random() < 0.4]
    if not evidence:
        evidence = [next(c for c in corpus if c.startswith("answer"))]
    order = list(range(len(corpus)))
    rng.shuffle(order)
    return corpus, evidence, evidence_sessions, order


@pytest.mark.parametrize("seed", range(40))
def test_longmemeval_metrics_match_official_definitions(seed):
    rng = random.Random(seed)
    corpus, evidence, evidence_sessions, order = _random_haystack(rng)
    ranked = [corpus[i] for i in order]
    session_of = {c: c.rsplit("_", 1)[0] for c in corpus}
    sizes: dict[str, int] = {}
    for c in corpus:
        sizes[session_of[c]] = sizes.get(session_of[c], 0) + 1
    stats = CorpusStats(size=len(corpus), session_of=session_of, session_sizes=sizes)
    # Session evidence here = sessions of evidence turns, which is what the official
    # turn→session mapping uses.
    sessions_with_evidence = {session_of[e] for e in evidence}
    ours = longmemeval_official(ranked, evidence, sorted(sessions_with_evidence), stats)
    for k in (1, 3, 5, 10, 30, 50):
        expected = _reference(order, evidence, corpus, k)
        got = tuple(ours[f"lme.turn.{n}@{k}"] for n in ("recall_any", "recall_all", "ndcg_any"))
        assert got == pytest.approx(expected), (k, "turn")
        expected = _reference_turn2session(order, evidence, corpus, k)
        got = tuple(ours[f"lme.session.{n}@{k}"] for n in ("recall_any", "recall_all", "ndcg_any"))
        assert got == pytest.approx(expected), (k, "session")
    assert evidence_sessions  # the generator always plants answer sessions


@pytest.mark.parametrize("seed", range(20))
def test_truncated_ranking_agrees_while_the_cutoff_fits(seed):
    """Our searches return at most ``depth`` hits; below that depth the official metrics
    computed on the truncated list equal those on the full ranking."""
    rng = random.Random(1000 + seed)
    corpus, evidence, _, order = _random_haystack(rng)
    session_of = {c: c.rsplit("_", 1)[0] for c in corpus}
    ranked = [corpus[i] for i in order]
    depth = max(1, len(corpus) // 2)
    for k in (1, 3, 5):
        if k > depth:
            continue
        full = m.longmemeval_retrieval(ranked, evidence, len(evidence), k)
        cut = m.longmemeval_retrieval(ranked[:depth], evidence, len(evidence), k)
        assert cut == full
        wanted = {session_of[e] for e in evidence}
        n_rel = sum(1 for c in corpus if session_of[c] in wanted)
        full_s = m.longmemeval_turn2session(ranked, session_of, wanted, n_rel, k, len(corpus))
        sessions_in_cut = len(set(session_of[c] for c in ranked[:depth]))
        if sessions_in_cut >= k:
            cut_s = m.longmemeval_turn2session(
                ranked[:depth], session_of, wanted, n_rel, k, len(corpus)
            )
            assert cut_s == full_s


def test_mcnemar_counts_hits_not_recall_at_half():
    from anamnesis.bench.metrics import binary_metric

    assert binary_metric("recall@10") == "hit@10"  # "recall" holds "all": not 0/1
    assert binary_metric("recall@50") == "hit@50"
    assert binary_metric("hit@20") == "hit@20"
    assert binary_metric("lme.session.recall_all@5") == "lme.session.recall_all@5"
    assert binary_metric("lme.turn.recall_any@10") == "lme.turn.recall_any@10"


def test_the_report_counts_the_questions_it_scored():
    from anamnesis.bench.report import MAIN_COLUMNS, category_rows, main_rows

    scored = {m: {"mean": 0.5, "n": 705} for m, _ in MAIN_COLUMNS["locomo"]}
    block = {
        "questions": 728,  # asked; 23 have no evidence and are not scored
        "overall": scored,
        "by_category": {"temporal": {"questions": 100, "recall@10": {"mean": 0.4, "n": 96}}},
        "separate": {"name": "adversarial", "questions": 0},
        "latency_ms": {"p50": 1.0, "p95": 2.0},
    }
    summary = {
        "dataset": "locomo",
        "configs": {"hybrid": block},
        "full_context": {"mean_tokens": 100.0, "questions": 728},
        "headline": ["recall@10"],
    }
    _, rows = main_rows(summary)
    assert rows[0][:2] == ["hybrid", "705"]
    _, rows = category_rows(summary)
    assert rows[0][:2] == ["temporal", "96"]
