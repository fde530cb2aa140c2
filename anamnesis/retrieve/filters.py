"""Post-fusion filters: near-duplicate suppression and low-confidence rejection.

*Dedup* keeps the best-ranked of episodes that say the same thing: equal content hash
(same speaker, same text) or embedding cosine at or above ``min_cosine`` (0.97; the
seeds use 0.95 (AgentOS) to 0.99 (Cognis)). It never groups by tags or metadata
signatures, which MemX found to cost recall on untagged facts. By default it only
compares episodes of the same session: a statement repeated in another session is a
new, dated event (LongMemEval labels such repeats as evidence, and collapsing them
across sessions cost its recall: study "Post-fusion stages and context assembly").
``scope="all"`` compares across sessions too.

*Abstain* returns no candidates when the search looks like a miss, MemX's rule R1
(§3.6): the lexical channel found nothing **and** the best dense cosine is below
``min_cosine``. ``rule="cosine"`` drops the lexical condition (MemX's R2). The
threshold depends on the embedder and must be calibrated on held-out data
(``anamnesis bench abstention`` sweeps it from a run's records).
"""

from __future__ import annotations

import numpy as np

from ..errors import InvalidInputError
from .fusion import Fused
from .request import SearchRequest

#: Cosine at or above which two candidates count as the same statement.
DEDUP_MIN_COSINE = 0.97
#: How many of the best candidates dedup compares (the rest pass through).
DEDUP_DEPTH = 100
#: Default abstention threshold on the best MiniLM cosine: the largest value at which
#: the cosine rule empties under 1% of answerable BEAM questions (study "Post-fusion
#: stages and context assembly", "Abstention (threshold sweep)"). No threshold separates
#: answerable from unanswerable questions well on LoCoMo, LongMemEval or BEAM, and rule
#: R1 never fires there (the OR-of-terms lexical channel always matches something), so
#: the stage is off by default.
ABSTAIN_MIN_COSINE = 0.30


def dedup(request: SearchRequest, fused: list[Fused]) -> list[Fused]:
    """Drop candidates that repeat a better-ranked one (same hash, or cosine ≥ threshold).

    Options (``stage_options["dedup"]``): ``min_cosine`` (None or above 1 disables the
    embedding test), ``scope`` ("session", the default, or "all"), ``depth``.
    """
    options = request.options("dedup")
    scope = options.get("scope", "session")
    if scope not in ("session", "all"):
        raise InvalidInputError(f"dedup scope must be 'session' or 'all', not {scope!r}")
    min_cosine = options.get("min_cosine", DEDUP_MIN_COSINE)
    depth = int(options.get("depth", DEDUP_DEPTH))
    head, tail = fused[:depth], fused[depth:]
    episodes = request.episodes([f.episode_id for f in head])
    vectors: dict[str, np.ndarray] = {}
    if min_cosine is not None and float(min_cosine) <= 1.0:
        vectors = request.stored_vectors(list(episodes))
    kept: list[Fused] = []
    kept_hashes: set[tuple[str | None, str]] = set()
    kept_vectors: dict[str | None, list[np.ndarray]] = {}
    for f in head:
        episode = episodes.get(f.episode_id)
        if episode is None:
            kept.append(f)
            continue
        group = episode.session_id if scope == "session" else None
        if (group, episode.content_hash) in kept_hashes:
            continue
        vector = vectors.get(episode.id)
        earlier = kept_vectors.setdefault(group, [])
        if vector is not None and earlier:
            similarity = np.stack(earlier) @ vector
            if float(similarity.max()) >= float(min_cosine):
                continue
        kept.append(f)
        kept_hashes.add((group, episode.content_hash))
        if vector is not None:
            earlier.append(vector)
    return kept + tail


def confidence(fused: list[Fused]) -> dict[str, float]:
    """What the abstention rule looks at: the best dense cosine and the lexical hit count."""
    cosines = [f.channels["dense"].score for f in fused if "dense" in f.channels]
    return {
        "top_cosine": max(cosines) if cosines else float("-inf"),
        "lexical_hits": float(sum(1 for f in fused if "lexical" in f.channels)),
    }


#: The abstention rules: MemX's R1 (no lexical hit and a low best cosine), or the best
#: cosine alone.
ABSTAIN_RULES = ("r1", "cosine")


def rejects(signals: dict[str, float], min_cosine: float, rule: str = "r1") -> bool:
    """Whether the abstention rule rejects a search with these ``confidence`` signals."""
    low = signals["top_cosine"] < min_cosine
    if rule == "cosine":
        return low
    return low and signals["lexical_hits"] == 0


def abstain(request: SearchRequest, fused: list[Fused]) -> list[Fused]:
    """Return nothing when the search looks like a miss (MemX rule R1, or ``cosine``).

    Options (``stage_options["abstain"]``): ``min_cosine``, ``rule`` ("r1" or "cosine").
    """
    options = request.options("abstain")
    min_cosine = float(options.get("min_cosine", ABSTAIN_MIN_COSINE))
    rule = str(options.get("rule", "r1"))
    if rule not in ABSTAIN_RULES:
        raise InvalidInputError(f"abstain rule must be 'r1' or 'cosine', not {rule!r}")
    return [] if rejects(confidence(fused), min_cosine, rule) else fused
