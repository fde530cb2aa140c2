"""The encoding gate: which incoming episodes enter the hot indexes.

For each episode three signals are computed:

- **novelty**: how much the episode costs to compress after the text of its nearest
  stored episodes, relative to what it costs alone (deflate, the algorithm of gzip);
  a restatement compresses almost for free, new information does not;
- **salience**: a rule score of the episode alone (``anamnesis.ingest.salience``):
  commitments, corrections, decisions, preferences and particulars high, filler low;
- **prediction error**: 1 - cosine similarity of the episode's dense vector to its
  nearest stored episode's (the vector is computed at ingest anyway).

They are combined as True Memory's encoding gate combines them ("Storage Is Not
Memory", arXiv 2605.04897, §4 Stage 1, equation 1): an episode whose salience is
below a floor is rejected; otherwise it is admitted iff the weighted mean
``(w_n * novelty + w_s * salience + w_p * prediction_error) / (w_n + w_s + w_p)``
reaches the threshold plus its category's offset. The paper's production defaults
are the ``truememory`` preset: weights 0.25 / 0.20 / 0.30, threshold 0.30, salience
floor 0.10, offsets -0.06 for corrections and -0.04 for decisions and relationships;
novelty is 1.0 against an empty memory and 0.05 for an episode that compresses to
under 10 bytes. Two choices differ from the paper, both cheaper: prediction error is
the plain cosine distance to the nearest stored episode (the paper embeds two text
pairs per episode), and deflate is framed as zlib, not gzip (same compressed body;
the ratio's denominator is 12 bytes smaller).

A rejected episode is not dropped: the caller stores it verbatim in the archive
(``search(include_archive=True)`` finds it, ``restore`` brings it back). Every
decision, admitted or not, is kept with its signals (``Memory.gate_decisions``).
"""

from __future__ import annotations

import math
import zlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace

from ..errors import InvalidInputError
from .salience import CATEGORY_SCORES, salience

#: Deflate level of the novelty signal (gzip's default, as in the paper).
COMPRESSION_LEVEL = 6
#: Novelty of an episode that compresses to fewer bytes than ``SHORT_BYTES``.
SHORT_NOVELTY = 0.05
SHORT_BYTES = 10


@dataclass(frozen=True, slots=True)
class GateConfig:
    """How the encoding gate decides (``Memory(gate=...)``; presets in ``GATE_PRESETS``).

    ``weights`` of novelty, salience and prediction error in the combined score (a
    weighted mean, so only their ratios matter); ``threshold`` the combined score an
    episode must reach; ``salience_floor`` the salience below which an episode is
    rejected whatever its score; ``category_offsets`` added to the threshold for
    episodes of a salience category (negative: easier to admit); ``neighbours`` how
    many nearest stored episodes novelty compresses against.
    """

    novelty_weight: float = 0.25
    salience_weight: float = 0.20
    prediction_error_weight: float = 0.30
    threshold: float = 0.30
    salience_floor: float = 0.10
    category_offsets: Mapping[str, float] = field(
        default_factory=lambda: {"correction": -0.06, "decision": -0.04, "relationship": -0.04}
    )
    neighbours: int = 5
    name: str = "custom"

    def __post_init__(self) -> None:
        weights = (self.novelty_weight, self.salience_weight, self.prediction_error_weight)
        for value, what in [
            *zip(
                weights,
                ("novelty_weight", "salience_weight", "prediction_error_weight"),
                strict=True,
            ),
            (self.threshold, "threshold"),
            (self.salience_floor, "salience_floor"),
        ]:
            if not isinstance(value, int | float) or isinstance(value, bool):
                raise InvalidInputError(f"gate {what} must be a number, not {value!r}")
            if not math.isfinite(value):
                raise InvalidInputError(f"gate {what} must be finite, not {value!r}")
        if any(w < 0 for w in weights) or sum(weights) <= 0:
            raise InvalidInputError("gate weights must be non-negative and not all zero")
        if not 0.0 <= self.salience_floor <= 1.0:
            raise InvalidInputError("gate salience_floor must be between 0 and 1")
        if not isinstance(self.category_offsets, Mapping):
            raise InvalidInputError("gate category_offsets must be a dict of category: offset")
        for category, offset in self.category_offsets.items():
            if category not in CATEGORY_SCORES:
                raise InvalidInputError(
                    f"unknown gate category {category!r}; choose from {sorted(CATEGORY_SCORES)}"
                )
            if not isinstance(offset, int | float) or not math.isfinite(offset):
                raise InvalidInputError(f"gate offset of {category!r} must be a finite number")
        if (
            not isinstance(self.neighbours, int)
            or isinstance(self.neighbours, bool)
            or not 1 <= self.neighbours <= 100
        ):
            raise InvalidInputError("gate neighbours must be an integer from 1 to 100")

    def with_(self, **changes: object) -> GateConfig:
        """A copy with some fields changed (named ``custom`` unless a name is given)."""
        changes.setdefault("name", "custom")
        return replace(self, **changes)  # type: ignore[arg-type]


