"""The agent-life sets (``anamnesis/bench/agent_life``: the dev set in ``personas/`` and the
held-out set in ``holdout/``) are consistent: every question's gold and stale notes exist and
were written by the time it is asked, a superseded note is never also gold, and each set keeps
the size and mix its README promises."""

from __future__ import annotations

import json
import re
from collections import Counter
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

import pytest

import anamnesis

BENCH = Path(anamnesis.__file__).parent / "bench" / "agent_life"
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


@dataclass(frozen=True)
class PersonaSet:
    """One set of personas, the README that describes it, and the bounds it was written to."""

    name: str
    folder: Path
    readme: Path
    items: tuple[int, int]
    questions: tuple[int, int]


SETS = (
    PersonaSet("dev", BENCH / "personas", BENCH / "README.md", items=(80, 130), questions=(16, 40)),
    PersonaSet("holdout", BENCH / "holdout", BENCH / "holdout" / "README.md", (70, 90), (22, 28)),
)
PATHS = [(s, path) for s in SETS for path in sorted(s.folder.glob("*.json"))]
PATH_IDS = [f"{s.name}/{path.stem}" for s, path in PATHS]


def _time(text: str) -> datetime:
    assert text.endswith("Z"), text
    return datetime.fromisoformat(text.replace("Z", "+00:00"))


def _load(path: Path) -> dict:
    return json.loads(path.read_text())


def test_both_sets_are_there() -> None:
    # A glob over a missing folder finds nothing, and then every check below would pass.
    for s in SETS:
        assert len(list(s.folder.glob("*.json"))) >= 6, s.name
        assert s.readme.is_file(), s.name


@pytest.mark.parametrize(("s", "path"), PATHS, ids=PATH_IDS)
def test_a_persona_file_is_well_formed(s: PersonaSet, path: Path) -> None:
    persona = _load(path)
    assert persona["persona"] == persona["user_id"] == path.stem
    assert persona["kind"] in {"life", "work"}
    assert persona["about"].strip()
    items = persona["items"]
    ids = [item["id"] for item in items]
    assert len(ids) == len(set(ids)), "item ids repeat"
    assert s.items[0] <= len(items) <= s.items[1]
    times = [_time(item["event_time"]) for item in items]
    assert times == sorted(times), "items are not sorted by event_time"
    for item in items:
        assert item["content"].strip(), item["id"]
        assert item.get("role") in {None, "user", "assistant"}, item["id"]
        assert item.get("kind") in ITEM_KINDS, item["id"]
        # A chat turn belongs to a session; a note may or may not.
        if item["kind"] == "chat_turn":
            assert item.get("session_id"), item["id"]
        # An agent's note about the user carries no user speaker.
        if item["kind"] == "agent_note":
            assert "speaker" not in item and item.get("role") != "user", item["id"]


@pytest.mark.parametrize(("s", "path"), PATHS, ids=PATH_IDS)
def test_every_question_rests_on_notes_written_before_it_is_asked(
    s: PersonaSet, path: Path
) -> None:
    persona = _load(path)
    written = {item["id"]: _time(item["event_time"]) for item in persona["items"]}
    questions = persona["questions"]
    assert s.questions[0] <= len(questions) <= s.questions[1]
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


def _promised(readme: str) -> dict:
    """The numbers a set's README states: its persona table, type table and totals."""
    rows = re.findall(
        r"^\| ([a-z-]+) \| (life|work) \| (\d+) \| (\d+) \| (\d{4}-\d{2}) to (\d{4}-\d{2}) \|$",
        readme,
        re.MULTILINE,
    )
    types = re.findall(r"^\| `(\w+)` \| (\d+) \|", readme, re.MULTILINE)
    kinds = re.findall(r"`(user_note|agent_note|chat_turn)` \((\d+)", readme)

    def number(pattern: str) -> int:
        found = re.search(pattern, readme)
        assert found, f"the README no longer says {pattern!r}"
        return int(found.group(1))

    return {
        "personas": {r[0]: (r[1], int(r[2]), int(r[3]), r[4], r[5]) for r in rows},
        "types": {t: int(n) for t, n in types},
        "item_kinds": {k: int(n) for k, n in kinds},
        "items": number(r"(\d+) items and \d+ questions in all"),
        "questions": number(r"\d+ items and (\d+) questions in all"),
        "stale": number(r"(\d+) questions list stale notes"),
        "mid": number(r"(\d+) questions are asked mid-timeline"),
    }


@pytest.mark.parametrize("s", SETS, ids=[s.name for s in SETS])
def test_the_set_keeps_the_size_and_mix_its_readme_states(s: PersonaSet) -> None:
    promised = _promised(s.readme.read_text())
    personas = [_load(path) for path in sorted(s.folder.glob("*.json"))]
    found = {}
    for persona in personas:
        months = sorted(item["event_time"][:7] for item in persona["items"])
        found[persona["persona"]] = (
            persona["kind"],
            len(persona["items"]),
            len(persona["questions"]),
            months[0],
            months[-1],
        )
    assert found == promised["personas"]
    assert {"life", "work"} <= {persona["kind"] for persona in personas}

    questions = [q for persona in personas for q in persona["questions"]]
    items = [item for persona in personas for item in persona["items"]]
    assert len(items) == promised["items"] and len(questions) == promised["questions"]
    types = Counter(q["type"] for q in questions)
    assert set(types) == TYPES and dict(types) == promised["types"]
    assert 0.38 <= types["current_state"] / len(questions) <= 0.52
    assert sum(1 for q in questions if q["stale"]) == promised["stale"]
    # Mid-timeline: the persona has notes written after the question is asked.
    mid = sum(
        1
        for persona in personas
        for q in persona["questions"]
        if _time(q["asked_at"]) < max(_time(item["event_time"]) for item in persona["items"])
    )
    assert mid == promised["mid"]

    kinds = Counter(item["kind"] for item in items)
    assert set(kinds) == ITEM_KINDS and dict(kinds) == promised["item_kinds"]
    # Most notes come without a session, as they do through MCP.
    assert sum(1 for item in items if not item.get("session_id")) > len(items) / 2
