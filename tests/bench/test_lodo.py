"""Leave one data set out (``bench.lodo``, ``bench.refit``): the stage table says where
each stage came from, and the offline replay of the default's last steps reproduces the
pipeline it stands in for, on a real LoCoMo slice with the real MiniLM."""

from __future__ import annotations

import gzip
import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from click.testing import CliRunner
from locomo_slice import load_slice

from anamnesis import Memory
from anamnesis.bench import lodo, refit
from anamnesis.cli import main
from anamnesis.retrieve.ranker import RANKED_CHANNELS
from anamnesis.retrieve.ranker_fit import LabelledQuestion, ranker_examples

USER = "slice"


@pytest.fixture(scope="module")
def slice_dump(tmp_path_factory: pytest.TempPathFactory, embedder) -> Path:
    """The default pipeline's candidates for the slice's questions, as a dump file."""
    folder = tmp_path_factory.mktemp("lodo")
    with Memory(path=folder / "m.db", embedder=embedder) as memory:
        qa = load_slice(memory, USER)
        by_dia = {
            e.metadata["dia_id"]: e.id for e in memory.get_all(user_id=USER, limit=1000).items
        }
        questions = [
            LabelledQuestion(item["question"], tuple(by_dia[d] for d in item["evidence"]), USER)
            for item in qa
            if item.get("evidence") and all(d in by_dia for d in item["evidence"])
        ]
        examples = ranker_examples(memory, questions)
    path = folder / "slice.ranker.jsonl.gz"
    with gzip.open(path, "wt", encoding="utf-8") as handle:
        for example in examples:
            handle.write(json.dumps({"dataset": "locomo", **example}) + "\n")
    return path


def test_the_replay_of_the_shipped_numbers_is_the_pipelines_order(slice_dump: Path) -> None:
    data = refit.load_dumps([slice_dump])["locomo"]
    order = np.argsort(-data.scores(refit.Numbers.shipped()), axis=1, kind="stable")
    same_top10 = [set(order[i, :10]) == set(range(10)) for i in range(len(data.evidence))]
    assert len(same_top10) >= 30
    assert np.mean(same_top10) >= 0.9
    replayed, own = data.judge(refit.Numbers.shipped()), data.pipeline()
    assert abs(replayed["recall"].mean() - own["recall"].mean()) <= 0.02


def test_hybrid_replays_bm25_and_dense_alone(slice_dump: Path) -> None:
    hybrid = refit.Numbers.hybrid()
    assert {c for c, w in hybrid.weights.items() if w} == {"lexical", "dense"}
    assert (hybrid.mix, hybrid.exact, hybrid.factor, hybrid.window) == (0.0, 1.0, 1.0, 1.0)
    data = refit.load_dumps([slice_dump])["locomo"]
    assert data.judge(hybrid)["recall"].mean() < data.pipeline()["recall"].mean()


def test_a_fit_never_loses_to_its_start_and_keeps_what_is_frozen(slice_dump: Path) -> None:
    data = list(refit.load_dumps([slice_dump]).values())
    start = refit.Numbers.hybrid()
    fitted = refit.fit(data, start, passes=1, frozen=("prf", "mix"))
    assert refit.objective(data, fitted) >= refit.objective(data, start)
    assert fitted.weights["prf"] == 0.0 and fitted.mix == 0.0
    assert set(fitted.weights) == set(RANKED_CHANNELS)


def _record(config: str, question: str, recall: float, latency: float) -> dict[str, Any]:
    metrics = {"recall@10": recall, "mrr": recall, "ndcg@5": recall}
    return {
        "question_id": question,
        "config": config,
        "abstention": False,
        "evidence": ["D1:1"],
        "evidence_sessions": ["session_1"],
        "latency_ms": latency,
        "metrics": metrics,
    }


@pytest.fixture
def results(tmp_path: Path) -> Path:
    """A LoCoMo run where the speaker channel gains on every question, PRF changes
    nothing, and the default searches twice as long as hybrid."""
    rows = []
    for i in range(40):
        q = f"q{i}"
        rows += [
            _record("hybrid", q, 0.0, 10.0),
            _record("default", q, 1.0, 20.0),
            _record("default-no-speakers", q, 0.0, 15.0),
            _record("default-no-prf", q, 1.0, 19.0),
        ]
    folder = tmp_path / "out" / "locomo"
    folder.mkdir(parents=True)
    (folder / "records.jsonl").write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    return tmp_path / "out"


def test_the_stage_table_says_where_each_stage_came_from(results: Path) -> None:
    runs = lodo.load_runs(results)
    table = "\n".join(lodo.stage_table(runs))
    speakers = next(line for line in table.splitlines() if line.startswith("| speaker channel"))
    assert "**+100.0 [+100.0, +100.0]** (designed here)" in speakers
    prf = next(line for line in table.splitlines() if line.startswith("| pseudo-relevance"))
    assert "no change (fitted here)" in prf
    # A stage whose row was run on no data set has no line (``--configs`` ran a subset).
    assert not any(line.startswith("| session channel") for line in table.splitlines())


def test_the_default_table_reports_the_gain_and_the_cost_ratio(results: Path) -> None:
    table = lodo.default_table(lodo.load_runs(results))
    assert any("| locomo (40) | recall@10 | 0.0 | 100.0 |" in line for line in table)
    assert all(line.endswith("| 2.00× |") for line in table[2:])


def test_the_command_reprints_the_tables_without_running_anything(results: Path) -> None:
    result = CliRunner().invoke(main, ["bench", "lodo", "--out", str(results)])
    assert result.exit_code == 0, result.output
    assert "### Each stage: default − default without it" in result.output
    assert "### Where each stage came from" in result.output
    for row in lodo.STAGE_ROWS:
        assert row.without in lodo.CONFIGS
