"""Conflict resolution: decide, cheaply first, what each draft fact does to the store.

A draft about one of the names the scope's user goes by is a draft about the user
(``people``); each named user turn records its speaker name as one of them.

For each draft, in event-time order:

1. **Same slot** (subject and predicate). A multi-valued predicate adds the value
   unless it is already there (then the stored fact gains this episode as a source).
   A single-valued predicate places the value in the slot's history by its
   ``valid_from``: the value before it is superseded by it (``valid_to`` set, never
   deleted); a value after it supersedes it in turn; the same value as its
   neighbour only confirms that fact. Two values for the same start: the later
   statement wins. A value stated again after the new one was said holds again
   from then (statements may arrive out of order). So a slot always has one
   current value: the one stated for the latest time.
2. **Same attribute, other predicate.** When the slot is empty, the subject's current
   single-valued facts under *other* predicates are compared by the embedding of the
   predicate's words ("lives in" / "home city"). At or above
   ``SAME_ATTRIBUTE_SIMILARITY`` the draft takes over that attribute (supersedes it);
   between ``AMBIGUOUS_SIMILARITY`` and that, the case is ambiguous: it goes to the
   LLM when one is configured, and is otherwise added alongside (never guessed).
3. **A context-aware extractor's decision** (LLM: UPDATE / NONE naming a stored fact)
   is applied when the named fact exists in scope; otherwise the draft takes steps 1–2.
   An END naming a stored fact is step 4 for that fact's slot and value; one naming
   a fact not in scope changes nothing.
4. **An ending** (END, from the rules: "I left Tencent", "I quit smoking"; or from the
   LLM, naming the fact: "we broke up") ends the
   slot's current fact with that value (an empty value: every current fact of the
   slot) at the draft's ``valid_from``, with no successor: it keeps its row, gains
   ``valid_to`` and ``superseded_at``, and stops being current. A value ended that
   the memory never held is kept as a fact that already ended ("user worked at
   Tencent, until ..."); one already ended is only confirmed. A value stated again
   after it ended starts a new fact.
5. **Dependent slots** (``predicates.DEPENDENT_SLOTS``). When a statement replaces a
   slot's value with another one, or ends it, the current values of the slots that
   depend on it and began before the change end at the change's time, with no
   successor ("I started a new job at Globex" ends the old job title and manager),
   unless the same statement states that slot again (then steps 1-4 decide). This
   runs once all the statement's drafts are applied: at the next statement, or in
   ``finish``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from datetime import datetime
from typing import Protocol

import numpy as np

from ..embed.base import Embedder
from ..ingest.normalise import new_id
from ..store.base import FactChanges, FactQuery, Store, Supersession, fact_scope
from ..types import Episode, Fact, Scope
from .people import is_user, speaker_name, user_names
from .predicates import (
    DEPENDENT_SLOTS,
    USER,
    bare_value,
    embedding_text,
    fact_text,
    is_single_valued,
    normalise_value,
    predicate_label,
)
from .types import ConsolidationReport, Draft

#: Cosine similarity (MiniLM, predicate words) at or above which two single-valued
#: predicates name the same attribute without asking. Predicate words alone separate
#: attributes poorly (synonyms and different attributes score alike: study "Fact
#: extraction that finds what people say", "Similarity of predicate words";
#: tests/facts/test_llm.py), so only near-synonyms clear this bar; the band below it
#: goes to the LLM, or, without one, is kept as two facts (never guessed).
SAME_ATTRIBUTE_SIMILARITY = 0.7
#: Below this, two predicates are different attributes ("lives in" / "works at").
AMBIGUOUS_SIMILARITY = 0.5


class Judge(Protocol):
    """Decides ambiguous conflicts (the LLM); see ``llm_extract.LLMJudge``."""

    def same_attribute(self, old: Fact, new: Draft) -> bool:
        """Whether ``new`` replaces ``old`` (the same attribute of the same subject)."""
        ...


def _start(fact: Fact) -> datetime:
    return fact.valid_from or fact.recorded_at


def _ended_by(fact: Fact, when: datetime) -> bool:
    """Whether ``fact`` ended with no successor at or before ``when``."""
    return (
        fact.superseded_by is None
        and fact.superseded_at is not None
        and fact.valid_to is not None
        and fact.valid_to <= when
    )


def _ending_of(target: Fact, draft: Draft) -> Draft:
    """An END naming ``target`` as an END of its slot's value: the ending applies to
    the stored fact, whatever subject and words the extractor gave."""
    return replace(
        draft,
        subject=target.subject,
        predicate=target.predicate,
        object=target.object,
        text=target.text,
        target=None,
    )


def _on_timeline(fact: Fact) -> bool:
    """Whether the fact held for some time: a value replaced at the very moment it
    began (two values stated for the same start; the later statement won) never did,
    and takes no part in placing the values after it."""
    return fact.valid_to is None or fact.valid_to > _start(fact)


class Resolver:
    """Turns drafts into one ``FactChanges`` against the facts stored in ``scope``."""

    def __init__(
        self,
        store: Store,
        embedder: Embedder,
        scope: Scope,
        report: ConsolidationReport,
        judge: Judge | None = None,
        labels: dict[str, np.ndarray] | None = None,
    ) -> None:
        """``labels`` caches predicate-label vectors; pass one dict to the resolvers of
        one consolidation so each predicate is embedded once."""
        self.store = store
        self.embedder = embedder
        self.scope = fact_scope(scope)
        self.report = report
        self.judge = judge
        self.changes = FactChanges()
        self._slots: dict[tuple[str, str], list[Fact]] = {}
        self._labels = labels if labels is not None else {}
        # The statement (episode) being applied: the slots it states, and the changes
        # it made to slots others depend on (step 5 of the module docstring).
        self._statement: str | None = None
        self._stated: set[tuple[str, str]] = set()
        self._changed: list[tuple[Draft, datetime]] = []
        self._names: list[str] | None = None

    # -- the working view of the store ------------------------------------------------
    def _slot(self, subject: str, predicate: str) -> list[Fact]:
        """Every fact of a slot (current and superseded), oldest ``valid_from`` first."""
        key = (subject, predicate)
        if key not in self._slots:
            found = self.store.find_facts(
                self.scope,
                FactQuery(subjects=(subject,), predicate=predicate, include_superseded=True),
            )
            self._slots[key] = sorted((f for f in found if f.retracted_at is None), key=_start)
        return self._slots[key]

    def _current_of(self, subject: str) -> list[Fact]:
        stored = self.store.find_facts(self.scope, FactQuery(subjects=(subject,)))
        seen = {f.id for f in stored}
        fresh = [f for f in self.changes.added if f.subject == subject and f.id not in seen]
        return [self._latest(f) for f in [*stored, *fresh] if self._latest(f).is_current]

    def _latest(self, fact: Fact) -> Fact:
        for known in self._slots.get((fact.subject, fact.predicate), ()):
            if known.id == fact.id:
                return known
        return fact

    def _update(self, fact: Fact) -> None:
        slot = self._slots.setdefault((fact.subject, fact.predicate), [])
        for i, known in enumerate(slot):
            if known.id == fact.id:
                slot[i] = fact
                break
        else:
            slot.append(fact)
        slot.sort(key=_start)

    def _user_names(self) -> list[str]:
        """The names the scope's user goes by: stored, and added in this step."""
        if self._names is None:
            self._names = list(user_names(self.store, self.scope))
        return self._names

    # -- decisions ----------------------------------------------------------------------
    def note_speaker(self, episode: Episode) -> None:
        """Record the name the user speaks under in ``episode`` (a user turn with a
        speaker) as a name of theirs, once: from the first episode that shows it."""
        name = speaker_name(episode)
        if name is None or is_user(name, self._user_names()):
            return
        self._add(
            Draft(
                subject=USER,
                predicate="goes_by",
                object=name,
                text=fact_text(USER, "goes_by", name),
                episode=episode,
                valid_from=episode.event_time,
                confidence=1.0,
                extractor="speaker",
            )
        )
        self._user_names().append(name)

    def apply(self, draft: Draft) -> None:
        """Decide what ``draft`` changes and record it in ``self.changes``."""
        if draft.action == "END" and draft.target:
            target = self._find(draft.target)
            if target is None:
                return  # the named fact is not in scope: nothing to end
            draft = _ending_of(target, draft)
        if draft.subject != USER and is_user(draft.subject, self._user_names()):
            draft = replace(
                draft, subject=USER, text=fact_text(USER, draft.predicate, draft.object)
            )
        if draft.subject == USER and draft.predicate == "name" and draft.action != "END":
            if not is_user(draft.object, self._user_names()):
                self._user_names().append(draft.object)
        if draft.episode.id != self._statement:
            self._end_dependents()
            self._statement = draft.episode.id
        self._stated.add((draft.subject, draft.predicate))
        self.report.drafts += 1
        if draft.action in ("UPDATE", "NONE") and draft.target:
            target = self._find(draft.target)
            if target is not None:
                if draft.action == "NONE":
                    self._confirm(target, draft)
                else:
                    new = self._add(draft)
                    self._supersede(target, new)
                    if normalise_value(target.object) != normalise_value(draft.object):
                        self._changed.append((draft, _start(new)))
                return
        if draft.action == "END":
            self._end_value(draft)
            self._changed.append((draft, draft.valid_from or draft.episode.event_time))
            return
        single = draft.single_valued
        if single is None:
            single = is_single_valued(draft.predicate)
        slot = self._slot(draft.subject, draft.predicate)
        value = normalise_value(draft.object)
        if not single:
            when = draft.valid_from or draft.episode.event_time
            same = [
                f for f in slot if normalise_value(f.object) == value and not _ended_by(f, when)
            ]
            if same:
                self._confirm(same[-1], draft)
            else:
                self._add(draft)
            return
        if not slot:
            other = self._same_attribute(draft)
            if other is not None:
                if normalise_value(other.object) == value:
                    self._confirm(other, draft)
                else:
                    self._supersede(other, self._add(draft))
                return
        self._place(draft, slot, value)

    def _place(self, draft: Draft, slot: list[Fact], value: str) -> None:
        """Insert a single-valued draft into its slot's history by valid time.

        A draft that starts when a stored value starts replaces it: drafts come in
        event-time order, so the later statement wins.
        """
        when = draft.valid_from or draft.episode.event_time
        timeline = [f for f in slot if _on_timeline(f)]
        before = [f for f in timeline if _start(f) <= when]
        after = [f for f in timeline if _start(f) > when]
        previous = before[-1] if before else None
        following = after[0] if after else None
        if previous is not None and _ended_by(previous, when):
            previous = None  # it ended before this value began: nothing to replace
        if previous is not None and normalise_value(previous.object) == value:
            self._confirm(previous, draft)
            return
        if following is not None and normalise_value(following.object) == value:
            self._confirm(following, draft)
            return
        new = self._add(draft)
        if previous is not None:
            self._supersede(previous, new)
            self._changed.append((draft, when))
            new = self._resume(previous, draft, new, following)
        if following is not None:
            self._supersede(new, following)

    def _resume(self, previous: Fact, draft: Draft, new: Fact, following: Fact | None) -> Fact:
        """``previous``'s value again, from the first time an episode stated it after
        ``draft`` was said (a statement that arrived out of order, inside the span of a
        value restated later); else ``new``. Returns the value that ``following``
        (if any) replaces."""
        said = max(draft.episode.event_time, new.valid_from or draft.episode.event_time)
        times = self.store.episode_times(previous.provenance, self.scope)
        later = {i: t.event_time for i, t in times.items() if t.event_time > said}
        if not later:
            return new
        resumed = min(later.values())
        if following is not None and resumed >= _start(following):
            return new
        restated = replace(
            previous,
            id=new_id("fact"),
            valid_from=resumed,
            valid_to=None,
            supersedes=None,
            superseded_by=None,
            superseded_at=None,
            provenance=tuple(i for i in previous.provenance if i in later),
        )
        self.changes.added.append(restated)
        self._update(restated)
        self.report.added += 1
        self._supersede(new, restated)
        return restated

    def _same_attribute(self, draft: Draft) -> Fact | None:
        """A current single-valued fact of the subject that names the same attribute
        under another predicate, or None."""
        candidates = [
            f
            for f in self._current_of(draft.subject)
            if f.predicate != draft.predicate
            and (is_single_valued(f.predicate) or f.metadata.get("single_valued"))
        ]
        if not candidates:
            return None
        mine = self._label_vector(draft.predicate)
        scored = sorted(
            ((float(self._label_vector(f.predicate) @ mine), f) for f in candidates),
            key=lambda pair: -pair[0],
        )
        similarity, best = scored[0]
        if similarity >= SAME_ATTRIBUTE_SIMILARITY:
            return best
        if similarity >= AMBIGUOUS_SIMILARITY:
            if self.judge is None:
                self.report.ambiguous += 1
                return None
            self.report.llm_calls += 1
            return best if self.judge.same_attribute(best, draft) else None
        return None

    def _label_vector(self, predicate: str) -> np.ndarray:
        if predicate not in self._labels:
            self._labels[predicate] = self.embedder.embed_query(predicate_label(predicate))
        return self._labels[predicate]

    def _find(self, fact_id: str) -> Fact | None:
        for slot in self._slots.values():
            for fact in slot:
                if fact.id == fact_id:
                    return fact
        found = self.store.find_facts(
            self.scope, FactQuery(ids=(fact_id,), include_superseded=True)
        )
        if not found or found[0].retracted_at is not None:
            return None
        for fact in self._slot(found[0].subject, found[0].predicate):
            if fact.id == fact_id:
                return fact
        return found[0]

    # -- changes ------------------------------------------------------------------------
    def _add(self, draft: Draft) -> Fact:
        fact = Fact(
            id=new_id("fact"),
            user_id=self.scope.user_id,
            agent_id=self.scope.agent_id,
            subject=draft.subject,
            predicate=draft.predicate,
            object=draft.object,
            text=draft.text,
            valid_from=draft.valid_from,
            valid_to=None,
            recorded_at=draft.episode.recorded_at,
            confidence=draft.confidence,
            provenance=(draft.episode.id,),
            extractor=draft.extractor,
            metadata={"single_valued": True} if draft.single_valued else {},
        )
        self.changes.added.append(fact)
        self._update(fact)
        self.report.added += 1
        return fact

    def _confirm(self, fact: Fact, draft: Draft) -> None:
        if draft.episode.id not in fact.provenance:
            self._with_source(fact, draft)
            self.report.confirmed += 1

    def _with_source(self, fact: Fact, draft: Draft) -> Fact:
        """``fact`` with ``draft``'s episode among its sources (recorded in the changes)."""
        if draft.episode.id in fact.provenance:
            return fact
        updated = replace(fact, provenance=(*fact.provenance, draft.episode.id))
        pending = self._pending(fact.id)
        if pending is not None:
            self.changes.added[pending] = updated
        else:
            self.changes.sources.append((fact.id, draft.episode.id))
        self._update(updated)
        return updated

    def _supersede(self, old: Fact, new: Fact) -> None:
        """``new`` replaces ``old`` from ``new``'s start; the earliest knowledge of a
        replacement is kept (re-linking a chain never makes an old value current again)."""
        known_at = max(old.recorded_at, new.recorded_at)
        if old.superseded_at is not None:
            known_at = min(known_at, old.superseded_at)
        ended = new.valid_from or new.recorded_at
        if old.valid_to is not None:
            ended = min(ended, old.valid_to)
        step = Supersession(old.id, new.id, ended, known_at)
        self.changes.supersessions.append(step)
        for fact, changes in (
            (old, {"superseded_by": new.id, "superseded_at": known_at, "valid_to": ended}),
            (new, {"supersedes": old.id}),
        ):
            updated = replace(self._latest(fact), **changes)
            pending = self._pending(fact.id)
            if pending is not None:
                self.changes.added[pending] = updated
            self._update(updated)
        self.report.superseded += 1

    def _end_value(self, draft: Draft) -> None:
        """Apply an END draft (step 4 of the module docstring)."""
        slot = self._slot(draft.subject, draft.predicate)
        value = bare_value(draft.object)
        when = draft.valid_from or draft.episode.event_time
        named = [f for f in slot if not value or bare_value(f.object) == value]
        standing = [f for f in named if f.is_current and _start(f) <= when]
        for fact in standing:
            self._end(self._with_source(fact, draft), when, draft.episode.recorded_at)
        if standing or not value:
            return
        if named:
            self._confirm(named[-1], draft)
            return
        self._end(self._add(replace(draft, valid_from=None)), when, draft.episode.recorded_at)

    def _end(self, fact: Fact, when: datetime, learned: datetime) -> None:
        """``fact`` stops holding at ``when`` (as learned at ``learned``), with nothing
        in its place."""
        known_at = max(fact.recorded_at, learned)
        self.changes.supersessions.append(Supersession(fact.id, None, when, known_at))
        updated = replace(fact, valid_to=when, superseded_at=known_at)
        pending = self._pending(fact.id)
        if pending is not None:
            self.changes.added[pending] = updated
        self._update(updated)
        self.report.ended += 1

    def _end_dependents(self) -> None:
        """Step 5 of the module docstring, for the statement just applied."""
        for draft, when in self._changed:
            for predicate in DEPENDENT_SLOTS.get(draft.predicate, ()):
                if (draft.subject, predicate) in self._stated:
                    continue
                for fact in list(self._slot(draft.subject, predicate)):
                    if fact.is_current and _start(fact) < when:
                        ended = self._with_source(fact, draft)
                        self._end(ended, when, draft.episode.recorded_at)
        self._stated.clear()
        self._changed.clear()

    def _pending(self, fact_id: str) -> int | None:
        for i, fact in enumerate(self.changes.added):
            if fact.id == fact_id:
                return i
        return None

    def finish(self, episode_ids: Sequence[str], at: datetime) -> FactChanges:
        """The changes with a vector for each new fact and the episodes marked read.

        Supersessions between two facts both added in this step are already in the
        rows written; the store applies the rest to stored facts.
        """
        self._end_dependents()
        self._statement = None
        changes = self.changes
        if changes.added:
            vectors = self.embedder.embed_documents([embedding_text(f) for f in changes.added])
            changes.vectors = list(vectors)
        changes.consolidated = list(episode_ids)
        changes.consolidated_at = at
        self.changes = FactChanges()
        return changes