#: The gate settings a user chooses between by name (``Memory(gate=NAME)``).
#: ``truememory`` (alias ``default``) is the paper's production defaults; ``lenient``
#: and ``strict`` change only the threshold, to points of the sweep in BENCHMARKS.md
#: ("Encoding gate": what each admits and what recall it costs). ``off`` admits
#: everything and records nothing: the behaviour without a gate.
GATE_PRESETS: dict[str, GateConfig | None] = {
    "off": None,
    "lenient": GateConfig(threshold=0.20, name="lenient"),
    "truememory": GateConfig(name="truememory"),
    "default": GateConfig(name="truememory"),
    "strict": GateConfig(threshold=0.40, name="strict"),
}


def gate_config(value: object) -> GateConfig | None:
    """A ``GateConfig`` (or None for no gate) from a preset name, a config or None."""
    if value is None:
        return None
    if isinstance(value, GateConfig):
        return value
    if isinstance(value, str):
        if value not in GATE_PRESETS:
            raise InvalidInputError(
                f"unknown gate preset {value!r}; choose from {sorted(GATE_PRESETS)}"
            )
        return GATE_PRESETS[value]
    raise InvalidInputError(
        f"gate must be a preset name, a GateConfig or None, not {type(value).__name__}"
    )


@dataclass(frozen=True, slots=True)
class Signals:
    """The gate's reading of one episode, and its verdict."""

    novelty: float
    salience: float
    prediction_error: float
    category: str
    score: float
    threshold: float
    admitted: bool
    reason: str


def _deflated(data: bytes) -> int:
    return len(zlib.compress(data, COMPRESSION_LEVEL))


def novelty(text: str, memory_texts: Sequence[str]) -> float:
    """How much ``text`` adds to ``memory_texts``: the extra compressed bytes it costs
    after them, over its own compressed size, in [0, 1]."""
    own = text.encode("utf-8")
    alone = _deflated(own)
    if alone < SHORT_BYTES:
        return SHORT_NOVELTY
    if not memory_texts:
        return 1.0
    memory = "\n".join(memory_texts).encode("utf-8")
    extra = _deflated(memory + b"\n" + own) - _deflated(memory)
    return min(1.0, max(0.0, extra / alone))


def decide(
    text: str, neighbour_texts: Sequence[str], nearest: float | None, config: GateConfig
) -> Signals:
    """The gate's verdict on one episode, given the texts of its nearest stored
    episodes (nearest first) and the cosine similarity of the nearest one's vector to
    its own (None when the memory is empty)."""
    rated = salience(text)
    new = novelty(text, neighbour_texts)
    surprise = 1.0 if nearest is None else min(1.0, max(0.0, 1.0 - nearest))
    weights = (config.novelty_weight, config.salience_weight, config.prediction_error_weight)
    score = (weights[0] * new + weights[1] * rated.score + weights[2] * surprise) / sum(weights)
    threshold = config.threshold + float(config.category_offsets.get(rated.category, 0.0))
    if rated.score < config.salience_floor:
        admitted, reason = False, "salience below floor"
    elif score >= threshold:
        admitted, reason = True, "score reaches threshold"
    else:
        admitted, reason = False, "score below threshold"
    return Signals(new, rated.score, surprise, rated.category, score, threshold, admitted, reason)
