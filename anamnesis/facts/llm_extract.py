"""The optional LLM extractor: context-aware, so the store stays consistent.

For each episode it first retrieves the current stored facts most similar to it
(dense search over fact vectors, ``CONTEXT_FACTS`` of them; with the facts added and
without those replaced or ended earlier in the same consolidation step, which are not
written yet), shows them to the model with the message, and asks for the facts the
message states, each with a decision: ADD (new), UPDATE (replaces the stored fact it
names), END (the stored fact it names stopped being true, with nothing in its place)
or NONE (the stored fact it names already says it). An UPDATE or NONE naming a fact
that was not shown goes through the cheap resolver as a new statement; an END naming
one is dropped, since its fact says what stopped being true and adding it would state
the opposite. ``LLMJudge`` answers the resolver's ambiguous same-attribute questions
with the same client.

Any OpenAI-compatible endpoint works (``anamnesis.llm.ChatClient``).
"""

from __future__ import annotations

import json
import re
from datetime import datetime
from typing import Any

from ..embed.base import Embedder
from ..llm import ChatClient, LLMError
from ..store.base import FactChanges, FactQuery, Store, fact_scope
from ..types import Episode, Fact, Scope
from .predicates import fact_text
from .rules import subject_of
from .types import Draft

#: Stored facts shown to the model with each message.
CONTEXT_FACTS = 10
#: Reply budget per message; a message rarely states more than a handful of facts.
MAX_REPLY_TOKENS = 600
#: Confidence of LLM-extracted facts when the model gives none.
LLM_CONFIDENCE = 0.9

EXTRACT_PROMPT = """You maintain a memory of facts about people as (subject, predicate, object)
triples. Read the message and list the lasting facts it states about its speaker or the
people they mention:
identity, location, work, relationships, possessions, preferences, plans, and dated events.
The speaker is "{speaker}"; use "{speaker}" as the subject of first-person statements.
Use short snake_case predicates (lives_in, works_at, job, likes, partner, pet, plans, ...).
Set "single_valued" to true when a person has one value at a time (where they live, their job).

Stored facts that may be related:
{facts}

For each fact decide:
- "ADD": it is new;
- "UPDATE": it replaces a stored fact (the value changed); set "target" to that fact's id;
- "END": a stored fact stopped being true and nothing replaces it (a break-up, a job
  quit, a plan cancelled, a habit or medicine stopped); set "target" to that fact's id
  and repeat its subject, predicate and object;
- "NONE": a stored fact already says it; set "target" to that fact's id.

Message ({when}) from {speaker}:
{message}

Reply with JSON only: {{"facts": [{{"subject": "...", "predicate": "...", "object": "...",
"single_valued": true, "action": "ADD", "target": null}}]}}.
Reply {{"facts": []}} if there are none."""

JUDGE_PROMPT = """Two statements about {subject}:
A (stored): {old}
B (new): {new}
Do they describe the same attribute, so that B replaces A? Answer "yes" or "no"."""

_JSON = re.compile(r"\{.*\}", re.DOTALL)


class LLMExtractor:
    """Proposes facts with an LLM, deciding ADD / UPDATE / END / NONE against stored facts."""

    name = "llm"

    def __init__(self, client: ChatClient, store: Store, embedder: Embedder, scope: Scope):
        self.client = client
        self.store = store
        self.embedder = embedder
        self.scope = fact_scope(scope)
        self.calls = 0

    def extract(self, episode: Episode, pending: FactChanges | None = None) -> list[Draft]:
        """Draft facts of ``episode``, each with the model's decision.

        ``pending`` are the changes decided earlier in the same consolidation step (not
        yet stored): the facts it adds are shown to the model too, and the stored facts
        it replaced or ended are not.
        """
        speaker = subject_of(episode)
        if speaker is None:
            return []
        context = self._context(episode, pending or FactChanges())
        prompt = EXTRACT_PROMPT.format(
            speaker=speaker,
            facts="\n".join(_describe(f) for f in context) or "(none)",
            when=episode.event_time.strftime("%Y-%m-%d"),
            message=episode.content,
        )
        reply, _ = self.client.complete(
            [{"role": "user", "content": prompt}], max_tokens=MAX_REPLY_TOKENS
        )
        self.calls += 1
        shown = {f.id for f in context}
        return [
            draft
            for item in _parse(reply)
            if (draft := _draft(item, episode, speaker, shown)) is not None
        ]

    def _context(self, episode: Episode, pending: FactChanges) -> list[Fact]:
        """The stored facts most similar to ``episode`` that are still current once
        ``pending`` is applied, then the current facts ``pending`` adds."""
        closed = {step.old_id for step in pending.supersessions}
        vector = self.embedder.embed_query(episode.content)
        ranked = self.store.dense_fact_search(vector, self.scope, None, CONTEXT_FACTS + len(closed))
        ids = tuple(fact_id for fact_id, _ in ranked if fact_id not in closed)[:CONTEXT_FACTS]
        stored = self.store.find_facts(self.scope, FactQuery(ids=ids)) if ids else []
        by_id = {f.id: f for f in stored}
        ordered = [by_id[i] for i in ids if i in by_id]
        fresh = [f for f in pending.added if f.is_current]
        return [*ordered, *fresh][: CONTEXT_FACTS * 2]


