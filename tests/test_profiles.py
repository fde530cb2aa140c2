"""Profiles of people, built from the fact layer by consolidate (real MiniLM, real
SQLite): current values first with the episodes behind them and their validity
times, rebuilt only for people whose facts changed, following their sources through
forget, confined to their scope, offered to a reader by ``context(profile=True)``, and
built by the background worker too."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from locomo_slice import load_slice

from anamnesis import Memory

T1 = datetime(2024, 3, 1, 9, 0, tzinfo=UTC)
T2 = datetime(2024, 9, 1, 9, 0, tzinfo=UTC)


@pytest.fixture
def job_change(memory: Memory) -> tuple[str, str]:
    """A user who worked at Tencent, then left for Moonshot AI (issue 23's example)."""
    [old] = memory.add("I work at Tencent", user_id="maya", session_id="s1", event_time=T1)
    [new] = memory.add(
        "Big news: I left Tencent and now work at Moonshot AI",
        user_id="maya",
        session_id="s2",
        event_time=T2,
    )
    return old.id, new.id


def test_a_profile_shows_current_values_with_their_episodes(
    memory: Memory, job_change: tuple[str, str]
) -> None:
    old, new = job_change
    report = memory.consolidate(user_id="maya")
    assert report.profiles == 1
    profile = memory.derived.profile("user", user_id="maya")
    assert profile is not None and profile.subject == "user"
    [current] = [e for e in profile.current if e.predicate == "works_at"]
    assert current.object == "Moonshot AI"
    assert current.provenance == (new,)
    assert current.valid_from == T2
    [before] = [e for e in profile.entries if e.predicate == "works_at" and not e.current]
    assert before.object == "Tencent" and before.provenance == (old, new)  # said, then ended
    assert before.valid_to is not None
    assert profile.entries[0].current  # current values first
    assert "Moonshot AI" in profile.text and "Previously" in profile.text
    assert set(profile.provenance) == {old, new}


def test_only_people_whose_facts_changed_are_rebuilt(memory: Memory) -> None:
    load_slice(memory, "locomo")
    first = memory.consolidate(user_id="locomo")
    assert first.profiles == 2  # Caroline and Melanie
    before = {p.subject: p for p in memory.derived.profiles(user_id="locomo")}
    memory.add(
        {"speaker": "Melanie", "content": "Thanks, see you soon!"},
        user_id="locomo",
        session_id="session_4",
        event_time=T2,
    )
    assert memory.consolidate(user_id="locomo").profiles == 0
    memory.add(
        {"speaker": "Melanie", "content": "I adopted a cat named Oliver last week."},
        user_id="locomo",
        session_id="session_5",
        event_time=T2,
    )
    assert memory.consolidate(user_id="locomo").profiles == 1
    after = {p.subject: p for p in memory.derived.profiles(user_id="locomo")}
    assert after["Caroline"].built_at == before["Caroline"].built_at
    assert after["Melanie"].built_at > before["Melanie"].built_at


def test_forgetting_the_source_drops_the_profile_then_rebuilds_it_without(
    memory: Memory, job_change: tuple[str, str]
) -> None:
    old, new = job_change
    memory.consolidate(user_id="maya")
    report = memory.forget(new, user_id="maya")
    assert report.counts.derived >= 1
    assert memory.derived.profile("user", user_id="maya") is None
    memory.consolidate(user_id="maya")
    profile = memory.derived.profile("user", user_id="maya")
    assert profile is not None
    assert "Moonshot" not in profile.text and new not in profile.provenance
    [job] = [e for e in profile.current if e.predicate == "works_at"]
    assert job.object == "Tencent"  # the chain is relinked: Tencent holds again


def test_profiles_stay_in_their_scope(memory: Memory, job_change: tuple[str, str]) -> None:
    memory.add("I live in Lisbon", user_id="bob")
    memory.consolidate(user_id="maya")
    memory.consolidate(user_id="bob")
    bob = memory.derived.profile("user", user_id="bob")
    assert bob is not None and "Lisbon" in bob.text and "Moonshot" not in bob.text
    maya = memory.derived.profile("user", user_id="maya")
    assert maya is not None and "Lisbon" not in maya.text
    block = memory.context("where does the user work?", user_id="bob", profile=True)
    assert "Moonshot" not in block.text


def test_context_offers_a_profile_block_only_when_asked(
    memory: Memory, job_change: tuple[str, str]
) -> None:
    memory.consolidate(user_id="maya")
    plain = memory.context("Where do I work now?", user_id="maya")
    assert "Profile:" not in plain.text and plain.profile == ()
    asked = memory.context("Where do I work now?", user_id="maya", profile=True)
    assert asked.text.startswith("Profile:\n- user works at Moonshot AI")
    assert asked.profile[0].source_episode_ids == (job_change[1],)
    assert asked.tokens <= asked.budget_tokens
    tight = memory.context("Where do I work now?", user_id="maya", profile=True, budget_tokens=32)
    assert tight.tokens <= 32


def test_the_background_worker_builds_summaries_and_profiles(memory: Memory) -> None:
    worker = memory.start_consolidation(interval=30)
    try:
        memory.add("I started a new job at Moonshot AI in Beijing", user_id="ana", session_id="a1")
        worker.notify(memory._scope("ana", None, None))
        assert worker.drain(timeout=120)
    finally:
        worker.stop()
    assert [s.session_id for s in memory.derived.summaries(user_id="ana")] == ["a1"]
    profile = memory.derived.profile("user", user_id="ana")
    assert profile is not None and "Moonshot AI" in profile.text


def test_the_cli_shows_summaries_and_profiles(tmp_path) -> None:
    import json

    from click.testing import CliRunner

    from anamnesis.cli import main

    path = str(tmp_path / "cli.db")

    def run(*args: str):
        return CliRunner().invoke(main, ["--path", path, "--embedder", "edge", *args])

    run("add", "I work at Tencent", "--user", "maya", "--session", "s1")
    run("add", "I left Tencent and now work at Moonshot AI", "--user", "maya", "--session", "s2")
    assert json.loads(run("consolidate", "--user", "maya").output)["summaries"] == 2
    listed = json.loads(run("facts", "--summaries", "--user", "maya", "--json").output)
    assert [summary["session_id"] for summary in listed] == ["s1", "s2"]
    shown = json.loads(run("facts", "--profile", "--user", "maya", "--json").output)
    assert [e["object"] for e in shown["entries"]] == ["Moonshot AI", "Tencent"]
    assert run("facts", "--profile", "--user", "maya", "--subject", "Bob").exit_code == 3
    packed = run("context", "where do I work?", "--user", "maya", "--profile").output
    assert packed.startswith("Profile:\n- user works at Moonshot AI")
