"""Abstractive session summaries: a few sentences an LLM writes from one session.

``build.refresh`` uses them when the Memory has an LLM and ``consolidate`` is not told
``summaries="extractive"``. The model is shown one session and nothing else: the
turns of that user, agent and session (``build._session_episodes``), each dated and
with its speaker and role, at most ``SESSION_TOKENS`` tokens of them, with the
sentences of the extractive summary marked as the important ones. When the turns do
not fit, the turns holding those sentences go in first, then the others in
conversation order while they fit; the prompt and the stored body say how many were
left out.

Provenance is every episode shown to the model (not only the extractive lines'):
the text may carry words of any of them, so ``forget`` of any one must drop the
summary in the same transaction, as it does for an item's provenance. The body keeps
the extractive lines too, and says ``method: "abstractive"`` and the model.

The stored fingerprint is the session's plus the mode, the model and
``PROMPT_VERSION``, so a change of any of them rebuilds the summary at the next
consolidation, and an extractive summary (no LLM, or a fallback) is never taken for
an abstractive one.

When the endpoint fails (HTTP error, timeout, unreadable payload: ``LLMError``) or
the reply is empty, the session keeps its extractive summary, fingerprinted as
extractive, so the next consolidation asks the model again. After an endpoint
failure the rest of that run is extractive without calling it (one timeout, not one
per session). The first fallback warns once per Memory, and
``Memory.capabilities["summaries"]`` says why until the model answers again.
"""

from __future__ import annotations

import dataclasses
import re
import threading
import warnings
from datetime import datetime

from ..llm import ChatClient, LLMError
from ..store.base import DerivedRow, SessionPrint
from ..tokens import TokenCounter
from ..types import Episode
from . import summaries

EXTRACTIVE = "extractive"
ABSTRACTIVE = "abstractive"
#: Bumped when the prompt changes, so that stored summaries are rebuilt.
PROMPT_VERSION = 1
#: Tokens of turns shown per session (WordPiece, ``anamnesis.tokens``). A first
#: guess, not tuned: with the instructions and the reply it fits an 8k-token model.
SESSION_TOKENS = 3000
#: Characters of one turn shown; a longer turn is cut (and marked with "...").
MAX_TURN_CHARS = 2000
#: The reply's budget: a few sentences.
MAX_REPLY_TOKENS = 300
#: Characters of a reply kept; a longer one is cut at its last sentence end before.
MAX_SUMMARY_CHARS = 1200

PROMPT = """Summarise one conversation session for a long-term memory.
Write at most five short sentences, in the third person, that keep what is worth
remembering: facts about the people, events and their dates, names, numbers, plans
and decisions. Name the speakers. Use only what the turns below say, and give dates
as absolute dates (each turn is dated).

The session ran from {start} to {end} and has {count} turns. {omitted}

Sentences a rule marked as important:
{lines}

Turns:
{turns}

Reply with the summary only."""

_LABEL = re.compile(r"^\s*(?:summary|session summary)\s*:\s*", re.IGNORECASE)


class Summarizer:
    """Writes session summaries with an LLM, falling back to extractive ones; holds
    what a Memory reports about it (``state``)."""

    def __init__(self, client: ChatClient) -> None:
        self.client = client
        #: Why the last summary fell back to extractive, until the model answers again.
        self.failure: str | None = None
        self._warned = False
        self._lock = threading.Lock()
        self._tokens: TokenCounter | None = None

    @property
    def state(self) -> str:
        """``"abstractive"``, or why summaries are falling back to extractive."""
        failure = self.failure
        return ABSTRACTIVE if failure is None else f"extractive fallback: {failure}"

    def fingerprint(self, session: SessionPrint) -> str:
        """The fingerprint of an abstractive summary of ``session`` by this model."""
        return f"{session.fingerprint}|{ABSTRACTIVE}:{self.client.model}:v{PROMPT_VERSION}"

    def start(self) -> SummaryRun:
        """The state of one consolidation run."""
        return SummaryRun(self)

    def count(self, texts: list[str]) -> list[int]:
        """Token counts of ``texts``."""
        with self._lock:
            if self._tokens is None:
                self._tokens = TokenCounter()
            return self._tokens.count(texts)

    def fell_back(self, why: str) -> None:
        """Record a fallback; warn the first time."""
        with self._lock:
            self.failure = why
            first, self._warned = not self._warned, True
        if first:
            warnings.warn(
                f"abstractive session summaries fell back to extractive ones ({why}); "
                "the next consolidate asks the model again. capabilities['summaries'] "
                "says why until it answers.",
                RuntimeWarning,
                stacklevel=2,
            )


