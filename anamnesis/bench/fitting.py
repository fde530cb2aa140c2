"""Fitting the small models the pipeline ships (learned fusion, the learned ranker) on
the benchmarks' dev splits: used by ``scripts/fusion_sweep.py`` and
``scripts/ranker_train.py``, never at search time."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from ..retrieve.ranker_fit import newton_logistic

__all__ = ["first_half", "newton_logistic"]


def first_half(records: Iterable[Mapping[str, Any]]) -> set[str]:
    """The cases of the first half, in the order the records first name them (run order).

    The dev split: the learned models are fitted on one half and judged on the other,
    so ``scripts/ranker_train.py`` (which fits) and ``scripts/sweep.py`` (which reads a
    benchmark run's halves) must split alike.
    """
    cases = list(dict.fromkeys(r["case"] for r in records))
    return set(cases[: len(cases) // 2])
