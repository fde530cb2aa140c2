"""Fitting the learned ranker on labelled questions: the benchmarks' or your own.

The bundled ranker (``ranker.py``) learned from the benchmarks' chats, and it ranks
best the chats that resemble them: fitted on the user–assistant benchmarks alone it
ranked LoCoMo's chats between named people worse than fusion did (study "The ranker
reads its neighbours"). A memory of another kind can have a ranker of its
own: label some questions with the episodes that answer them, then

    examples = ranker_examples(memory, questions)   # features of full-priors' top 100
    models = fit_ranker(examples)                   # one logistic model per chat kind
    save_ranker(models, "my-ranker.json")

and search with ``PRESETS["ranker"].with_options("learned_rerank",
model="my-ranker.json")`` (CLI: ``anamnesis fit-ranker`` and ``--ranker-model``). A chat
kind without labelled questions keeps the bundled model. ``scripts/ranker_train.py``
fits the bundled model with the same functions, from the benchmarks' dumps
(``anamnesis.bench.fitting`` holds what only the benchmarks fit, such as the pooled
model of leave one data set out).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any, Protocol

import numpy as np

from ..config import PRESETS
from ..embed.base import Embedder
from ..errors import InvalidInputError
from ..store.base import Filters, Store
from ..types import Scope
from .pipeline import Retriever
from .ranker import (
    CHAT_KINDS,
    FEATURES,
    RANKER_DEPTH,
    RankerModel,
    candidate_features,
    chat_kind,
    load_ranker,
    ranker_to_dict,
)

#: The pipeline whose candidates the ranker learns to reorder: the ``ranker`` preset's
#: stages up to the ranker (it runs right after them).
_RANKER = PRESETS["ranker"]
BASE_CONFIG = _RANKER.with_(stages=_RANKER.stages[: _RANKER.stages.index("learned_rerank")])
#: L2 penalty of the logistic fit, on standardised features.
RANKER_L2 = 1.0


class MemoryLike(Protocol):
    """What ``ranker_examples`` reads of a memory (a ``Memory`` is one): its store and
    embedder. Typed by shape so that retrieval never imports the facade above it."""

    @property
    def store(self) -> Store: ...

    @property
    def embedder(self) -> Embedder: ...


@dataclass(frozen=True, slots=True)
class LabelledQuestion:
    """A question and the ids of the episodes that answer it, asked by ``user_id``
    (optionally as ``agent_id``) at ``now`` (default: the present)."""

    question: str
    evidence: tuple[str, ...]
    user_id: str
    agent_id: str | None = None
    now: datetime | None = None

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> LabelledQuestion:
        """From ``{"question", "evidence": [episode ids], "user_id", "agent_id"?,
        "now"? (ISO time)}``; a bad record raises ``InvalidInputError``."""
        try:
            question, evidence, user = data["question"], data["evidence"], data["user_id"]
        except (KeyError, TypeError) as exc:
            raise InvalidInputError(f"a labelled question needs {exc}: {data!r}") from exc
        if not isinstance(question, str) or not question.strip():
            raise InvalidInputError(f"a labelled question needs a question text: {data!r}")
        if not isinstance(evidence, list) or not evidence:
            raise InvalidInputError(f"a labelled question needs evidence episode ids: {data!r}")
        now = data.get("now")
        try:
            when = datetime.fromisoformat(now) if now is not None else None
        except (TypeError, ValueError) as exc:
            raise InvalidInputError(f"bad 'now' in a labelled question: {now!r}") from exc
        return cls(question, tuple(str(e) for e in evidence), str(user), data.get("agent_id"), when)


def ranker_examples(
    memory: MemoryLike, questions: Iterable[LabelledQuestion], depth: int = RANKER_DEPTH
) -> list[dict[str, Any]]:
    """For each question, ``BASE_CONFIG``'s best ``depth`` candidates in ``memory``:
    their ids (``keys``), ``FEATURES`` rows and the question's evidence, keyed by the
    asker (``case``). Evidence ids that are not in the asker's memory raise
    ``InvalidInputError``, so a typo cannot pass for a miss."""
    retriever = Retriever(memory.store, memory.embedder, BASE_CONFIG)
    examples = []
    for labelled in questions:
        scope = Scope(labelled.user_id, labelled.agent_id)
        found = {e.id for e in memory.store.get_episodes(list(labelled.evidence), scope)}
        missing = [e for e in labelled.evidence if e not in found]
        if missing:
            raise InvalidInputError(
                f"evidence of {labelled.question!r} not in {labelled.user_id}'s memory: {missing}"
            )
        request = retriever.request(labelled.question, scope, Filters(), labelled.now)
        head = retriever.rank(request)[:depth]
        examples.append(
            {
                "case": labelled.user_id,
                "question": labelled.question,
                "evidence": list(labelled.evidence),
                "keys": [f.episode_id for f in head],
                "features": candidate_features(request, head).round(6).tolist(),
            }
        )
    return examples


def example_kind(example: Mapping[str, Any]) -> str:
    """The chat kind of an example's candidates (which model ranks them)."""
    column = FEATURES.index("has_role")
    return chat_kind([row[column] > 0.5 for row in example["features"]])


def fit_ranker(
    examples: Sequence[Mapping[str, Any]],
    *,
    base: Mapping[str, RankerModel] | None = None,
    l2: float = RANKER_L2,
    trained_on: str = "",
) -> dict[str, RankerModel]:
    """One logistic model per chat kind over every candidate of the examples of that
    kind (Newton's method). A kind whose examples hold no evidence among their
    candidates keeps ``base``'s model (default: the bundled one).
    ``InvalidInputError`` when no kind has evidence to learn from."""
    models = dict(base if base is not None else load_ranker())
    learned = 0
    for kind in CHAT_KINDS:
        mine = [e for e in examples if e["features"] and example_kind(e) == kind]
        if any(set(e["evidence"]) & set(e["keys"]) for e in mine):
            models[kind] = fit_model(mine, l2, trained_on)
            learned += 1
    if not learned:
        raise InvalidInputError(
            "no labelled question has its evidence among the candidates: nothing to learn"
        )
    return models


def fit_model(examples: Sequence[Mapping[str, Any]], l2: float, trained_on: str) -> RankerModel:
    """One logistic model over every candidate of ``examples``: evidence is the positive
    class, features standardised by the examples' mean and spread."""
    x = np.concatenate([np.asarray(e["features"], dtype=np.float64) for e in examples])
    y = np.concatenate([np.isin(e["keys"], e["evidence"]).astype(np.float64) for e in examples])
    mean, scale = x.mean(0), x.std(0)
    scale[scale == 0.0] = 1.0
    w = newton_logistic(np.c_[(x - mean) / scale, np.ones(len(x))], y, l2)
    return RankerModel(
        features=FEATURES,
        mean=tuple(float(v) for v in mean),
        scale=tuple(float(v) for v in scale),
        coef=tuple(float(v) for v in w[:-1]),
        intercept=float(w[-1]),
        trained_on=trained_on,
    )


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


def save_ranker(models: Mapping[str, RankerModel], path: str | Path) -> None:
    """Write the models as the JSON file that ``learned_rerank``'s ``model`` option reads."""
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(json.dumps(ranker_to_dict(models), indent=1) + "\n", encoding="utf-8")
