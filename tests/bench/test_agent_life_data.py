"""The agent-life dev set (``anamnesis/bench/agent_life``) is consistent: every question's
gold and stale notes exist and were written by the time it is asked, a superseded note is
never also gold, and the set keeps the size and mix its README promises."""

from __future__ import annotations

import json
from collections import Counter
from datetime import datetime
from pathlib import Path

import pytest

import anamnesis

FOLDER = Path(anamnesis.__file__).parent / "bench" / "agent_life" / "personas"
TYPES = {
    "current_state",
    "past_state",
    "when_changed",
    "preference",
    "single_fact",
    "multi_hop",
    "relative_time",
}
ITEM_KINDS = {"user_note", "agent_note", "chat_turn"}
PATHS = sorted(FOLDER.glob("*.json"))


def _time(text: str) -> datetime:
    assert text.endswith("Z"), text
    return datetime.fromisoformat(text.replace("Z", "+00:00"))


def _load(path: Path) -> dict:
    return json.loads(path.read_text())


@pytest.mark.parametrize("path", PATHS, ids=[p.stem for p in PATHS])
def test_a_persona_file_is_well_formed(path: Path) -> None:
    persona = _load(path)
    assert persona["persona"] == persona["user_id"] == path.stem
    assert persona["kind"] in {"life", "work"}
    assert persona["about"].strip()
    items = persona["items"]
    ids = [item["id"] for item in items]
    assert len(ids) == len(set(ids)), "item ids repeat"
    assert 80 <= len(items) <= 130
    for item in items:
        assert item["content"].strip(), item["id"]
        _time(item["event_time"])
        assert item.get("role") in {None, "user", "assistant"}, item["id"]
        assert item.get("kind") in ITEM_KINDS, item["id"]
        # A chat turn belongs to a session; a note may or may not.
        if item["kind"] == "chat_turn":
            assert item.get("session_id"), item["id"]
        # An agent's note about the user carries no user speaker.
        if item["kind"] == "agent_note":
            assert "speaker" not in item and item.get("role") != "user", item["id"]


@pytest.mark.parametrize("path", PATHS, ids=[p.stem for p in PATHS])
def test_every_question_rests_on_notes_written_before_it_is_asked(path: Path) -> None:
    persona = _load(path)
    written = {item["id"]: _time(item["event_time"]) for item in persona["items"]}
    questions = persona["questions"]
    assert len(questions) >= 16
    for question in questions:
        text = question["question"]
        assert question["type"] in TYPES, text
        assert question["answer"].strip(), text
        gold, stale = question["gold"], question["stale"]
        assert gold, text
        assert len(gold) == len(set(gold)) and len(stale) == len(set(stale)), text
        assert not set(gold) & set(stale), text
        asked = _time(question["asked_at"])
        for item_id in gold + stale:
            assert item_id in written, (text, item_id)
            # The evaluator loads only what was written by asked_at.
            assert written[item_id] <= asked, (text, item_id)
        # A superseded note is older than the newest note that supersedes it.
        if stale:
            assert max(written[i] for i in stale) < max(written[i] for i in gold), text


def test_the_set_keeps_its_size_and_mix() -> None:
    personas = [_load(path) for path in PATHS]
    kinds = Counter(persona["kind"] for persona in personas)
    assert len(personas) >= 10 and kinds["life"] >= 5 and kinds["work"] >= 3
    questions = [q for persona in personas for q in persona["questions"]]
    assert len(questions) >= 200
    types = Counter(q["type"] for q in questions)
    assert set(types) == TYPES
    assert 0.38 <= types["current_state"] / len(questions) <= 0.52
    items = [item for persona in personas for item in persona["items"]]
    assert set(Counter(item["kind"] for item in items)) == ITEM_KINDS
    # Most notes come without a session, as they do through MCP.
    assert sum(1 for item in items if not item.get("session_id")) > len(items) / 2
