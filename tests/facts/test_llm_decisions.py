"""The LLM extractor's decisions through Memory: ADD, UPDATE, END and NONE.

A message says a fact is new (ADD), that a stored value changed (UPDATE: the old fact
is superseded and kept), or that a stored fact stopped being true with nothing in its
place (END: "we broke up", "the Lisbon trip is cancelled", "I stopped taking the iron
tablets"; the fact gains ``valid_to`` at the message's event time, no successor, and
stays in history). A decision names the stored fact by the id the prompt showed; an
END naming a fact that was not shown changes nothing. Both backends, the static
embedder, the fake OpenAI-compatible server on loopback answering as ``FactModel``.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from datetime import UTC, datetime

import pytest
from llm_fixtures import FactModel, FakeLLM, Said
from store_fixtures import (  # noqa: F401  (fixtures are found by their registered names)
    backend_fixture,
    postgres_schema_url_fixture,
    store_url_fixture,
)

from anamnesis import Memory
from anamnesis.embed import get_embedder
from anamnesis.llm import LLMError
from anamnesis.store.base import FactQuery
from anamnesis.types import Scope

EDGE = get_embedder("edge")
JAN = datetime(2024, 1, 9, 8, tzinfo=UTC)
MARCH = datetime(2024, 3, 1, 8, tzinfo=UTC)
JUNE = datetime(2024, 6, 10, 8, tzinfo=UTC)

LINES = {
    "boyfriend Femi": [Said("partner", "Femi")],
    "flat in Ordsall": [Said("lives_in", "Ordsall")],
    "keys to the Edgeley house": [Said("lives_in", "Edgeley")],
    "Femi and I broke up": [Said("partner", "Femi", end=True)],
    "booked Lisbon": [Said("plans", "a trip to Lisbon", single_valued=False)],
    "Lisbon trip is cancelled": [Said("plans", "a trip to Lisbon", single_valued=False, end=True)],
    "prescribed iron tablets": [Said("takes", "iron tablets", single_valued=False)],
    "stopped taking the iron tablets": [
        Said("takes", "iron tablets", single_valued=False, end=True)
    ],
    "data analyst at Northway": [Said("works_at", "Northway"), Said("job", "data analyst")],
    "manager is Graham": [Said("boss", "Graham Pike")],
    "quit my job at Northway": [Said("works_at", "Northway", end=True)],
}


@pytest.fixture
def memory(backend: str, store_url: str, fake_llm: FakeLLM) -> Iterator[Memory]:
    where = {"path": store_url} if backend == "sqlite" else {"url": store_url}
    with Memory(**where, embedder=EDGE, warm=False, llm=fake_llm.client()) as memory:
        yield memory


@pytest.fixture
def model(fake_llm: FakeLLM) -> FactModel:
    model = FactModel(LINES)
    fake_llm.script = model
    return model


def said(memory: Memory, text: str, when: datetime):
    memory.add(text, role="user", event_time=when)
    return memory.consolidate()


def current(memory: Memory, predicate: str) -> list[str]:
    return [f.object for f in memory.facts(predicate=predicate)]


def test_add_then_update_supersedes_and_keeps_the_old_value(memory, model) -> None:
    report = said(memory, "I live in a flat in Ordsall.", JAN)
    assert (report.added, report.superseded, report.llm_calls) == (1, 0, 1)
    report = said(memory, "Got the keys to the Edgeley house!", MARCH)
    assert (report.added, report.superseded) == (1, 1)
    assert model.decisions == [
        ("flat in Ordsall", "ADD", None),
        ("keys to the Edgeley house", "UPDATE", "Ordsall"),
    ]
    assert current(memory, "lives_in") == ["Edgeley"]
    ordsall, edgeley = memory.fact_history(predicate="lives_in")
    assert (ordsall.object, ordsall.valid_to, ordsall.superseded_by) == (
        "Ordsall",
        MARCH,
        edgeley.id,
    )
    assert (edgeley.valid_from, edgeley.supersedes, edgeley.extractor) == (MARCH, ordsall.id, "llm")


@pytest.mark.parametrize(
    ("start", "end", "predicate", "value"),
    [
        ("My boyfriend Femi is a radiographer.", "Femi and I broke up.", "partner", "Femi"),
        (
            "We booked Lisbon for July!",
            "The Lisbon trip is cancelled.",
            "plans",
            "a trip to Lisbon",
        ),
        (
            "Dr. Anand prescribed iron tablets.",
            "I stopped taking the iron tablets.",
            "takes",
            "iron tablets",
        ),
    ],
    ids=["broke-up", "trip-cancelled", "tablets-stopped"],
)
def test_end_stops_a_fact_with_nothing_in_its_place(
    memory, model, start: str, end: str, predicate: str, value: str
) -> None:
    said(memory, start, JAN)
    episode = memory.add(end, role="user", event_time=JUNE)[0]
    report = memory.consolidate()
    assert (report.ended, report.added, report.superseded) == (1, 0, 0)
    assert model.decisions[-1][1:] == ("END", value)
    assert current(memory, predicate) == []
    [ended] = memory.fact_history(predicate=predicate)
    assert (ended.object, ended.valid_from, ended.valid_to) == (value, JAN, JUNE)
    assert ended.superseded_by is None and ended.superseded_at is not None
    assert episode.id in ended.provenance  # the ending message is a source of it
    assert memory.facts(predicate=predicate, include_superseded=True) == [ended]


def test_facts_as_of_before_and_after_the_end(memory, model) -> None:
    said(memory, "My boyfriend Femi is a radiographer.", JAN)
    before = datetime.now(UTC)
    said(memory, "Femi and I broke up.", JUNE)
    after = datetime.now(UTC)
    assert [f.object for f in memory.facts(predicate="partner", as_of=before)] == ["Femi"]
    assert memory.facts(predicate="partner", as_of=after) == []
    # Known now, and true in the world until the message's event time.
    [femi] = memory.fact_history(predicate="partner")
    assert femi.valid_to == JUNE


def test_ending_an_employer_ends_its_dependent_slots(memory, model) -> None:
    said(memory, "I'm a data analyst at Northway Housing.", JAN)
    said(memory, "My manager is Graham Pike.", JAN)
    report = said(memory, "I quit my job at Northway today.", JUNE)
    assert report.ended == 3  # the employer, and the title and manager that belong to it
    for predicate in ("works_at", "job", "boss"):
        assert current(memory, predicate) == [], predicate
        [old] = memory.fact_history(predicate=predicate)
        assert (old.valid_to, old.superseded_by) == (JUNE, None)


def end_of(target: str, **item: object) -> str:
    return json.dumps({"facts": [{"action": "END", "target": target, **item}]})


def femi_id(prompt: str) -> str:
    return re.search(r"id=(\S+): user's partner is Femi", prompt).group(1)  # type: ignore[union-attr]


def test_an_end_is_of_the_fact_it_names_whatever_the_item_calls_it(memory, model, fake_llm) -> None:
    said(memory, "My boyfriend Femi is a radiographer.", JAN)
    fake_llm.script = lambda prompt: end_of(
        femi_id(prompt), subject="Dara", predicate="relationship", object="Femi Okafor"
    )
    assert said(memory, "It's over with him.", JUNE).ended == 1
    assert current(memory, "partner") == []
    assert memory.facts(predicate="relationship", include_superseded=True) == []


@pytest.mark.parametrize(
    "target", ["fact_never_stored", None, ["a", "list"]], ids=["unknown", "none", "list"]
)
def test_an_end_naming_no_shown_fact_changes_nothing(memory, model, fake_llm, target) -> None:
    said(memory, "My boyfriend Femi is a radiographer.", JAN)
    # Read as a statement, the item would make "Femi Okafor" the partner.
    fake_llm.script = lambda prompt: end_of(
        target, subject="user", predicate="partner", object="Femi Okafor"
    )
    report = said(memory, "Femi and I broke up.", JUNE)
    assert (report.ended, report.added, report.episodes) == (0, 0, 1)
    assert current(memory, "partner") == ["Femi"]
    assert len(memory.facts(include_superseded=True)) == 1


def test_an_end_naming_a_fact_of_another_scope_changes_nothing(backend, store_url, fake_llm):
    """A shown id is the only way to name a fact; an id from another user's facts
    (a model that invents or repeats ids) is not in scope and ends nothing."""
    where = {"path": store_url} if backend == "sqlite" else {"url": store_url}
    fake_llm.script = FactModel(LINES)
    with Memory(**where, embedder=EDGE, warm=False, llm=fake_llm.client()) as memory:
        memory.add("My boyfriend Femi is a radiographer.", role="user", user_id="a", event_time=JAN)
        memory.add("My boyfriend Femi is a radiographer.", role="user", user_id="b", event_time=JAN)
        memory.consolidate(user_id="a")
        memory.consolidate(user_id="b")
        [theirs] = memory.facts(user_id="b")
        fake_llm.script = lambda prompt: end_of(theirs.id)
        memory.add("Femi and I broke up.", role="user", user_id="a", event_time=JUNE)
        assert memory.consolidate(user_id="a").ended == 0
        assert [f.object for f in memory.facts(user_id="a")] == ["Femi"]
        assert memory.facts(user_id="b") == [theirs]


@pytest.mark.parametrize(
    "item",
    [
        {"predicate": "lives_in", "object": "Edgeley", "confidence": "high"},
        {"predicate": "lives_in", "object": "Edgeley", "confidence": 7},
        {"predicate": "lives_in", "object": "Edgeley", "target": {"id": 1}},
        {"predicate": "lives_in", "object": "Edgeley", "action": "DELETE"},
    ],
    ids=["confidence-word", "confidence-out-of-range", "target-object", "unknown-action"],
)
def test_an_odd_field_in_a_reply_item_is_read_as_a_plain_add(memory, fake_llm, item) -> None:
    fake_llm.script = lambda prompt: json.dumps({"facts": [item]})
    report = said(memory, "Got the keys to the Edgeley house!", MARCH)
    assert (report.added, report.episodes) == (1, 1)
    [fact] = memory.facts()
    assert (fact.object, fact.confidence) == ("Edgeley", 0.9)


@pytest.mark.parametrize(
    ("reply", "error"),
    [
        ("I cannot help with that.", "not JSON"),
        ('{"facts": [{"predicate": "lives_in",', "not JSON"),
        ('{"facts": "Edgeley"}', "no 'facts' list"),
    ],
    ids=["prose", "cut-off", "no-list"],
)
def test_an_unusable_reply_is_a_typed_error_and_writes_nothing(
    memory, fake_llm, reply: str, error: str
) -> None:
    fake_llm.script = lambda prompt: reply
    memory.add("Got the keys to the Edgeley house!", role="user", event_time=MARCH)
    with pytest.raises(LLMError, match=error):
        memory.consolidate()
    assert memory.store.unconsolidated_episodes(Scope("default"), 10) != []
    assert memory.store.find_facts(Scope("default"), FactQuery(include_superseded=True)) == []
    assert memory.consolidate(extractor="rules").episodes == 1  # rules need no model


def test_the_prompt_offers_end(memory, fake_llm) -> None:
    said(memory, "Anything at all.", JAN)
    assert '"END": a stored fact stopped being true' in fake_llm.prompts[0]


def test_a_fact_replaced_earlier_in_the_same_consolidation_is_not_shown(memory, fake_llm):
    """Veganuary, then back to fish, read in one consolidation: the second message is
    shown the vegan fact the first one added, not the pescatarian fact it replaced
    (still current in the store until the step is written)."""
    model = FactModel(
        {
            "start eating fish": [Said("diet", "pescatarian")],
            "Doing Veganuary": [Said("diet", "vegan")],
            "Veganuary done": [Said("diet", "pescatarian")],
        }
    )
    fake_llm.script = model
    said(memory, "I'm going to start eating fish.", JAN)
    memory.add("Doing Veganuary this year.", role="user", event_time=MARCH)
    memory.add("Veganuary done, back to fish.", role="user", event_time=JUNE)
    memory.consolidate()
    assert model.decisions[-1] == ("Veganuary done", "UPDATE", "vegan")
    assert [f.object for f in memory.fact_history(predicate="diet")] == [
        "pescatarian",
        "vegan",
        "pescatarian",
    ]
    assert current(memory, "diet") == ["pescatarian"]
