"""The LLM extractor and the escalation of ambiguous conflicts, against a fake
OpenAI-compatible server on loopback (real HTTP, scripted replies: the ``fake_llm``
fixture, ``llm_fixtures.FakeLLM``)."""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime

import pytest

from anamnesis import Memory
from anamnesis.facts.llm_extract import LLMJudge
from anamnesis.facts.resolve import AMBIGUOUS_SIMILARITY, SAME_ATTRIBUTE_SIMILARITY, Resolver
from anamnesis.facts.types import ConsolidationReport, Draft
from anamnesis.llm import LLMError
from anamnesis.store.base import FactQuery
from anamnesis.types import Episode, Scope


def message_of(prompt: str) -> str:
    return prompt.split("from user:\n", 1)[1].split("\n\nReply with JSON", 1)[0]


def shown_id(prompt: str, value: str) -> str:
    return re.search(rf"id=(\S+): [^\n]*{value}", prompt).group(1)  # type: ignore[union-attr]


def residence(value: str, action: str = "ADD", target: str | None = None) -> str:
    fact = {
        "subject": "user",
        "predicate": "residence",
        "object": value,
        "single_valued": True,
        "action": action,
        "target": target,
    }
    return json.dumps({"facts": [fact]})


def extraction_script(prompt: str) -> str:
    message = message_of(prompt)
    if "Boston" in message:
        return "Sure! " + residence("Boston")
    if "Denver" in message and "moved" in message:
        return residence("Denver", "UPDATE", shown_id(prompt, "Boston"))
    if "Denver" in message:
        return residence("Denver", "NONE", shown_id(prompt, "Denver"))
    return '{"facts": []}'


MESSAGES = [
    {"role": "user", "content": "My flat in Boston is tiny.", "event_time": "2022-01-01"},
    {"role": "user", "content": "We finally moved to Denver!", "event_time": "2023-01-01"},
    {"role": "user", "content": "Denver winters are sunny.", "event_time": "2023-02-01"},
]


def test_the_llm_extractor_adds_updates_and_confirms(fake_llm, tmp_path, embedder):
    fake_llm.script = extraction_script
    with Memory(path=tmp_path / "m.db", embedder=embedder, llm=fake_llm.client()) as memory:
        assert memory.capabilities["llm"] == "fake-model"
        episodes = memory.add(MESSAGES)
        report = memory.consolidate()
        assert (report.extractor, report.llm_calls) == ("llm", 3)
        assert (report.added, report.superseded, report.confirmed) == (2, 1, 1)
        denver, boston = memory.facts(include_superseded=True)
        assert (denver.object, boston.object) == ("Denver", "Boston")
        assert denver.is_current and boston.superseded_by == denver.id  # kept, not deleted
        assert denver.provenance == (episodes[1].id, episodes[2].id)
        assert denver.extractor == "llm"
    # Context-aware: the second message was shown the stored Boston fact.
    assert "user residence Boston" in fake_llm.prompts[1]


def test_a_decision_naming_an_unknown_fact_goes_through_the_cheap_resolver(
    fake_llm, tmp_path, embedder
):
    def script(prompt: str) -> str:
        value = "Boston" if "Boston" in message_of(prompt) else "Denver"
        return residence(value, "UPDATE", "fact_that_does_not_exist")

    fake_llm.script = script
    with Memory(path=tmp_path / "m.db", embedder=embedder, llm=fake_llm.client()) as memory:
        memory.add(MESSAGES[:2])
        memory.consolidate()
        # Same subject and single-valued slot with a new value: superseded anyway.
        assert [f.object for f in memory.fact_history(predicate="residence")] == [
            "Boston",
            "Denver",
        ]


def test_an_unusable_reply_is_a_typed_error_and_writes_nothing(fake_llm, tmp_path, embedder):
    fake_llm.script = lambda prompt: "I cannot help with that."
    with Memory(path=tmp_path / "m.db", embedder=embedder, llm=fake_llm.client()) as memory:
        memory.add(MESSAGES[:1])
        with pytest.raises(LLMError, match="not JSON"):
            memory.consolidate()
        assert memory.store.unconsolidated_episodes(Scope("default"), 10) != []
        assert memory.consolidate(extractor="rules").episodes == 1  # rules need no model


def test_llm_extractor_needs_an_llm(memory):
    from anamnesis.errors import InvalidInputError

    with pytest.raises(InvalidInputError, match="needs an LLM"):
        memory.consolidate(extractor="llm")


# -- same attribute under another predicate -------------------------------------------------------
def test_predicate_similarity_bands(embedder):
    def similarity(a: str, b: str) -> float:
        return float(embedder.embed_query(a) @ embedder.embed_query(b))

    assert similarity("lives in", "resides in") >= SAME_ATTRIBUTE_SIMILARITY
    assert AMBIGUOUS_SIMILARITY <= similarity("job", "occupation") < SAME_ATTRIBUTE_SIMILARITY
    assert similarity("lives in", "works at") < AMBIGUOUS_SIMILARITY


def draft(predicate: str, value: str, day: int) -> Draft:
    when = datetime(2023, 1, day, tzinfo=UTC)
    episode = Episode(
        id=f"ep_{day}",
        user_id="default",
        agent_id=None,
        session_id=None,
        role="user",
        speaker=None,
        content=f"{predicate} {value}",
        modality="text",
        event_time=when,
        recorded_at=when,
        metadata={},
        content_hash=f"h{day}",
    )
    return Draft(
        subject="user",
        predicate=predicate,
        object=value,
        text=f"user {predicate} {value}",
        episode=episode,
        valid_from=when,
        confidence=0.9,
        extractor="llm",
        single_valued=True,
    )


def resolve(memory: Memory, judge: LLMJudge | None, *drafts: Draft) -> ConsolidationReport:
    report = ConsolidationReport()
    for item in drafts:
        resolver = Resolver(memory.store, memory.embedder, Scope("default"), report, judge)
        resolver.apply(item)
        memory.store.write_facts(resolver.finish([], datetime.now(UTC)), Scope("default"))
    return report


def test_a_synonymous_predicate_supersedes_without_asking(memory):
    report = resolve(memory, None, draft("lives_in", "Boston", 1), draft("resides_in", "Denver", 2))
    assert report.superseded == 1 and report.llm_calls == 0
    assert [f.object for f in memory.facts()] == ["Denver"]


def test_an_ambiguous_predicate_goes_to_the_llm_when_configured(memory, fake_llm):
    fake_llm.script = lambda prompt: "Yes."
    report = resolve(
        memory,
        LLMJudge(fake_llm.client()),
        draft("job", "engineer", 1),
        draft("occupation", "teacher", 2),
    )
    assert (report.superseded, report.llm_calls) == (1, 1)
    assert "A (stored): user job engineer" in fake_llm.prompts[0]
    assert [f.object for f in memory.facts()] == ["teacher"]


def test_an_ambiguous_predicate_without_an_llm_keeps_both(memory):
    report = resolve(memory, None, draft("job", "engineer", 1), draft("occupation", "teacher", 2))
    assert (report.superseded, report.ambiguous) == (0, 1)
    assert sorted(f.object for f in memory.store.find_facts(Scope("default"), FactQuery())) == [
        "engineer",
        "teacher",
    ]
