"""Fitting the small models the pipeline ships (learned fusion, the learned ranker) on
the benchmarks' dev splits: used by ``docs/experiments/scripts/fusion_sweep.py`` and
``scripts/ranker_train.py``, never at search time."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from ..errors import InvalidInputError
from ..retrieve.ranker import CHAT_KINDS, RankerModel
from ..retrieve.ranker_fit import RANKER_L2, fit_model, newton_logistic

__all__ = ["crossfit", "first_half", "fit_pooled", "newton_logistic", "scored"]


def first_half(records: Iterable[Mapping[str, Any]]) -> set[str]:
    """The cases of the first half, in the order the records first name them (run order).

    The dev split: the learned models are fitted on one half and judged on the other,
    so ``scripts/ranker_train.py`` (which fits) and ``docs/experiments/scripts/sweep.py``
    (which reads a benchmark run's halves) must split alike.
    """
    cases = list(dict.fromkeys(r["case"] for r in records))
    return set(cases[: len(cases) // 2])


def scored(records: Iterable[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    """The records of questions the models are fitted and judged on: with evidence, not
    abstention (``bench.runner.dev_questions``'s questions), so that ``first_half``
    splits a run's cases as ``scripts/ranker_train.py`` does."""
    return [r for r in records if r["evidence"] and not r["abstention"]]


def crossfit(
    records: list[dict[str, Any]], first: str, second: str, name: str
) -> list[dict[str, Any]]:
    """The records of a held-out configuration ``name``, from a run that holds two
    configurations alike but for their ranker: ``first`` with the models fitted on the
    first halves of the cases, ``second`` with those fitted on the second halves. Each
    question is taken from the one whose models did not see its case, so every
    question is judged by a model fitted without it."""
    first_cases = first_half(scored(records))
    return [
        {**r, "config": name}
        for r in records
        if r["config"] == (second if r["case"] in first_cases else first)
    ]


def fit_pooled(
    examples: Sequence[Mapping[str, Any]], *, l2: float = RANKER_L2, trained_on: str = ""
) -> dict[str, RankerModel]:
    """One logistic model over every candidate of every example, whatever its chat
    kind, serving every kind: the ranker a data set of a kind no other data set has
    can be judged by without having seen its kind (leave one data set out)."""
    usable = [e for e in examples if e["features"]]
    if not any(set(e["evidence"]) & set(e["keys"]) for e in usable):
        raise InvalidInputError(
            "no labelled question has its evidence among the candidates: nothing to learn"
        )
    model = fit_model(usable, l2, trained_on)
    return dict.fromkeys(CHAT_KINDS, model)
