"""The harness measures the post-fusion stages: context packing, empty results and the
abstention threshold sweep, on the small real LoCoMo slice."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from anamnesis.bench.abstention import sweep
from anamnesis.bench.api import run_benchmark
from anamnesis.bench.cli import bench
from anamnesis.bench.runner import BenchOptions

FIXTURES = Path(__file__).parent.parent / "fixtures" / "bench"


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict]:
    out = tmp_path_factory.mktemp("locomo-rerank")
    options = BenchOptions(configs=("hybrid", "rerank-abstain", "rerank-memx"), embedder="minilm")
    summary = run_benchmark(
        "locomo", FIXTURES / "locomo_smoke.json.gz", options=options, out_dir=out
    ).summary
    return out, summary


def _records(out: Path) -> list[dict]:
    return [json.loads(line) for line in (out / "records.jsonl").open()]


def test_records_carry_context_recall_signals_and_result_counts(run) -> None:
    out, summary = run
    for record in _records(out):
        metrics = record["metrics"]
        for budget in (1000, 2000, 4000):
            assert metrics[f"context_tokens@{budget}"] <= budget
        recall = metrics["context_recall@2000"]
        assert recall is None or 0.0 <= recall <= 1.0  # None: a question without evidence
        assert record["returned"] == len(record["retrieved"])
        assert set(record["signals"]) == {"top_cosine", "lexical_hits"}
    hybrid = summary["configs"]["hybrid"]
    assert hybrid["overall"]["context_recall@2000"]["mean"] > 0.5
    assert hybrid["empty_results"]["answerable"] == 0.0
    assert "Ctx@2k" in (out / "report.md").read_text()


def test_the_sweep_at_the_shipped_threshold_matches_the_abstain_stage(run) -> None:
    out, summary = run
    from anamnesis.retrieve.filters import ABSTAIN_MIN_COSINE

    (row,) = sweep(_records(out), "hybrid", [ABSTAIN_MIN_COSINE], dataset="locomo")
    stage = summary["configs"]["rerank-abstain"]["empty_results"]
    assert row.answerable_empty == pytest.approx(stage["answerable"])
    assert row.unanswerable_empty == pytest.approx(stage["separate"])


def test_sweep_rejects_more_as_the_threshold_rises(run) -> None:
    out, _ = run
    rows = sweep(_records(out), "hybrid", [0.0, 0.5, 1.1], dataset="locomo", rule="cosine")
    empties = [r.answerable_empty for r in rows]
    assert empties == sorted(empties) and empties[0] == 0.0 and empties[-1] == 1.0
    assert rows[-1].recall == 0.0


def test_bench_abstention_command_prints_the_table(run) -> None:
    out, _ = run
    result = CliRunner().invoke(bench, ["abstention", str(out), "--thresholds", "0.2,0.4"])
    assert result.exit_code == 0, result.output
    assert "| 0.20 |" in result.output and "empty, unanswerable" in result.output
