"""Fitting the small models the pipeline ships (learned fusion, the learned ranker) on
the benchmarks' dev splits: used by ``scripts/fusion_sweep.py`` and
``scripts/ranker_train.py``, never at search time."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

import numpy as np


def first_half(records: Iterable[Mapping[str, Any]]) -> set[str]:
    """The cases of the first half, in the order the records first name them (run order).

    The dev split: the learned models are fitted on one half and judged on the other,
    so ``scripts/ranker_train.py`` (which fits) and ``scripts/sweep.py`` (which reads a
    benchmark run's halves) must split alike.
    """
    cases = list(dict.fromkeys(r["case"] for r in records))
    return set(cases[: len(cases) // 2])


def newton_logistic(z: np.ndarray, y: np.ndarray, l2: float, iterations: int = 50) -> np.ndarray:
    """Weights of an L2-regularised logistic regression by Newton's method.

    ``z`` holds standardised features with a last column of ones (the intercept, not
    penalised); ``y`` the 0/1 labels. Returns one weight per column of ``z``.
    """
    w = np.zeros(z.shape[1])
    for _ in range(iterations):
        p = 1.0 / (1.0 + np.exp(-(z @ w)))
        grad = z.T @ (p - y) + l2 * np.r_[w[:-1], 0.0]
        hess = (z * (p * (1.0 - p))[:, None]).T @ z + l2 * np.eye(len(w))
        step = np.linalg.solve(hess, grad)
        w -= step
        if np.abs(step).max() < 1e-8:
            break
    return w
