"""Held-out reports of the learned ranker, and which configurations a run compares."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np

from anamnesis.bench.fitting import crossfit, first_half
from anamnesis.bench.presets import BENCH_PRESETS
from anamnesis.bench.summary import ALL_PAIRS, _comparisons


def _record(case: str, question: str, config: str, value: float, **extra: object) -> dict:
    return {
        "case": case,
        "question_id": question,
        "config": config,
        "evidence": ["D1:1"],
        "abstention": False,
        "metrics": {"recall@10": value, "hit@10": float(value > 0)},
        **extra,
    }


def test_crossfit_takes_each_case_from_the_model_that_did_not_see_it():
    records = []
    for case in ("c1", "c2", "c3", "c4"):
        records.append(_record(case, f"{case}/q0", "first", 1.0))
        records.append(_record(case, f"{case}/q0", "second", 0.0))
    records.append(_record("c1", "c1/abs", "second", 0.0, evidence=[], abstention=True))
    assert first_half(records) == {"c1", "c2"}

    heldout = crossfit(records, "first", "second", "heldout")

    # The first half is judged by the models fitted on the second (and back), the
    # abstention question of a first-half case with them.
    assert [(r["case"], r["question_id"]) for r in heldout] == [
        ("c1", "c1/q0"),
        ("c2", "c2/q0"),
        ("c3", "c3/q0"),
        ("c4", "c4/q0"),
        ("c1", "c1/abs"),
    ]
    assert [r["metrics"]["recall@10"] for r in heldout[:4]] == [0.0, 0.0, 1.0, 1.0]
    assert {r["config"] for r in heldout} == {"heldout"}
    assert records[0]["config"] == "first"  # the run's own records are left as they were


def test_the_second_halves_ranker_is_a_preset_with_a_shipped_model():
    from anamnesis.retrieve.ranker import load_ranker

    options = BENCH_PRESETS["ranker-second"].stage_options["learned_rerank"]
    second, bundled = load_ranker(options["model"]), load_ranker()
    assert second.keys() == bundled.keys()
    for kind in bundled:  # the same features, fitted on other cases
        assert second[kind].features == bundled[kind].features
        assert not np.allclose(second[kind].coef, bundled[kind].coef)


def _by_config(names: list[str]) -> dict[str, list[dict]]:
    return {n: [_record("c1", f"q{i}", n, float(i % 2)) for i in range(4)] for n in names}


def test_a_small_run_compares_every_pair_and_a_large_one_each_against_the_first():
    result = SimpleNamespace(dataset="locomo")
    small = [f"c{i}" for i in range(ALL_PAIRS)]
    pairs = {(c["a"], c["b"]) for c in _comparisons(result, _by_config(small))}
    assert len(pairs) == ALL_PAIRS * (ALL_PAIRS - 1) // 2

    large = [f"c{i}" for i in range(ALL_PAIRS + 4)]
    pairs = [(c["a"], c["b"]) for c in _comparisons(result, _by_config(large))]
    assert pairs == [("c0", name) for name in large[1:]]
