"""What is true now (issue 33): the later of two statements about the same thing first
for a question about the present, the earlier one kept for the past; present-state
words and the memory's own subject left out of the query; notes searched without the
channels that read a conversation's structure. With the real MiniLM, on notes written
for these tests."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest
from locomo_slice import load_slice

from anamnesis import Memory
from anamnesis.bench.presets import BENCH_PRESETS
from anamnesis.config import PRESETS
from anamnesis.retrieve.analysis import analyse
from anamnesis.retrieve.currency import (
    current_first,
    present_terms,
    without_present,
    without_subject,
)
from anamnesis.retrieve.fusion import Fused
from anamnesis.retrieve.pipeline import Retriever
from anamnesis.store.base import Filters
from anamnesis.types import Scope

NOTES = [
    ("2024-01-10T09:00:00Z", "Priya's manager is Tom Okafor; they meet every Monday."),
    ("2024-02-02T09:00:00Z", "Priya lives in a small flat in Leeds with her cat Miso."),
    ("2024-03-15T09:00:00Z", "Priya bought a road bike, a blue Ribble, for the commute."),
    ("2024-04-20T09:00:00Z", "Priya says the canteen at work has a new salad bar."),
    ("2024-05-06T09:00:00Z", "Priya's dentist appointment is on 14 June at 9:30."),
    ("2024-06-03T09:00:00Z", "Tom left the company; Priya's new manager is Ana Ruiz."),
    ("2024-06-05T09:00:00Z", "Priya's dentist moved the appointment from 14 June to 2 July."),
    ("2024-07-01T09:00:00Z", "Priya is reading a novel about a lighthouse keeper."),
]
NOW = "2024-08-01T09:00:00Z"


@pytest.fixture(scope="module")
def memory(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Memory]:
    path = tmp_path_factory.mktemp("current") / "notes.db"
    with Memory(path=path, warm=False) as memory:
        memory.add_many(
            [{"content": text, "event_time": when} for when, text in NOTES], user_id="priya"
        )
        yield memory


def _first(memory: Memory, question: str) -> str:
    hits = memory.search(question, user_id="priya", limit=5, now=NOW)
    return hits[0].episode.content


@pytest.mark.parametrize(
    ("question", "current"),
    [
        ("Who is Priya's manager?", "Ana Ruiz"),
        ("Who is Priya's manager now?", "Ana Ruiz"),
        ("When is Priya's dentist appointment?", "2 July"),
    ],
)
def test_a_question_about_the_present_gets_the_later_statement_first(
    memory: Memory, question: str, current: str
) -> None:
    assert current in _first(memory, question)


@pytest.mark.parametrize(
    "question",
    ["Who was Priya's manager before the reorganisation?", "When did Priya buy a bike?"],
)
def test_a_question_about_the_past_is_ranked_as_without_the_stage(
    memory: Memory, question: str
) -> None:
    without = BENCH_PRESETS["default-no-current-first"]
    with Memory(path=memory.store.path, config=without, warm=False) as plain:
        expected = [h.episode.id for h in plain.search(question, user_id="priya", now=NOW)]
    assert [h.episode.id for h in memory.search(question, user_id="priya", now=NOW)] == expected


@pytest.mark.parametrize(
    ("question", "present"),
    [
        ("Who is my manager now?", True),
        ("Where does Dara work these days?", True),
        ("Is she still vegetarian?", True),
        ("What is the staging URL?", True),
        ("Where did Dara work in 2023?", False),
        ("Who was my manager?", False),
        ("What did I use to eat?", False),
        ("How long has Dara lived in Leeds?", False),
        ("Which came first, the bike or the flat?", False),
        # Said "now", "still", "currently": the present, whatever else the question
        # names (a plan's date, a count of days, "before work") ...
        ("Is Harold still flying to Denver for Thanksgiving?", True),
        ("Are Dara and Femi still going to Lisbon in July?", True),
        ("How many days a week does Claire work now?", True),
        ("Is Sam still going to the gym before work?", True),
        ("How long is her bike ride from her current flat?", True),
        # ... unless the question is in the past tense or names a time already over.
        ("Was Dara still at Northway in March?", False),
        ("Who is my manager now and in 2023?", False),
    ],
)
def test_which_questions_ask_about_the_present(question: str, present: bool) -> None:
    from anamnesis.retrieve.currency import asks_about_present

    class Request:
        analysis = analyse(question, datetime(2024, 7, 1, tzinfo=UTC))

    assert asks_about_present(Request()) is present  # type: ignore[arg-type]


def test_present_state_words_are_left_out_of_the_lexical_terms() -> None:
    assert present_terms("Where does she live these days, currently, right now?") == {
        "these",
        "days",
        "currently",
        "right",
        "now",
    }
    assert present_terms("Where does she live?") == set()


def test_the_subject_is_asked_about_in_the_first_person() -> None:
    assert without_subject("Where does Dara work? Is Dara's cat ok?", ["Dara"]) == (
        "Where does I work? Is my cat ok?"
    )
    assert without_subject("Where does Dara work?", []) == "Where does Dara work?"


def test_notes_are_searched_without_the_conversation_channels(memory: Memory) -> None:
    retriever = Retriever(memory.store, memory.embedder, PRESETS["default"])
    request = retriever.request("Who is Priya's manager?", Scope("priya"), Filters())
    assert set(retriever.candidates(request)) == set(PRESETS["default"].notes_channels or ())


def test_a_conversation_is_searched_with_every_channel(tmp_path: Path) -> None:
    with Memory(path=tmp_path / "chat.db", warm=False) as memory:
        memory.add(
            [
                {"role": "user", "content": "My manager is Tom."},
                {"role": "assistant", "content": "Noted, Tom is your manager."},
                {"role": "user", "content": "Tom left; my manager is Ana now."},
            ],
            user_id="priya",
            session_id="s1",
        )
        retriever = Retriever(memory.store, memory.embedder, PRESETS["default"])
        request = retriever.request("Who is my manager?", Scope("priya"), Filters())
        assert set(retriever.candidates(request)) == set(PRESETS["default"].channels)


def test_the_name_of_the_memorys_subject_is_not_searched_for(memory: Memory) -> None:
    retriever = Retriever(memory.store, memory.embedder, PRESETS["default"])
    request = retriever.request("Where does Priya live?", Scope("priya"), Filters())
    retriever.candidates(request)
    assert request.dense_text == "Where does I live?"
    stranger = retriever.request("Where does Miso sleep?", Scope("priya"), Filters())
    retriever.candidates(stranger)
    assert stranger.dense_text == "Where does Miso sleep?"


def test_a_conversation_is_ranked_as_by_the_previous_default(tmp_path: Path) -> None:
    # Conversations between two sides (LoCoMo, BEAM, LongMemEval) are the data the
    # previous default was chosen on; the notes parts stand aside there, so every
    # ranking is the same, question by question (the learned ranker, which the default
    # runs on chats between named people since, left out of both).
    path = tmp_path / "locomo.db"
    with Memory(path=path, config=BENCH_PRESETS["default-no-ranker"], warm=False) as memory:
        questions = [qa["question"] for qa in load_slice(memory, "conv-26")][:25]
        default = [[h.episode.id for h in memory.search(q, user_id="conv-26")] for q in questions]
    with Memory(path=path, config=BENCH_PRESETS["previous-default"], warm=False) as memory:
        previous = [[h.episode.id for h in memory.search(q, user_id="conv-26")] for q in questions]
    assert default == previous


class _Notes:
    """A search over hand-made notes: their dates, texts and embeddings, by id."""

    def __init__(
        self,
        question: str,
        notes: dict[str, tuple[str, str, list[float]]],
        options: dict[str, Any] | None = None,
    ) -> None:
        self.analysis = analyse(question, datetime(2025, 1, 1, tzinfo=UTC))
        self.memo: dict[Any, Any] = {"reads_notes": True}
        self.notes = notes
        self._options = options or {}
        # No other note names anything these notes name.
        self.store = SimpleNamespace(lexical_search=lambda *args: [])
        self.scope = self.filters = None

    def options(self, stage: str) -> dict[str, Any]:
        return dict(self._options)

    def episodes(self, ids: list[str]) -> dict[str, Any]:
        return {
            i: SimpleNamespace(
                event_time=datetime.fromisoformat(self.notes[i][0]), content=self.notes[i][1]
            )
            for i in ids
        }

    def stored_vectors(self, ids: list[str]) -> dict[str, np.ndarray]:
        return {i: np.array(self.notes[i][2], dtype=np.float32) for i in ids}


def _ranked(request: _Notes, scores: dict[str, float]) -> list[str]:
    fused = [Fused(i, score) for i, score in scores.items()]
    return [f.episode_id for f in current_first(request, fused)]  # type: ignore[arg-type]


def test_a_superseded_statement_settles_below_every_later_one_about_the_same_thing() -> None:
    # "I teach at Leeds Grammar" (ranked first) was replaced by "first week at Harrogate
    # Academy"; the latest note near the first is about a chemistry class, and not
    # about the school at all. The old statement takes neither place.
    request = _Notes(
        "Where does Priya teach now?",
        {
            "leeds": ("2024-01-10", "Priya teaches at Leeds Grammar.", [1.0, 0.0, 0.0]),
            "harrogate": ("2024-09-02", "First week at Harrogate Academy.", [0.8, 0.6, 0.0]),
            "class": ("2024-11-19", "The grade 12 class is on organic.", [0.6, 0.0, 0.8]),
        },
    )
    ranked = _ranked(request, {"leeds": 1.0, "harrogate": 0.5, "class": 0.3})
    assert ranked.index("harrogate") < ranked.index("leeds")
    assert ranked.index("class") < ranked.index("leeds")


def test_two_notes_that_say_a_rare_word_of_the_question_are_about_the_same_thing() -> None:
    # "Lofoten" is said by these two notes only: the trip that was planned and the trip
    # that is off, though their embeddings are further apart than restatements.
    notes = {
        "plan": ("2024-02-20", "Planning a hiking trip to Lofoten in July.", [1.0, 0.0, 0.0]),
        "exam": ("2024-05-28", "Class 11 wrote their final exam.", [0.0, 0.0, 1.0]),
        "off": ("2024-06-01", "The Lofoten trip is off: we move then.", [0.45, 0.89, 0.0]),
    }
    scores = {"plan": 1.0, "exam": 0.6, "off": 0.5}
    question = "Is Lena still going to Lofoten this summer?"
    assert _ranked(_Notes(question, notes), scores)[0] == "off"
    assert _ranked(_Notes(question, notes, {"shared_word": 0.0}), scores)[0] == "plan"
    # A word every candidate says names nothing in particular.
    common = {
        k: (when, text.replace("Lofoten", "the trip"), v) for k, (when, text, v) in notes.items()
    }
    common["exam"] = ("2024-05-28", "Class 11 wrote their final exam on the trip.", [0.0, 0.0, 1.0])
    assert _ranked(_Notes("Is Lena still going on the trip?", common), scores)[0] == "plan"


def test_with_tense_dense_present_state_words_are_not_embedded_either() -> None:
    # Measured and not adopted (the default embeds the question as asked), kept as an
    # option: the preset default-tense-dense.
    assert without_present("Where does Dara work now?") == "Where does Dara work?"
    assert without_present("Where do I live right now, currently?") == "Where do I live?"
    assert without_present("Now?") == "Now?"


SPOKEN = [
    ("2024-11-01T09:00:00Z", "I work as a backend engineer at Fintrail."),
    ("2024-11-01T09:01:00Z", "My partner Joana teaches at a school in Porto."),
    ("2025-01-15T18:00:00Z", "I started a new job at Globex as staff engineer last week."),
    ("2025-01-15T18:01:00Z", "Joana got a job at the University of Porto."),
]


def test_the_speaker_of_the_notes_is_their_subject(tmp_path: Path) -> None:
    # Miguel's own notes say "I", his name is in the speaker field: a question about
    # Miguel asks about "I", not about whoever the notes name.
    path = tmp_path / "spoken.db"
    with Memory(path=path, warm=False) as memory:
        memory.add_many(
            [{"content": t, "event_time": w, "speaker": "Miguel"} for w, t in SPOKEN],
            user_id="me",
        )
        retriever = Retriever(memory.store, memory.embedder, PRESETS["default"])
        request = retriever.request("Where does Miguel work now?", Scope("me"), Filters())
        retriever.candidates(request)
        assert request.dense_text == "Where does I work now?"
        first = memory.search("Where does Miguel work now?", user_id="me", now=NOW)[0]
        assert "Globex" in first.episode.content
    without = BENCH_PRESETS["default-no-subject-speaker"]
    with Memory(path=path, config=without, warm=False) as memory:
        retriever = Retriever(memory.store, memory.embedder, without)
        request = retriever.request("Where does Miguel work now?", Scope("me"), Filters())
        retriever.candidates(request)
        assert request.dense_text == "Where does Miguel work now?"


PINNED = [
    ("2024-01-10T09:00:00Z", "Priya teaches chemistry at Leeds Grammar School, grades 10 to 12."),
    ("2024-02-02T09:00:00Z", "Priya lives in a small flat in Leeds with her cat Miso."),
    ("2024-05-06T09:00:00Z", "Priya bought a road bike, a blue Ribble, for the commute."),
    ("2024-07-01T09:00:00Z", "Priya is reading a novel about a lighthouse keeper."),
    ("2024-09-02T09:00:00Z", "Priya's first week teaching chemistry at Harrogate Academy."),
    ("2024-11-19T09:00:00Z", "Priya's grade 12 chemistry class is now on organic reactions."),
]


def test_a_statement_the_exact_match_guard_pins_still_yields_to_its_successor(
    tmp_path: Path,
) -> None:
    # "Leeds" and "Grammar" are in at most two notes, so the guard pins the old school
    # first; the later statement first acts after the guards and still reorders it.
    with Memory(path=tmp_path / "pinned.db", warm=False) as memory:
        memory.add_many([{"content": t, "event_time": w} for w, t in PINNED], user_id="priya")
        hits = memory.search(
            "Is Priya still teaching at Leeds Grammar School?", user_id="priya", now=NOW
        )
        ranked = [h.episode.content for h in hits]
    old = next(i for i, text in enumerate(ranked) if "Leeds Grammar" in text)
    new = next(i for i, text in enumerate(ranked) if "Harrogate" in text)
    assert new < old


GYM = [
    ("2024-01-10T09:00:00Z", "Priya lifts weights at Ironworks Gym in Headingley before work."),
    ("2024-02-02T09:00:00Z", "Priya lives in a small flat in Leeds with her cat Miso."),
    ("2024-03-15T09:00:00Z", "Priya bought a road bike, a blue Ribble, for the commute."),
    ("2024-05-06T09:00:00Z", "Priya's sister Anika is visiting in June."),
    ("2024-08-20T09:00:00Z", "Priya is reading a novel about a lighthouse keeper."),
]


def _gym(tmp_path: Path, later: str) -> list[list[str]]:
    """The first hits, under the default and without the ended rule, for a question
    about the gym, with ``later`` added on 1 July."""
    path = tmp_path / "gym.db"
    notes = [*GYM, ("2024-07-01T09:00:00Z", later)]
    with Memory(path=path, warm=False) as memory:
        memory.add_many([{"content": t, "event_time": w} for w, t in notes], user_id="priya")
    ranked = []
    for config in (PRESETS["default"], BENCH_PRESETS["default-no-ended"]):
        with Memory(path=path, config=config, warm=False) as memory:
            hits = memory.search(
                "Does Priya still go to the gym before work?", user_id="priya", now=NOW
            )
            ranked.append([h.episode.content for h in hits])
    return ranked


def test_a_statement_whose_named_thing_a_later_note_ended_is_not_first(tmp_path: Path) -> None:
    # "Ironworks" is in two notes; the later one says the membership was cancelled, so
    # lifting at Ironworks no longer holds, though the two notes are not alike.
    default, without = _gym(tmp_path, "Priya cancelled the Ironworks membership: new job at 7.")
    assert "Ironworks Gym" not in default[0]
    assert "Ironworks Gym" in without[0]


def test_a_later_note_that_names_the_thing_without_ending_it_changes_nothing(
    tmp_path: Path,
) -> None:
    default, without = _gym(tmp_path, "Priya's Ironworks coach says her deadlift went up.")
    assert default == without
