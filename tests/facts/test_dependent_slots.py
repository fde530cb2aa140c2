"""Slots that belong to another: a change of employer ends the old job's slots.

A new employer (or leaving one) ends the job title, manager, team and place of work
stated before it, at the change's time, kept in history; a slot the same statement
states again is decided by the slot itself; slots of other attributes (home, diet)
are untouched. Both backends, the rule extractor, the static embedder.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime

import pytest
from store_fixtures import (  # noqa: F401  (fixtures are found by their registered names)
    backend_fixture,
    postgres_schema_url_fixture,
    store_url_fixture,
)

from anamnesis import Memory
from anamnesis.embed import get_embedder
from anamnesis.facts.predicates import DEPENDENT_SLOTS

T1 = datetime(2024, 11, 1, 9, tzinfo=UTC)
T2 = datetime(2025, 1, 15, 9, tzinfo=UTC)
T3 = datetime(2025, 2, 1, 9, tzinfo=UTC)
OLD_JOB = [
    "I work as a backend engineer at Fintrail, mostly Go and PostgreSQL.",
    "My manager is called Rui Almeida.",
    "I live in Porto.",
    "I'm vegetarian.",
]


@pytest.fixture
def memory(backend: str, store_url: str) -> Iterator[Memory]:
    where = {"path": store_url} if backend == "sqlite" else {"url": store_url}
    with Memory(**where, embedder=get_embedder("edge"), warm=False) as memory:
        memory.add(
            [{"role": "user", "content": text} for text in OLD_JOB], event_time=T1, user_id="u"
        )
        yield memory


def current(memory: Memory, predicate: str) -> list[str]:
    return [f.object for f in memory.facts(predicate=predicate, user_id="u")]


def said(memory: Memory, text: str, when: datetime = T2) -> None:
    memory.add({"role": "user", "content": text}, event_time=when, user_id="u")
    memory.consolidate(user_id="u")


def test_the_old_job_is_stated_as_the_table_expects(memory: Memory) -> None:
    memory.consolidate(user_id="u")
    assert current(memory, "works_at") == ["Fintrail"]
    assert current(memory, "job") == ["backend engineer"]
    assert current(memory, "boss") == ["Rui Almeida"]
    assert {"job", "boss"} <= set(DEPENDENT_SLOTS["works_at"])


@pytest.mark.parametrize(
    "change",
    [
        "I started a new job at Globex as staff engineer.",
        "I joined Globex as a staff engineer.",
        "I moved to Globex as a staff engineer.",
        "I took a job at Globex as a staff engineer.",
    ],
)
def test_a_new_employer_and_title_end_the_old_jobs_manager(memory: Memory, change: str) -> None:
    memory.consolidate(user_id="u")
    said(memory, change)
    assert current(memory, "works_at") == ["Globex"]
    assert current(memory, "job") == ["staff engineer"]
    assert current(memory, "boss") == []
    [rui] = memory.facts(predicate="boss", include_superseded=True, user_id="u")
    assert (rui.object, rui.valid_to, rui.superseded_by) == ("Rui Almeida", T2, None)
    # The title the statement restates is replaced by the slot itself: a chain.
    old, new = memory.fact_history(predicate="job", user_id="u")
    assert (old.object, old.superseded_by, old.valid_to) == ("backend engineer", new.id, T2)
    # Other attributes are no part of the job.
    assert current(memory, "lives_in") == ["Porto"]
    assert current(memory, "diet") == ["vegetarian"]


def test_a_new_employer_alone_ends_the_old_title_too(memory: Memory) -> None:
    said(memory, "I got a new job at Globex.")
    assert current(memory, "works_at") == ["Globex"]
    assert current(memory, "job") == [] and current(memory, "boss") == []
    ended = memory.facts(predicate="job", include_superseded=True, user_id="u")
    assert [(f.object, f.valid_to) for f in ended] == [("backend engineer", T2)]
    # Stated after the change, a title belongs to the new job and stays.
    said(memory, "I work as a staff engineer now.", T3)
    assert current(memory, "job") == ["staff engineer"]
    assert current(memory, "works_at") == ["Globex"]


@pytest.mark.parametrize("change", ["I left my job at Fintrail.", "I quit my job."])
def test_leaving_the_employer_ends_the_old_jobs_slots(memory: Memory, change: str) -> None:
    said(memory, change)
    assert current(memory, "works_at") == []
    assert current(memory, "job") == [] and current(memory, "boss") == []
    assert current(memory, "lives_in") == ["Porto"] and current(memory, "diet") == ["vegetarian"]


def test_a_slot_the_statement_restates_is_kept(memory: Memory) -> None:
    said(memory, "I joined Globex as a backend engineer.")
    assert current(memory, "works_at") == ["Globex"]
    [job] = memory.facts(predicate="job", include_superseded=True, user_id="u")
    assert job.object == "backend engineer" and job.is_current and job.valid_from == T1
    assert current(memory, "boss") == []


def test_a_new_manager_at_the_same_employer_ends_nothing_else(memory: Memory) -> None:
    said(memory, "Rui left the company; my new manager is Sofia.")
    assert current(memory, "boss") == ["Sofia"]
    assert current(memory, "works_at") == ["Fintrail"]
    assert current(memory, "job") == ["backend engineer"]