@dataclasses.dataclass(slots=True)
class SummaryRun:
    """One consolidation run's summaries: how many the model wrote, how many fell
    back, and whether the endpoint failed (then the rest of the run is extractive)."""

    summarizer: Summarizer
    abstractive: int = 0
    fallbacks: int = 0
    endpoint_down: bool = False

    def build(
        self,
        user_id: str,
        session: SessionPrint,
        episodes: list[Episode],
        fact_objects: dict[str, tuple[str, ...]],
        built_at: datetime,
    ) -> DerivedRow:
        """The summary of one session: the model's, else the extractive one."""
        extractive = summaries.build_summary(user_id, session, episodes, fact_objects, built_at)
        if self.endpoint_down:
            self.fallbacks += 1
            return extractive
        shown, prompt = self._prompt(session, episodes, extractive)
        try:
            reply, _ = self.summarizer.client.complete(
                [{"role": "user", "content": prompt}], max_tokens=MAX_REPLY_TOKENS
            )
        except LLMError as exc:
            self.endpoint_down = True
            return self._fallback(extractive, str(exc))
        text = clean_reply(reply)
        if not text:
            return self._fallback(extractive, f"{self.summarizer.client.model} replied nothing")
        self.summarizer.failure = None
        self.abstractive += 1
        return dataclasses.replace(
            extractive,
            text=f"{session.start_time:%d %B %Y}: {text}",
            body={
                **extractive.body,
                "method": ABSTRACTIVE,
                "model": self.summarizer.client.model,
                "summary": text,
                "turns": len(episodes),
                "shown": len(shown),
            },
            provenance=tuple(e.id for e in shown),
            fingerprint=self.summarizer.fingerprint(session),
        )

    def _fallback(self, extractive: DerivedRow, why: str) -> DerivedRow:
        self.fallbacks += 1
        self.summarizer.fell_back(why)
        return extractive

    def _prompt(
        self, session: SessionPrint, episodes: list[Episode], extractive: DerivedRow
    ) -> tuple[list[Episode], str]:
        """The turns shown (in conversation order) and the prompt that shows them."""
        rendered = [render_turn(e) for e in episodes]
        costs = self.summarizer.count(rendered)
        important = {line["episode_id"] for line in extractive.body["lines"]}
        order = sorted(range(len(episodes)), key=lambda i: (episodes[i].id not in important, i))
        chosen: set[int] = set()
        used = 0
        for i in order:
            if used + costs[i] <= SESSION_TOKENS:
                chosen.add(i)
                used += costs[i]
        kept = sorted(chosen)
        left_out = len(episodes) - len(kept)
        omitted = (
            f"{left_out} of them are left out for length (the turns holding the important "
            "sentences were kept first, then the others in order)."
            if left_out
            else "All of them are shown."
        )
        lines = "\n".join(
            f"- {line['speaker'] or 'someone'}: {line['text']}" for line in extractive.body["lines"]
        )
        prompt = PROMPT.format(
            start=f"{session.start_time:%Y-%m-%d %H:%M}",
            end=f"{session.end_time:%Y-%m-%d %H:%M}",
            count=len(episodes),
            omitted=omitted,
            lines=lines or "(none)",
            turns="\n".join(rendered[i] for i in kept),
        )
        return [episodes[i] for i in kept], prompt


def render_turn(episode: Episode) -> str:
    """One turn as the model sees it: its date and time, speaker and role, text."""
    who = episode.speaker or episode.role or "someone"
    if episode.speaker and episode.role:
        who = f"{episode.speaker} ({episode.role})"
    content = " ".join(episode.content.split())
    if len(content) > MAX_TURN_CHARS:
        content = content[:MAX_TURN_CHARS].rstrip() + "..."
    return f"[{episode.event_time:%Y-%m-%d %H:%M}] {who}: {content}"


def clean_reply(reply: str) -> str:
    """The summary in a reply: one paragraph, without a "Summary:" label or wrapping
    quotes, at most ``MAX_SUMMARY_CHARS`` (cut at a sentence end when there is one)."""
    text = " ".join(_LABEL.sub("", reply.strip()).split())
    if len(text) >= 2 and text[0] == text[-1] and text[0] in "\"'":
        text = text[1:-1].strip()
    if len(text) > MAX_SUMMARY_CHARS:
        cut = text[:MAX_SUMMARY_CHARS]
        end = max(cut.rfind(". "), cut.rfind("! "), cut.rfind("? "))
        text = cut[: end + 1] if end > 0 else cut.rstrip() + "..."
    return text
