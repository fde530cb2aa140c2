"""Presentation only: what the inspector's pages compute from the verbs' answers to
draw them (turns grouped by day, sessions of a page, a hit's channels, a fact's time
axis). Nothing here reads the store."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, date, datetime
from typing import Any
from urllib.parse import urlencode

from ...types import Episode, Fact, Hit

#: Width in SVG units of a fact history's time axis.
AXIS_WIDTH = 760
#: Height of one row of the axis.
AXIS_ROW = 34


def url(path: str, **params: Any) -> str:
    """``path`` with the query ``params`` that are set (None and "" are left out)."""
    kept = {k: v for k, v in params.items() if v is not None and v != ""}
    return f"{path}?{urlencode(kept, doseq=True)}" if kept else path


def when(value: datetime | None) -> str:
    """A time as people read it, in UTC."""
    if value is None:
        return "—"
    return value.astimezone(UTC).strftime("%Y-%m-%d %H:%M UTC")


def by_day(episodes: Iterable[Episode]) -> list[tuple[date, list[Episode]]]:
    """Episodes (in event-time order) grouped under the UTC day they happened."""
    days: list[tuple[date, list[Episode]]] = []
    for episode in episodes:
        day = episode.event_time.astimezone(UTC).date()
        if not days or days[-1][0] != day:
            days.append((day, []))
        days[-1][1].append(episode)
    return days


@dataclass
class SessionRow:
    """A session as it appears in one page of the scope's episodes."""

    session_id: str | None
    agent_id: str | None
    first: datetime
    last: datetime
    in_page: int = 0
    total: int | None = None


def sessions_of(episodes: Iterable[Episode]) -> list[SessionRow]:
    """The sessions of a page of episodes, in the order they first appear, with the
    span and count of their turns within the page."""
    rows: dict[tuple[str | None, str | None], SessionRow] = {}
    for episode in episodes:
        key = (episode.agent_id, episode.session_id)
        row = rows.get(key)
        if row is None:
            row = rows[key] = SessionRow(
                episode.session_id, episode.agent_id, episode.event_time, episode.event_time
            )
        row.in_page += 1
        row.first = min(row.first, episode.event_time)
        row.last = max(row.last, episode.event_time)
    return list(rows.values())


@dataclass(frozen=True)
class ChannelRow:
    """How one channel saw a hit: its rank there (None: it did not find it)."""

    channel: str
    rank: int | None
    score: float | None

    @property
    def reach(self) -> float:
        """A bar's length in [0, 1]: the reciprocal rank, as fusion weighs it."""
        return 0.0 if self.rank is None else 1.0 / self.rank


@dataclass(frozen=True)
class ExplainedHit:
    """A hit with its place in the answer and every channel's view of it."""

    hit: Hit
    rank: int
    channels: list[ChannelRow]

    @property
    def found_by(self) -> list[str]:
        """The channels that proposed it."""
        return [row.channel for row in self.channels if row.rank is not None]

    @property
    def best_channel_rank(self) -> int | None:
        """Its best rank in any channel, before fusion and the stages moved it."""
        ranks = [row.rank for row in self.channels if row.rank is not None]
        return min(ranks) if ranks else None

    @property
    def archived(self) -> bool:
        """True when the hit came from the archive (``include_archive``)."""
        return "archive" in self.hit.channels


def explained(hits: Sequence[Hit], channels: Sequence[str]) -> list[ExplainedHit]:
    """Each hit with a row per channel (the configured ones, then any other that
    answered, such as ``archive``)."""
    names = list(channels)
    for hit in hits:
        names += [name for name in hit.channels if name not in names]
    return [
        ExplainedHit(
            hit,
            position,
            [
                ChannelRow(name, hit.channels[name].rank, hit.channels[name].score)
                if name in hit.channels
                else ChannelRow(name, None, None)
                for name in names
            ],
        )
        for position, hit in enumerate(hits, start=1)
    ]


@dataclass(frozen=True)
class Bar:
    """A span on the axis, in SVG units; ``open`` when it runs to the present."""

    x: float
    width: float
    open: bool


@dataclass(frozen=True)
class FactRow:
    """One value of a slot on the axis: when it held in the world, when we knew it."""

    fact: Fact
    y: int
    held: Bar
    known: Bar


@dataclass
class Axis:
    """A fact history drawn on one time axis."""

    start: datetime
    end: datetime
    rows: list[FactRow] = field(default_factory=list)
    ticks: list[tuple[float, str]] = field(default_factory=list)

    @property
    def height(self) -> int:
        return AXIS_ROW * len(self.rows) + 30


def fact_axis(history: Sequence[Fact], now: datetime) -> Axis | None:
    """The history's values on one axis: a bar for when each held in the world
    (``valid_from`` to ``valid_to``; from when we learned it if its start is unknown),
    a thinner one for when we knew it (``recorded_at`` to its supersession)."""
    if not history:
        return None
    moments = [now]
    for fact in history:
        moments += [
            t
            for t in (fact.valid_from, fact.valid_to, fact.recorded_at, fact.superseded_at)
            if t is not None
        ]
    start, end = min(moments), max(moments)
    span = max((end - start).total_seconds(), 1.0)

    def x(moment: datetime) -> float:
        return round((moment - start).total_seconds() / span * AXIS_WIDTH, 1)

    def bar(begin: datetime, finish: datetime | None) -> Bar:
        left = x(begin)
        right = x(finish if finish is not None else now)
        return Bar(left, max(right - left, 2.0), finish is None)

    axis = Axis(start, end)
    for index, fact in enumerate(history):
        ended = fact.retracted_at or fact.superseded_at
        axis.rows.append(
            FactRow(
                fact,
                index * AXIS_ROW,
                bar(fact.valid_from or fact.recorded_at, fact.valid_to),
                bar(fact.recorded_at, ended),
            )
        )
    axis.ticks = [(x(start), when(start)[:10]), (x(end), when(end)[:10])]
    return axis
