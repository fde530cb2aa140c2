"""Answer-type matching: on a "where" question, a turn that names a place is preferred;
other questions are ranked as before."""

from __future__ import annotations

import json
from datetime import datetime, timedelta
from pathlib import Path

import pytest

from anamnesis import Memory
from anamnesis.bench.presets import BENCH_PRESETS
from anamnesis.demo import DEMO_FILE
from anamnesis.retrieve.answer_type import names_place


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("I finally signed the lease on the flat in Porto, I move in on the 20th.", True),
        ("I moved from Sweden four years ago.", True),
        ("We spent the day at the Louvre.", True),
        ("My sister visits in April.", False),  # a month
        ("See you on Monday at noon!", False),  # a weekday
        ("We went camping at the beach.", False),  # lower case: not seen
        ("Hiking the Peneda-Gerês trails with Inês on Saturday.", False),
        ("I went to I think the mall", False),
    ],
)
def test_a_place_is_a_capitalised_name_after_a_locative_word(text: str, expected: bool) -> None:
    assert names_place(text) is expected


@pytest.fixture(scope="module")
def demo(tmp_path_factory: pytest.TempPathFactory, embedder) -> Path:
    path = tmp_path_factory.mktemp("demo") / "m.db"
    demo = json.loads(DEMO_FILE.read_text(encoding="utf-8"))
    with Memory(path=path, embedder=embedder) as memory:
        for session in demo["sessions"]:
            start = datetime.fromisoformat(session["started_at"].replace("Z", "+00:00"))
            messages = [
                {**message, "event_time": start + timedelta(minutes=i)}
                for i, message in enumerate(session["messages"])
            ]
            memory.add_many(messages, user_id=demo["user_id"], session_id=session["session_id"])
    return path


def _first(path: Path, embedder, preset: str, question: str) -> str:
    with Memory(path=path, embedder=embedder, config=BENCH_PRESETS[preset]) as memory:
        return memory.search(question, user_id="demo", limit=1)[0].episode.content


def test_where_someone_lives_is_the_turn_that_names_the_place(demo: Path, embedder) -> None:
    first = _first(demo, embedder, "default-place", "Where does Maya live?")
    assert "lease on the flat in Porto" in first


def test_a_question_that_is_not_where_is_untouched(demo: Path, embedder) -> None:
    for question in ("Who is allergic to cats?", "Which race is she training for?"):
        with Memory(path=demo, embedder=embedder, config=BENCH_PRESETS["default"]) as memory:
            plain = [(h.episode.id, h.score) for h in memory.search(question, user_id="demo")]
        with Memory(path=demo, embedder=embedder, config=BENCH_PRESETS["default-place"]) as m:
            placed = [(h.episode.id, h.score) for h in m.search(question, user_id="demo")]
        assert placed == plain
