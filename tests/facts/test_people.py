"""The scope's user is one person, whatever name they speak under.

First-person facts of ``role="user"`` turns are the user's even when the turns carry
a speaker name ("Miguel"); that name becomes one of the user's, so a fact drafted
about "Miguel" (a note, or an LLM's third-person reading) is the user's too, and
``facts``, ``profile`` and ``context(profile=True)`` reach the user by any of their
names. A conversation between named people without roles keeps one subject each.
Both backends, the rule extractor (and a scripted LLM on loopback), the static
embedder.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from store_fixtures import (  # noqa: F401  (fixtures are found by their registered names)
    backend_fixture,
    postgres_schema_url_fixture,
    store_url_fixture,
)

from anamnesis import Memory
from anamnesis.embed import get_embedder

SCENARIO = Path(__file__).parent.parent / "fixtures" / "mcp_newcomer.json"
FIELDS = ("content", "session_id", "event_time", "role", "speaker")
#: The start of the scenario: a newcomer's first turns, sent as role user, speaker Miguel.
NEWCOMER = [
    {
        "content": "I work as a backend engineer at Fintrail, mostly Go and PostgreSQL.",
        "event_time": "2024-11-01T09:02:00Z",
    },
    {
        "content": "I moved to Porto in March 2024, to a flat near Bolhão market.",
        "event_time": "2024-11-01T09:03:00Z",
    },
    {
        "content": "I started a new job at Globex as staff engineer last week.",
        "event_time": "2025-01-15T09:00:00Z",
    },
]


@pytest.fixture
def where(backend: str, store_url: str) -> dict[str, str]:
    return {"path": store_url} if backend == "sqlite" else {"url": store_url}


@pytest.fixture
def memory(where: dict[str, str]) -> Iterator[Memory]:
    with Memory(**where, embedder=get_embedder("edge"), warm=False) as memory:
        yield memory


def miguel_said(memory: Memory, turns: list[dict[str, str]] = NEWCOMER) -> None:
    memory.add(
        [{**turn, "role": "user", "speaker": "Miguel", "session_id": "s1"} for turn in turns],
        user_id="me",
    )
    memory.consolidate(user_id="me")


def test_a_named_users_facts_are_the_users(memory: Memory) -> None:
    miguel_said(memory)
    facts = memory.facts(user_id="me")
    assert {f.subject for f in facts} == {"user"}
    assert ("works_at", "Globex") in {(f.predicate, f.object) for f in facts}
    assert ("goes_by", "Miguel") in {(f.predicate, f.object) for f in facts}
    by_name = memory.facts(subject="Miguel", user_id="me")
    assert [f.id for f in by_name] == [f.id for f in memory.facts(subject="user", user_id="me")]
    assert [
        f.object for f in memory.fact_history(subject="miguel", predicate="works_at", user_id="me")
    ] == ["Fintrail", "Globex"]


def test_profile_reaches_the_user_by_any_name(memory: Memory) -> None:
    miguel_said(memory)
    profile = memory.derived.profile(user_id="me")
    assert profile is not None and profile.subject == "user"
    assert memory.derived.profile("Miguel", user_id="me") == profile
    assert memory.derived.profile("user", user_id="me") == profile
    assert [p.subject for p in memory.derived.profiles(user_id="me")] == ["user"]
    [job] = [e for e in profile.current if e.predicate == "works_at"]
    assert job.object == "Globex"
    context = memory.context("Where does Miguel work now?", user_id="me", profile=True)
    assert context.text.startswith("Profile:\n") and "Globex" in context.text
    assert any("Globex" in line.text for line in context.profile)


def test_the_newcomer_scenario_has_a_profile_of_the_user(memory: Memory) -> None:
    scenario = json.loads(SCENARIO.read_text())
    items = [{key: item[key] for key in FIELDS} for item in scenario["items"]]
    memory.add(items, user_id=scenario["user_id"])
    memory.consolidate(user_id=scenario["user_id"])
    profile = memory.derived.profile(user_id=scenario["user_id"])
    assert profile is not None
    current = {(e.predicate, e.object) for e in profile.current}
    assert {("works_at", "Globex"), ("lives_in", "Porto"), ("partner", "Joana")} <= current
    context = memory.context("Who is my manager?", user_id=scenario["user_id"], profile=True)
    assert context.profile and "Sofia" in context.text.split("\n\n")[0]


def test_a_note_about_the_users_name_is_the_users(memory: Memory) -> None:
    miguel_said(memory)
    # The agent writes a note in the user's voice, under the user's name, with no role.
    memory.add({"speaker": "Miguel", "content": "I'm vegetarian."}, user_id="me")
    memory.consolidate(user_id="me")
    [diet] = memory.facts(predicate="diet", user_id="me")
    assert (diet.subject, diet.object) == ("user", "vegetarian")


def test_every_name_the_user_speaks_under_reaches_them(memory: Memory) -> None:
    miguel_said(memory)
    memory.add(
        {"role": "user", "speaker": "Mig", "content": "I live in Lisbon now."},
        user_id="me",
        event_time="2025-03-01",
    )
    memory.consolidate(user_id="me")
    assert [f.object for f in memory.facts(subject="Mig", predicate="lives_in", user_id="me")] == [
        "Lisbon"
    ]
    assert memory.derived.profile("Mig", user_id="me") == memory.derived.profile(user_id="me")


def test_an_llm_fact_about_the_users_name_is_the_users(where, fake_llm) -> None:
    def script(prompt: str) -> str:
        if "Miguel lives" not in prompt:
            return '{"facts": []}'
        fact = {"subject": "Miguel", "predicate": "lives_in", "object": "Braga"}
        return json.dumps({"facts": [{**fact, "single_valued": True}]})

    fake_llm.script = script
    with Memory(**where, embedder=get_embedder("edge"), warm=False, llm=fake_llm.client()) as m:
        m.add({"role": "user", "speaker": "Miguel", "content": "Hello there."}, user_id="me")
        # A note with no role: the LLM reads it as a fact about Miguel, in the third person.
        m.add({"content": "Note: Miguel lives in Braga."}, user_id="me")
        m.consolidate(user_id="me", extractor="llm", summaries="extractive")
        assert [(f.subject, f.object) for f in m.facts(predicate="lives_in", user_id="me")] == [
            ("user", "Braga")
        ]
