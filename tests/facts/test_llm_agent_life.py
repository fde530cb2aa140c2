"""The LLM update path end to end on an agent-life persona (``bench/agent_life``).

Dara's notes are stored and consolidated as the dev set prescribes (at each question's
``asked_at``, only the notes written by then), with the LLM extractor against the fake
endpoint answering as ``FactModel``: a fixed table of what her notes state, decided
ADD / UPDATE / END against the stored facts each prompt shows. This checks
correctness, not a model: each single-valued slot has exactly one current value, the
values it replaced stay in its history, and for each current-state question about a
scripted slot, the current fact rests on one of the question's gold notes and on none
of its stale ones (none at all when the answer is that it ended), then again at the
end with ``as_of`` the moment each was first asked. Both backends, the static embedder.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest
from llm_fixtures import FactModel, FakeLLM, Said
from store_fixtures import (  # noqa: F401  (fixtures are found by their registered names)
    backend_fixture,
    postgres_schema_url_fixture,
    store_url_fixture,
)

import anamnesis
from anamnesis import Memory
from anamnesis.embed import get_embedder
from anamnesis.facts.predicates import is_single_valued
from anamnesis.types import Fact

PERSONA = (
    Path(anamnesis.__file__).parent / "bench" / "agent_life" / "personas" / "dara-okonkwo.json"
)
USER = "dara-okonkwo"
LISBON = "a trip to Lisbon, 12-19 July"

#: What a careful model reads in Dara's notes (a phrase of the note -> its facts).
#: The assistant's notes reach no extractor, so the iron tablets (stated only there)
#: and the running plans (not scripted) are left out.
LINES = {
    "data analyst at Northway Housing": [
        Said("works_at", "Northway Housing"),
        Said("job", "data analyst"),
    ],
    "two-bed flat in Ordsall": [Said("lives_in", "Ordsall, Salford")],
    "vegetarian for about six years": [Said("diet", "vegetarian")],
    "My boyfriend Femi": [Said("partner", "Femi")],
    "booked Lisbon": [Said("plans", LISBON, single_valued=False)],
    "GP is Dr. Anand": [Said("gp", "Dr. Anand")],
    "start eating fish": [Said("diet", "pescatarian")],
    "My manager at Northway, Graham Pike": [Said("boss", "Graham Pike")],
    "starter is called Doughvid": [Said("sourdough_starter", "Doughvid")],
    "First week at the new place": [Said("works_at", "Pennyworth"), Said("boss", "Hattie")],
    "Femi and I broke up": [Said("partner", "Femi", end=True)],
    "Lisbon trip (12-19 July) is cancelled": [Said("plans", LISBON, single_valued=False, end=True)],
    "Got the keys to the Edgeley house": [Said("lives_in", "Edgeley, Stockport")],
    "My new GP is Dr. Whitlow": [Said("gp", "Dr. Whitlow")],
    "kibble (Skinner's": [Said("food", "Skinner's Field & Trial", subject="Biscuit")],
    "first one-to-one with Oskar": [Said("boss", "Oskar Lind")],
    "Jules and I are officially together": [Said("partner", "Jules")],
    "Doing Veganuary": [Said("diet", "vegan")],
    "now she's on Burns Sensitive": [Said("food", "Burns Sensitive", subject="Biscuit")],
    "Veganuary done": [Said("diet", "pescatarian")],
    "Switched Biscuit to Castle Vets": [Said("vet", "Castle Vets", subject="Biscuit")],
    "Promoted to senior product analyst": [Said("job", "senior product analyst")],
    "New sourdough starter": [Said("sourdough_starter", "Loaf Actually")],
}

#: The persona's current-state questions about a scripted slot: (subject, predicate),
#: and whether the answer is a value (False: what the question asks about has ended).
SLOTS = {
    "Where does Dara work now?": ("user", "works_at", True),
    "What is Dara's job title at the moment?": ("user", "job", True),
    "Who is Dara's manager these days?": ("user", "boss", True),
    "Where do I live now?": ("user", "lives_in", True),
    "Who is Dara's partner currently?": ("user", "partner", True),
    "Is Dara still vegetarian?": ("user", "diet", True),
    "Who is my GP now?": ("user", "gp", True),
    "Which vet does Biscuit go to now?": ("Biscuit", "vet", True),
    "What food is Biscuit on these days?": ("Biscuit", "food", True),
    "What is Dara's sourdough starter called these days?": ("user", "sourdough_starter", True),
    "Are Dara and Femi still going to Lisbon in July?": ("user", "plans", False),
    "Where does Dara work at the moment?": ("user", "works_at", True),
}

#: Every value each slot held, oldest first, once all the notes are read.
HISTORY = {
    ("user", "works_at"): ["Northway Housing", "Pennyworth"],
    ("user", "job"): ["data analyst", "senior product analyst"],
    ("user", "boss"): ["Graham Pike", "Hattie", "Oskar Lind"],
    ("user", "lives_in"): ["Ordsall, Salford", "Edgeley, Stockport"],
    ("user", "partner"): ["Femi", "Jules"],
    ("user", "diet"): ["vegetarian", "pescatarian", "vegan", "pescatarian"],
    ("user", "gp"): ["Dr. Anand", "Dr. Whitlow"],
    ("user", "sourdough_starter"): ["Doughvid", "Loaf Actually"],
    ("Biscuit", "food"): ["Skinner's Field & Trial", "Burns Sensitive"],
}


def when(text: str) -> datetime:
    return datetime.fromisoformat(text.replace("Z", "+00:00"))


@pytest.fixture
def persona() -> dict:
    persona = json.loads(PERSONA.read_text())
    assert persona["user_id"] == USER
    return persona


@pytest.fixture
def memory(backend: str, store_url: str, fake_llm: FakeLLM) -> Iterator[Memory]:
    where = {"path": store_url} if backend == "sqlite" else {"url": store_url}
    embedder = get_embedder("edge")
    with Memory(**where, embedder=embedder, warm=False, llm=fake_llm.client()) as memory:
        yield memory


def current_slots(facts: list[Fact]) -> list[tuple[str, str]]:
    """The (subject, predicate) of each current single-valued fact."""
    return [
        (f.subject, f.predicate)
        for f in facts
        if f.is_current and (is_single_valued(f.predicate) or f.metadata.get("single_valued"))
    ]


def check_answer(
    memory: Memory, question: dict, episode_of: dict[str, str], as_of: datetime | None = None
) -> None:
    """The slot's current fact rests on a gold note and no stale one (none at all when
    the answer is that it ended)."""
    subject, predicate, has_value = SLOTS[question["question"]]
    standing = memory.facts(user_id=USER, subject=subject, predicate=predicate, as_of=as_of)
    notes = [{episode_of[e] for e in f.provenance} for f in standing]
    assert not any(n & set(question["stale"]) for n in notes), question["question"]
    if has_value:
        [rests_on] = notes
        assert rests_on & set(question["gold"]), question["question"]
    else:
        assert notes == [], question["question"]


def test_the_update_path_keeps_one_current_value_per_slot_on_a_persona(
    memory: Memory, fake_llm: FakeLLM, persona: dict
) -> None:
    model = FactModel(LINES)
    fake_llm.script = model
    items = persona["items"]
    questions = [q for q in persona["questions"] if q["question"] in SLOTS]
    assert len(questions) == len(SLOTS)
    episode_of: dict[str, str] = {}
    read = 0
    # The memory as it stood when each question was asked, by the clock.
    stood: dict[str, datetime] = {}
    for asked_at in sorted({q["asked_at"] for q in persona["questions"]}):
        batch = [i for i in items[read:] if when(i["event_time"]) <= when(asked_at)]
        read += len(batch)
        if batch:
            stored = memory.add(
                [
                    {k: i[k] for k in ("content", "event_time", "role", "speaker") if k in i}
                    for i in batch
                ],
                user_id=USER,
            )
            episode_of.update({e.id: i["id"] for e, i in zip(stored, batch, strict=True)})
            memory.consolidate(user_id=USER)
        stood[asked_at] = datetime.now(UTC)
        slots = current_slots(memory.facts(user_id=USER, limit=500))
        assert len(slots) == len(set(slots)), f"two current values in a slot at {asked_at}"
        for question in questions:
            if question["asked_at"] == asked_at:
                check_answer(memory, question, episode_of)
    assert read == len(items)
    # Asked again later, as of when they were asked: the same answers.
    for question in questions:
        check_answer(memory, question, episode_of, as_of=stood[question["asked_at"]])

    for (subject, predicate), values in HISTORY.items():
        history = memory.fact_history(user_id=USER, subject=subject, predicate=predicate)
        assert [f.object for f in history] == values, predicate
        assert [f.is_current for f in history] == [False] * (len(values) - 1) + [True]
    said = {i["id"]: when(i["event_time"]) for i in items}
    # Femi ended with the break-up (do-026); Jules came later and replaced no one.
    femi, jules = memory.fact_history(user_id=USER, predicate="partner")
    assert (femi.valid_to, femi.superseded_by, jules.supersedes) == (said["do-026"], None, None)
    # The new employer (do-025) ended the old title: the promotion replaced nothing.
    analyst, senior = memory.fact_history(user_id=USER, predicate="job")
    assert (analyst.valid_to, analyst.superseded_by) == (said["do-025"], None)
    [lisbon] = memory.fact_history(user_id=USER, predicate="plans")
    assert (lisbon.valid_to, lisbon.superseded_by) == (said["do-028"], None)
    # Each change was the model's decision on a stored fact it was shown.
    decided = {(phrase, action) for phrase, action, _ in model.decisions}
    assert {
        ("Femi and I broke up", "END"),
        ("Lisbon trip (12-19 July) is cancelled", "END"),
        ("First week at the new place", "UPDATE"),
        ("Got the keys to the Edgeley house", "UPDATE"),
        ("Veganuary done", "UPDATE"),
        ("Promoted to senior product analyst", "ADD"),
    } <= decided
