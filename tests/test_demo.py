"""The bundled demo: every question it asks is answered by the turn that answers it,
first, under the default pipeline (the issue-22 bar for the top of the list)."""

from __future__ import annotations

from pathlib import Path

from anamnesis import Memory
from anamnesis.demo import DEMO_USER, load_demo


def test_the_default_puts_the_answer_first_for_every_demo_question(
    tmp_path: Path, embedder
) -> None:
    with Memory(path=tmp_path / "m.db", embedder=embedder) as memory:
        questions = load_demo(memory)
        assert len(questions) == 5
        for question, answer in questions:
            hits = memory.search(question, user_id=DEMO_USER, limit=1)
            assert answer in hits[0].episode.content, question
