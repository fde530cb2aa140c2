"""Context assembly: search hits packed into a dated, provenance-tagged text for a reader.

The reader-facing format is documented in docs/context-format.md. In short: the
question's date, then a profile block (when asked for), then facts (when a facts
layer supplies them), then conversation excerpts grouped by session under a dated
header, each line tagged with its turn number, in conversation order. What goes in
is chosen by rank: the best hit first, each of the best ``neighbour_hits`` hits
followed by its neighbouring turns (the answer often sits in the reply), skipping
repeats within a session (a statement repeated in another session is a new dated
event and stays), until the token budget is spent.
Tokens are counted with the bundled WordPiece vocabulary (``anamnesis.tokens``) on the
rendered text, headers included, so ``Context.tokens <= budget_tokens`` always holds.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from .ingest.normalise import check_int
from .tokens import TokenCounter
from .types import Context, ContextFact, ContextLine, ContextSession, Episode, Fact, Hit

#: Default token budget of ``Memory.context``.
DEFAULT_BUDGET_TOKENS = 2000
#: How many of the best hits bring their neighbouring turns along by default. Chosen by
#: the sweep in BENCHMARKS.md ("Context assembly") on LoCoMo evidence recall at 2k tokens.
DEFAULT_NEIGHBOUR_HITS = 5
#: A neighbouring turn longer than this many tokens is left out: it is context, not a
#: ranked hit, and a long one (an assistant's essay) would displace several hits.
#: Chosen by the sweep in BENCHMARKS.md ("Context assembly"); LoCoMo turns are far
#: shorter, so it only acts on LongMemEval and BEAM.
DEFAULT_NEIGHBOUR_MAX_TOKENS = 256
#: Smallest budget that can hold a header and one short line.
MIN_BUDGET_TOKENS = 32

_GAP = "…"


def assemble(
    query: str,
    hits: Sequence[Hit],
    *,
    budget_tokens: int = DEFAULT_BUDGET_TOKENS,
    counter: TokenCounter,
    now: datetime | None = None,
    facts: Sequence[ContextFact] = (),
    neighbour_hits: int = DEFAULT_NEIGHBOUR_HITS,
    neighbour_max_tokens: int | None = DEFAULT_NEIGHBOUR_MAX_TOKENS,
    profile: Sequence[ContextFact] = (),
) -> Context:
    """Pack ``profile``, ``facts`` and ``hits`` (best first, with their neighbours)
    into a Context: the profile block first, then the facts, each line while it fits.

    Each of the best ``neighbour_hits`` hits brings its neighbouring turns, except those
    longer than ``neighbour_max_tokens`` (None: no limit).
    """
    budget_tokens = check_int(budget_tokens, "budget_tokens", minimum=MIN_BUDGET_TOKENS)
    preamble = _preamble(now)
    used = _count(counter, preamble) if preamble else 0
    kept_profile: list[ContextFact] = []
    for line in profile:
        cost = _count(counter, _fact_line(line)) + (0 if kept_profile else 2)
        if used + cost <= budget_tokens:
            kept_profile.append(line)
            used += cost
    kept_facts: list[ContextFact] = []
    for fact in facts:
        cost = _count(counter, _fact_line(fact)) + (0 if kept_facts else 2)
        if used + cost <= budget_tokens:
            kept_facts.append(fact)
            used += cost
    chosen: list[ContextLine] = []
    seen_ids: set[str] = set()
    seen_text: set[tuple[str | None, str]] = set()
    sessions: set[str | None] = set()
    for unit in _candidates(hits, neighbour_hits):
        episode = unit.episode
        if episode.id in seen_ids or (episode.session_id, episode.content_hash) in seen_text:
            continue
        line_tokens = _count(counter, _line(episode, episode.event_time))
        if unit.rank is None and neighbour_max_tokens is not None:
            if line_tokens > neighbour_max_tokens:
                continue
        cost = line_tokens + 1  # +1: a possible gap marker
        if episode.session_id not in sessions:
            cost += _count(counter, _header(episode.session_id, episode.event_time)) + 1
        if used + cost > budget_tokens:
            continue
        used += cost
        chosen.append(unit)
        seen_ids.add(episode.id)
        seen_text.add((episode.session_id, episode.content_hash))
        sessions.add(episode.session_id)
    while True:
        context = _render(
            query, now, preamble, (kept_profile, kept_facts), chosen, budget_tokens, counter
        )
        if context.tokens <= budget_tokens or not (chosen or kept_facts or kept_profile):
            return context
        if chosen:
            chosen.pop()
        elif kept_facts:
            kept_facts.pop()
        else:
            kept_profile.pop()


def facts_of(hits: Sequence[Hit]) -> list[ContextFact]:
    """The facts the hits carry (``Hit.facts``, from the ``facts`` channel), best hit
    first, each once, with their validity date and provenance episodes."""
    seen: set[str] = set()
    out = []
    for hit in hits:
        for fact in hit.facts:
            if fact.id not in seen:
                seen.add(fact.id)
                out.append(context_fact(fact))
    return out


def context_fact(fact: Fact) -> ContextFact:
    """A stored fact as the context shows it."""
    return ContextFact(text=fact.text, valid_at=fact.valid_from, source_episode_ids=fact.provenance)


def _candidates(hits: Sequence[Hit], neighbour_hits: int) -> list[ContextLine]:
    """Episodes in the order they are offered a place: each hit, then its neighbours."""
    units = []
    for rank, hit in enumerate(hits, start=1):
        units.append(ContextLine(hit.episode, rank, hit.score))
        if rank <= neighbour_hits:
            units.extend(ContextLine(n) for n in hit.context)
    return units


def _render(
    query: str,
    now: datetime | None,
    preamble: str,
    blocks_of_facts: tuple[list[ContextFact], list[ContextFact]],
    chosen: list[ContextLine],
    budget: int,
    counter: TokenCounter,
) -> Context:
    groups: dict[str | None, list[ContextLine]] = {}
    for unit in chosen:
        groups.setdefault(unit.episode.session_id, []).append(unit)
    for units in groups.values():
        units.sort(key=lambda u: (u.episode.turn_index or 0, u.episode.event_time))
    ordered = sorted(groups.values(), key=lambda us: min(u.episode.event_time for u in us))
    profile, facts = blocks_of_facts
    blocks = [preamble] if preamble else []
    if profile:
        blocks.append("Profile:\n" + "\n".join(_fact_line(f) for f in profile))
    if facts:
        blocks.append("Facts:\n" + "\n".join(_fact_line(f) for f in facts))
    sessions = []
    for units in ordered:
        first = units[0].episode
        started = min(u.episode.event_time for u in units)
        lines = [_header(first.session_id, started)]
        previous: int | None = None
        shown = started
        for unit in units:
            turn = unit.episode.turn_index
            if previous is not None and turn is not None and turn > previous + 1:
                lines.append(_GAP)
            lines.append(_line(unit.episode, shown))
            shown = unit.episode.event_time
            previous = turn
        blocks.append("\n".join(lines))
        sessions.append(
            ContextSession(
                session_id=first.session_id,
                started_at=started,
                lines=tuple(units),
            )
        )
    text = "\n\n".join(blocks)
    return Context(
        query=query,
        text=text,
        tokens=counter.count_once(text) if text else 0,
        budget_tokens=budget,
        now=now,
        facts=tuple(facts),
        sessions=tuple(sessions),
        profile=tuple(profile),
    )


def _count(counter: TokenCounter, text: str) -> int:
    return counter.count([text])[0]


def _preamble(now: datetime | None) -> str:
    return f"Current date: {_day(now)}" if now is not None else ""


def _day(when: datetime) -> str:
    return when.strftime("%Y-%m-%d (%A)")


def _header(session_id: str | None, started: datetime) -> str:
    name = f"Session {session_id}" if session_id else "No session"
    return f"== {name} · {_day(started)} {started.strftime('%H:%M')} =="


def _line(episode: Episode, previous: datetime) -> str:
    """``#turn [time] speaker: text``.

    The time is shown only when it moved on from the previous line (or the header):
    ``[HH:MM]`` on the same day, the full date and time on another day.
    """
    when = episode.event_time
    if when.date() != previous.date():
        stamp = f"[{when.strftime('%Y-%m-%d %H:%M')}] "
    elif when.strftime("%H:%M") != previous.strftime("%H:%M"):
        stamp = f"[{when.strftime('%H:%M')}] "
    else:
        stamp = ""
    turn = f"#{episode.turn_index} " if episode.turn_index is not None else ""
    who = episode.speaker or episode.role or "someone"
    return f"{turn}{stamp}{who}: {episode.content}"


def _fact_line(fact: ContextFact) -> str:
    when = f" (as of {fact.valid_at.strftime('%Y-%m-%d')})" if fact.valid_at else ""
    return f"- {fact.text}{when}"
