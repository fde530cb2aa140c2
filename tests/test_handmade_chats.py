"""The hand-written conversations (``fixtures/handmade``) load as a LoCoMo-format data
set with every question's evidence present, and the file is what its script writes."""

from __future__ import annotations

import json
import runpy
from pathlib import Path

from anamnesis.bench import datasets

FOLDER = Path(__file__).parent / "fixtures" / "handmade"


def test_every_question_has_its_evidence_in_the_conversation() -> None:
    dataset = datasets.load("locomo", FOLDER / "handmade_chats.json")
    assert len(dataset.cases) == 2
    questions = [q for case in dataset.cases for q in case.questions]
    assert len(questions) == 44
    for case in dataset.cases:
        keys = {m["metadata"][dataset.evidence_key] for m in case.messages}
        for question in case.questions:
            assert question.evidence and set(question.evidence) <= keys, question.text
    assert not dataset.notes.get("evidence_dangling")


def test_the_file_is_what_the_script_writes(tmp_path: Path) -> None:
    written = runpy.run_path(str(FOLDER / "write_chats.py"))
    fresh = [written["PRIYA_TOMAS"], written["JONAS_AIKO"]]
    assert json.loads((FOLDER / "handmade_chats.json").read_text()) == fresh
