"""Event-time index: the time expressions each episode mentions, resolved to ranges.

"I went to the support group yesterday", said on 8 May, mentions 7 May. Both stores
keep such mentions in an ``episode_times`` table beside the episodes: derived from an
episode's content and event time by ``anamnesis.ingest.timeparse`` (no LLM), written
in the same transaction as the episode, recomputed when its content changes, deleted
with it, and rebuilt from the stored episodes when an older store is migrated. An
export carries none of it; an import recomputes it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from ..ingest.timeparse import TimeMention, resolve

#: At most this many mentions are kept per episode (the first ones in the text): a
#: pasted calendar is not worth hundreds of index rows.
MAX_MENTIONS = 32

#: A half-open time range ``[start, end)``.
TimeRange = tuple[datetime, datetime]


@dataclass(frozen=True, slots=True)
class EpisodeTimes:
    """When an episode happened and the times its text mentions."""

    event_time: datetime
    mentions: tuple[TimeMention, ...] = ()

    def overlaps(self, ranges: Sequence[TimeRange]) -> bool:
        """Whether the event time, or any mentioned range, falls in one of ``ranges``."""
        for start, end in ranges:
            if start <= self.event_time < end:
                return True
            if any(m.start < end and m.end > start for m in self.mentions):
                return True
        return False


def mentions_of(content: str, event_time: datetime) -> list[TimeMention]:
    """The time expressions in ``content`` resolved against ``event_time``."""
    return resolve(content, event_time)[:MAX_MENTIONS]


def times_by_episode(
    rows: Iterable[Sequence[Any]], to_datetime: Callable[[Any], datetime]
) -> dict[str, EpisodeTimes]:
    """``EpisodeTimes`` per episode from ``(episode_id, event_time, start, end,
    granularity, expression)`` rows in mention order (``start`` is None for an episode
    without mentions); ``to_datetime`` converts the backend's stored times."""
    found: dict[str, tuple[Any, list[TimeMention]]] = {}
    for episode_id, event_time, start, end, granularity, expression in rows:
        entry = found.setdefault(episode_id, (event_time, []))
        if start is not None:
            entry[1].append(
                TimeMention(expression, to_datetime(start), to_datetime(end), granularity)
            )
    return {
        episode_id: EpisodeTimes(to_datetime(event_time), tuple(mentions))
        for episode_id, (event_time, mentions) in found.items()
    }