class LLMJudge:
    """Answers the resolver's ambiguous same-attribute questions with an LLM."""

    def __init__(self, client: ChatClient) -> None:
        self.client = client

    def same_attribute(self, old: Fact, new: Draft) -> bool:
        prompt = JUDGE_PROMPT.format(subject=old.subject, old=old.text, new=new.text)
        reply, _ = self.client.complete([{"role": "user", "content": prompt}], max_tokens=5)
        return reply.strip().lower().startswith("yes")


def _describe(fact: Fact) -> str:
    since = fact.valid_from.strftime("%Y-%m-%d") if fact.valid_from else "unknown"
    return f"- id={fact.id}: {fact.text} (since {since})"


def _parse(reply: str) -> list[dict[str, Any]]:
    """The ``facts`` list of a reply; LLMError when the reply holds no such JSON."""
    match = _JSON.search(reply)
    if match is None:
        raise LLMError(f"the extractor's reply is not JSON: {reply[:200]!r}")
    try:
        payload = json.loads(match.group(0))
    except json.JSONDecodeError as exc:
        raise LLMError(f"the extractor's reply is not valid JSON ({exc}): {reply[:200]!r}") from exc
    items = payload.get("facts") if isinstance(payload, dict) else None
    if not isinstance(items, list):
        raise LLMError(f"the extractor's reply has no 'facts' list: {reply[:200]!r}")
    return [item for item in items if isinstance(item, dict)]


def _draft(item: dict[str, Any], episode: Episode, speaker: str, shown: set[str]) -> Draft | None:
    """The draft one reply item proposes, or None when it proposes nothing usable.

    An END needs only its target: the resolver ends that fact, whatever the item
    calls it. An END whose target was not shown is dropped (None).
    """
    subject = str(item.get("subject") or speaker).strip()
    predicate = re.sub(r"\s+", "_", str(item.get("predicate") or "").strip().lower())
    obj = str(item.get("object") or "").strip()
    action = str(item.get("action") or "ADD").upper()
    # A target is a fact id (a string); anything else names no fact.
    target = item.get("target") if isinstance(item.get("target"), str) else None
    if action == "END":
        if target not in shown:
            return None
    elif not predicate or not obj:
        return None
    elif action not in ("ADD", "UPDATE", "NONE") or target not in shown:
        action, target = "ADD", None
    single = item.get("single_valued")
    valid_from: datetime = episode.event_time
    return Draft(
        subject=subject,
        predicate=predicate,
        object=obj,
        text=fact_text(subject, predicate, obj),
        episode=episode,
        valid_from=valid_from,
        confidence=_confidence(item.get("confidence")),
        extractor="llm",
        action=action,  # type: ignore[arg-type]
        target=target,
        single_valued=single if isinstance(single, bool) else None,
    )


def _confidence(value: Any) -> float:
    """The item's confidence when it reads as a number in [0, 1], else ``LLM_CONFIDENCE``."""
    if isinstance(value, bool) or not isinstance(value, int | float | str):
        return LLM_CONFIDENCE
    try:
        number = float(value)
    except ValueError:
        return LLM_CONFIDENCE
    return number if 0.0 <= number <= 1.0 else LLM_CONFIDENCE
