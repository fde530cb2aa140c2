"""Fitting the learned ranker on your own labelled questions (``ranker_fit``, the
``fit-ranker`` command and ``--ranker-model``), with the real MiniLM."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from anamnesis import Memory
from anamnesis.bench.fitting import fit_pooled
from anamnesis.bench.presets import BENCH_PRESETS
from anamnesis.cli import main
from anamnesis.cli_errors import EXIT_BAD_INPUT
from anamnesis.errors import InvalidInputError
from anamnesis.retrieve.ranker import load_ranker
from anamnesis.retrieve.ranker_fit import (
    LabelledQuestion,
    fit_ranker,
    ranker_examples,
    save_ranker,
)

USER = "fit"
#: A chat between named people: each answer is a reply that does not repeat the
#: question's words, next to a turn that does.
CHAT = [
    {"speaker": "Ana", "content": "Have you found a new flat near the river yet?"},
    {"speaker": "Ben", "content": "Not yet, landlords there refuse anyone with a dog."},
    {"speaker": "Ana", "content": "Did the climbing gym open its new wall?"},
    {"speaker": "Ben", "content": "Yes, and I finally topped the overhang on Sunday."},
    {"speaker": "Ana", "content": "How is the cello practice going?"},
    {"speaker": "Ben", "content": "Slowly, my teacher wants scales for an hour a day."},
]
#: (question, index in CHAT of the turn that answers it)
LABELS = [
    ("Why can't Ben find a flat near the river?", 1),
    ("What did Ben do at the climbing gym?", 3),
    ("What does Ben's cello teacher want?", 5),
]


@pytest.fixture
def chat(tmp_path, embedder):
    with Memory(path=tmp_path / "chat.db", embedder=embedder) as memory:
        ids = [e.id for e in memory.add_many(CHAT, user_id=USER, session_id="s1")]
        yield memory, ids


def _labelled(ids):
    return [LabelledQuestion(q, (ids[row],), USER) for q, row in LABELS]


def test_examples_hold_the_candidates_and_the_evidence(chat):
    memory, ids = chat
    examples = ranker_examples(memory, _labelled(ids))
    assert len(examples) == len(LABELS)
    for example, (_, row) in zip(examples, LABELS, strict=True):
        assert example["evidence"] == [ids[row]] and ids[row] in example["keys"]
        assert len(example["features"]) == len(example["keys"])


def test_a_fit_replaces_only_the_kind_it_has_questions_for(chat):
    memory, ids = chat
    bundled = load_ranker()
    models = fit_ranker(ranker_examples(memory, _labelled(ids)), trained_on="three questions")
    assert models["roles"] is bundled["roles"]
    assert models["speakers"] != bundled["speakers"]
    assert models["speakers"].trained_on == "three questions"


def test_a_pooled_fit_serves_every_kind_with_one_model(chat):
    memory, ids = chat
    models = fit_pooled(ranker_examples(memory, _labelled(ids)), trained_on="all but one")
    assert models["roles"] is models["speakers"]
    assert models["roles"].trained_on == "all but one"
    assert models["roles"] != load_ranker()["roles"]
    with pytest.raises(InvalidInputError, match="nothing to learn"):
        fit_pooled([])


def test_searches_use_the_fitted_ranker(chat, tmp_path):
    memory, ids = chat
    path = tmp_path / "mine.json"
    save_ranker(fit_ranker(ranker_examples(memory, _labelled(ids))), path)
    config = BENCH_PRESETS["full-ranker"].with_options("learned_rerank", model=str(path))
    with Memory(path=tmp_path / "chat.db", embedder=memory.embedder, config=config) as mine:
        for question, row in LABELS:
            assert mine.search(question, user_id=USER, limit=1)[0].episode.id == ids[row]


def test_evidence_outside_the_askers_memory_is_refused(chat):
    memory, ids = chat
    with pytest.raises(InvalidInputError, match="not in someone's memory"):
        ranker_examples(memory, [LabelledQuestion("Why no flat?", (ids[1],), "someone")])
    with pytest.raises(InvalidInputError, match="ep_missing"):
        ranker_examples(memory, [LabelledQuestion("Why no flat?", ("ep_missing",), USER)])


def test_bad_labelled_questions_are_refused():
    good = {"question": "Why?", "evidence": ["ep_1"], "user_id": "u"}
    assert LabelledQuestion.from_dict(good).evidence == ("ep_1",)
    for bad in (
        {"evidence": ["ep_1"], "user_id": "u"},
        {**good, "question": " "},
        {**good, "evidence": []},
        {**good, "now": "last tuesday"},
    ):
        with pytest.raises(InvalidInputError):
            LabelledQuestion.from_dict(bad)
    with pytest.raises(InvalidInputError, match="nothing to learn"):
        fit_ranker([])


def test_the_cli_fits_a_ranker_and_searches_with_it(tmp_path, embedder):
    db = str(tmp_path / "cli.db")
    with Memory(path=db, embedder=embedder) as memory:
        ids = [e.id for e in memory.add_many(CHAT, user_id=USER, session_id="s1")]
    questions = tmp_path / "labelled.jsonl"
    lines = [{"question": q, "evidence": [ids[row]], "user_id": USER} for q, row in LABELS]
    questions.write_text("\n".join(json.dumps(line) for line in lines) + "\n", encoding="utf-8")
    model = tmp_path / "mine.json"
    runner = CliRunner()
    fitted = runner.invoke(main, ["--path", db, "fit-ranker", str(questions), "--out", str(model)])
    assert fitted.exit_code == 0, fitted.output
    assert "speakers: fitted" in fitted.output and "roles: bundled" in fitted.output
    question, row = LABELS[0]
    args = ["--path", db, "--config", "ranker", "--ranker-model", str(model), "search", question]
    args += ["--user", USER]
    hits = json.loads(runner.invoke(main, [*args, "--json", "-n", "1"]).output)
    assert hits[0]["episode"]["id"] == ids[row]
    # The learned ranker's model on a preset that does not run it is an error.
    wrong = runner.invoke(
        main, ["--path", db, "--config", "fast", "--ranker-model", str(model), "stats"]
    )
    assert wrong.exit_code == EXIT_BAD_INPUT and "--ranker-model" in wrong.output
    questions.write_text("not json\n", encoding="utf-8")
    broken = runner.invoke(main, ["--path", db, "fit-ranker", str(questions), "--out", str(model)])
    assert broken.exit_code == EXIT_BAD_INPUT and "not JSON" in broken.output


def test_leave_one_dataset_out_judges_each_data_set_by_a_fit_without_it(tmp_path):
    import gzip
    import subprocess
    import sys
    from pathlib import Path

    import numpy as np

    from anamnesis.retrieve.ranker import FEATURES

    rng = np.random.default_rng(0)
    signal = FEATURES.index("dense_score") if "dense_score" in FEATURES else 0

    def dump(name: str, has_role: float) -> Path:
        path = tmp_path / f"{name}.ranker.jsonl.gz"
        with gzip.open(path, "wt") as handle:
            for q in range(30):
                rows = rng.normal(size=(40, len(FEATURES)))
                rows[:, FEATURES.index("has_role")] = has_role
                rows[30, signal] += 6.0  # the evidence stands out on one feature everywhere
                record = {"dataset": name, "case": f"{name}-{q % 6}", "id": str(q),
                          "evidence": ["k30"], "keys": [f"k{i}" for i in range(40)],
                          "features": rows.round(6).tolist()}  # fmt: skip
                handle.write(json.dumps(record) + "\n")
        return path

    paths = [dump("locomo", 0.0), dump("beam", 1.0), dump("longmemeval", 1.0)]
    script = Path(__file__).parents[1] / "scripts" / "ranker_train.py"
    result = subprocess.run(
        [sys.executable, str(script), "lodo", *map(str, paths)], capture_output=True, text=True
    )
    assert result.returncode == 0, result.stderr
    rows = [line.split(" | ") for line in result.stdout.splitlines() if "recall@" in line]
    judged = {row[0].lstrip("| ").split(" (")[0]: row for row in rows}
    assert set(judged) == {"locomo", "beam", "longmemeval"}
    assert judged["locomo"][1] == "beam + longmemeval"  # never fitted on itself
    for row in rows:
        before, per_kind, pooled = float(row[3]), float(row[4]), float(row[6])
        assert per_kind > before and pooled > before
