"""Strength and decay: an Ebbinghaus-style forgetting curve over usage counters.

An episode's strength falls exponentially with the time since it was last retrieved
by a search (or, never retrieved, since it was recorded)::

    strength(t) = S0 * (1 + salience) * exp(-t / stability)
    stability   = BASE_STABILITY_DAYS * GROWTH ** retrievals * (1 + 4 * salience)

The form is the one AgentOS describes (S(t) = S0 * e^(-t / stability), stability
growing with each successful retrieval); its flashbulb rule gives high-salience traces
up to 2x strength and 5x stability, which is where ``1 + salience`` and
``1 + 4 * salience`` come from (salience in [0, 1], read from an episode's
``metadata["salience"]``; absent means 0). Decay is off by default: nothing here runs
unless ``Memory.decay`` is called, and it never deletes: an episode below the
threshold is archived (``Memory.archive``), and ``restore`` brings it back.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import datetime

from .errors import InvalidInputError
from .types import Episode, Usage

#: Strength of a fresh, never-retrieved episode of no salience (AgentOS's S0).
INITIAL_STRENGTH = 1.0
#: The e-folding time of an episode never retrieved, in days. A choice, not a fit: a
#: month unused brings strength to 1/e (0.37), and an episode never retrieved falls
#: below ``ARCHIVE_BELOW`` after 30 * ln(20) = 90 days. The seeds give no figure.
BASE_STABILITY_DAYS = 30.0
#: Stability is multiplied by this on each retrieval (spaced repetition: the interval
#: before forgetting grows geometrically with successful recalls; SM-2's default ease
#: is 2.5, we take the rounder and milder 2). Not tuned on any benchmark.
STABILITY_GROWTH = 2.0
#: Strength below which ``decay`` archives an episode: AgentOS's prune threshold.
ARCHIVE_BELOW = 0.05
#: AgentOS's flashbulb multipliers at full salience: 2x strength, 5x stability.
SALIENCE_STRENGTH = 1.0
SALIENCE_STABILITY = 4.0


@dataclass(frozen=True, slots=True)
class DecayPolicy:
    """The constants of the forgetting curve (see the module docstring)."""

    base_stability_days: float = BASE_STABILITY_DAYS
    growth: float = STABILITY_GROWTH
    archive_below: float = ARCHIVE_BELOW

    def __post_init__(self) -> None:
        for name in ("base_stability_days", "growth", "archive_below"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int | float):
                raise InvalidInputError(f"decay policy {name} must be a number, got {value!r}")
            try:
                number = float(value)
            except OverflowError:
                number = math.inf
            if not math.isfinite(number):
                raise InvalidInputError(f"decay policy {name} must be finite, got {value!r}")
            object.__setattr__(self, name, number)
        if not (self.base_stability_days > 0 and self.growth >= 1 and 0 <= self.archive_below < 1):
            raise InvalidInputError(
                "a decay policy needs base_stability_days > 0, growth >= 1 and "
                "0 <= archive_below < 1"
            )


DEFAULT_DECAY = DecayPolicy()


def salience_of(episode: Episode) -> float:
    """``metadata["salience"]`` clipped to [0, 1]; 0 when absent or not a number."""
    value = episode.metadata.get("salience")
    if isinstance(value, bool) or not isinstance(value, int | float) or math.isnan(value):
        return 0.0
    return min(max(float(value), 0.0), 1.0)


def stability_days(retrievals: int, salience: float, policy: DecayPolicy = DEFAULT_DECAY) -> float:
    """The e-folding time of an episode's strength, in days (infinite once the
    retrievals have grown it past what a float holds: it no longer decays)."""
    try:
        growth = policy.growth**retrievals
    except OverflowError:
        growth = math.inf
    return policy.base_stability_days * growth * (1.0 + SALIENCE_STABILITY * salience)


def strength(
    age_days: float, retrievals: int, salience: float, policy: DecayPolicy = DEFAULT_DECAY
) -> float:
    """Strength after ``age_days`` since the last retrieval (or the recording)."""
    peak = INITIAL_STRENGTH * (1.0 + SALIENCE_STRENGTH * salience)
    return peak * math.exp(-max(age_days, 0.0) / stability_days(retrievals, salience, policy))


def episode_strength(
    episode: Episode, usage: Usage | None, now: datetime, policy: DecayPolicy = DEFAULT_DECAY
) -> float:
    """The strength of one episode at ``now``, from its usage counters."""
    retrievals = usage.retrieved if usage is not None else 0
    last = usage.last_retrieved_at if usage is not None else None
    since = max(last, episode.recorded_at) if last is not None else episode.recorded_at
    age_days = (now - since).total_seconds() / 86_400
    return strength(age_days, retrievals, salience_of(episode), policy)
