"""The benchmark harness end to end on small real slices, so it cannot rot.

Runs LoCoMo (one conversation, 5 sessions), LongMemEval (3 trimmed questions) and BEAM
(one trimmed conversation) with the bm25, dense and hybrid presets, through both the
Python API and the click command.
"""

from __future__ import annotations

import json
import math
import time
from pathlib import Path

import pytest
from click.testing import CliRunner

from anamnesis.bench.api import run_benchmark
from anamnesis.bench.cli import bench
from anamnesis.bench.runner import BenchOptions
from anamnesis.store.sqlite.ann import SQLiteAnn

FIXTURES = Path(__file__).parent.parent / "fixtures" / "bench"
CONFIGS = ("bm25", "dense", "hybrid")


@pytest.fixture(scope="module")
def options() -> BenchOptions:
    return BenchOptions(configs=CONFIGS, embedder="minilm")


def _records(out_dir: Path) -> list[dict]:
    return [json.loads(line) for line in (out_dir / "records.jsonl").open()]


def test_locomo_smoke(tmp_path, options):
    output = run_benchmark(
        "locomo", FIXTURES / "locomo_smoke.json.gz", options=options, out_dir=tmp_path
    )
    summary = output.summary
    for name in ("records.jsonl", "summary.json", "report.md", "recall.png"):
        assert (tmp_path / name).is_file(), name
    assert not (tmp_path / "stores").exists()  # temporary stores are removed
    records = _records(tmp_path)
    assert len(records) == 55 * len(CONFIGS)
    assert {r["config"] for r in records} == set(CONFIGS)
    first = records[0]
    assert first["retrieved"][0]["rank"] == 1 and first["latency_ms"] > 0
    assert {"key", "session", "score", "tokens"} <= set(first["retrieved"][0])
    for name in CONFIGS:
        block = summary["configs"][name]
        # Five sessions, 92 turns: every preset finds most evidence in its top 50.
        assert block["overall"]["recall@50"]["mean"] > 0.5
        assert block["overall"]["recall@10"]["low"] <= block["overall"]["recall@10"]["mean"]
        assert block["latency_ms"]["p95"] >= block["latency_ms"]["p50"] > 0
    assert summary["full_context"]["mean_tokens"] > 1000
    assert summary["speed"]["messages"] == 92
    assert summary["speed"]["peak_rss_bytes"] > 0
    assert len(summary["comparisons"]) == 3
    report = (tmp_path / "report.md").read_text()
    assert "full-context" in report and summary["data_sha256"] in report
    stored = json.loads((tmp_path / "summary.json").read_text())
    assert stored["configs"].keys() == summary["configs"].keys()


def test_longmemeval_smoke(tmp_path, options):
    summary = run_benchmark(
        "longmemeval", FIXTURES / "longmemeval_smoke.json.gz", options=options, out_dir=tmp_path
    ).summary
    hybrid = summary["configs"]["hybrid"]
    assert hybrid["questions"] == 2 and hybrid["separate"]["questions"] == 1
    for level in ("turn", "session"):
        for k in (1, 3, 5, 10, 30, 50):
            value = hybrid["overall"][f"lme.{level}.recall_all@{k}"]["mean"]
            assert 0.0 <= value <= 1.0
    # A trimmed haystack has few sessions: all of them fit in the top 50 turns.
    assert hybrid["overall"]["lme.session.recall_any@50"]["mean"] == 1.0
    assert "LongMemEval official metrics" in (tmp_path / "report.md").read_text()


def test_beam_smoke(tmp_path, options):
    summary = run_benchmark(
        "beam", FIXTURES / "beam_smoke.json.gz", options=options, out_dir=tmp_path
    ).summary
    block = summary["configs"]["bm25"]
    assert block["separate"]["questions"] == 2  # abstention, no evidence by design
    assert block["questions"] == 7
    assert "contradiction_resolution" in block["by_category"]
    assert summary["notes"]["evidence_dangling"] == 2
    abstention = [r for r in _records(tmp_path) if r["abstention"]]
    assert abstention and all(math.isnan(r["metrics"]["recall@10"] or math.nan) for r in abstention)


def test_with_the_graph_forced_on_every_question_is_searched_through_it(tmp_path, monkeypatch):
    # The store's indexes are built before the questions, so none of them is scanned
    # exactly while the graph is still being built in the background (made slow here).
    monkeypatch.setenv("ANAMNESIS_ANN_THRESHOLD", "1")
    build = SQLiteAnn._work

    def slow_build(self, *args):
        time.sleep(1.0)
        build(self, *args)

    monkeypatch.setattr(SQLiteAnn, "_work", slow_build)
    options = BenchOptions(configs=("dense",), embedder="minilm")
    summary = run_benchmark(
        "locomo", FIXTURES / "locomo_smoke.json.gz", options=options, out_dir=tmp_path
    ).summary
    assert summary["speed"]["dense_searches"] == {"graph": 55, "exact": 0}
    assert all(r["dense_searches"] == {"graph": 1, "exact": 0} for r in _records(tmp_path))


def test_reopened_stores_search_from_their_files_with_the_same_results(tmp_path, monkeypatch):
    # Vectors, postings and graph saved beside each store even at this size, and the
    # questions asked of the store opened again: what a fresh process reads.
    monkeypatch.setenv("ANAMNESIS_ANN_THRESHOLD", "1")
    monkeypatch.setenv("ANAMNESIS_INDEX_FILES_THRESHOLD", "1")
    data = FIXTURES / "locomo_smoke.json.gz"
    kept = BenchOptions(configs=("hybrid",), embedder="minilm")
    reopened = BenchOptions(configs=("hybrid",), embedder="minilm", reopen=True)
    run_benchmark("locomo", data, options=kept, out_dir=tmp_path / "kept")
    run_benchmark("locomo", data, options=reopened, out_dir=tmp_path / "reopened")
    case = json.loads((tmp_path / "reopened" / "cases.jsonl").read_text())
    assert "vectors mapped from beside the store" in case["searched_from"]
    assert "postings, mapped from beside the store" in case["searched_from"]
    before, after = _records(tmp_path / "kept"), _records(tmp_path / "reopened")
    assert [r["retrieved"] for r in after] == [r["retrieved"] for r in before]
    assert all(r["dense_searches"] == {"graph": 1, "exact": 0} for r in after)


def test_cli_runs_and_prints_summary(tmp_path):
    result = CliRunner().invoke(
        bench,
        [
            "locomo",
            "--data",
            str(FIXTURES / "locomo_smoke.json.gz"),
            "--config",
            "bm25",
            "--out",
            str(tmp_path / "run"),
        ],
    )
    assert result.exit_code == 0, result.output
    assert "bm25" in result.output and "full-context" in result.output
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    assert summary["command"].startswith("anamnesis bench locomo --data ")
    assert "--config bm25" in summary["command"]


def test_cli_rejects_unknown_config(tmp_path):
    result = CliRunner().invoke(
        bench, ["locomo", "--data", str(FIXTURES / "locomo_smoke.json.gz"), "--config", "nope"]
    )
    assert result.exit_code != 0
    assert "unknown config" in result.output


def test_cli_help_lists_datasets():
    result = CliRunner().invoke(bench, ["--help"])
    assert result.exit_code == 0
    for name in ("locomo", "longmemeval", "beam"):
        assert name in result.output


def test_rebuild_reproduces_and_reports_partial_runs(tmp_path):
    from anamnesis.bench.api import rebuild

    options = BenchOptions(configs=("bm25",), embedder="edge")
    output = run_benchmark(
        "longmemeval", FIXTURES / "longmemeval_smoke.json.gz", options=options, out_dir=tmp_path
    )
    again = rebuild(tmp_path)
    assert again["configs"]["bm25"]["overall"] == output.summary["configs"]["bm25"]["overall"]
    # Simulate an interruption after the first two cases.
    cases = (tmp_path / "cases.jsonl").read_text().splitlines()
    (tmp_path / "cases.jsonl").write_text("\n".join(cases[:2]) + "\n")
    meta = json.loads((tmp_path / "run.json").read_text())
    (tmp_path / "run.json").write_text(json.dumps({**meta, "finished": False}))
    partial = rebuild(tmp_path)
    assert partial["notes"]["partial"] == "interrupted after 2 cases"
    assert partial["speed"]["cases"] == 2
    result = CliRunner().invoke(bench, ["report", str(tmp_path)])
    assert result.exit_code == 0 and "bm25" in result.output


def test_split_runs_merge_into_one_report(tmp_path):
    from anamnesis.bench.api import rebuild

    data = FIXTURES / "longmemeval_smoke.json.gz"
    runner = CliRunner()
    first = tmp_path / "first"
    second = tmp_path / "second"
    common = ["--data", str(data), "--config", "bm25", "--embedder", "edge"]
    result = runner.invoke(bench, ["longmemeval", *common, "--limit", "2", "--out", str(first)])
    assert result.exit_code == 0, result.output
    result = runner.invoke(bench, ["longmemeval", *common, "--skip", "1", "--out", str(second)])
    assert result.exit_code == 0, result.output
    merged = rebuild(first, [second])
    assert merged["speed"]["cases"] == 3  # the overlapping case counts once
    assert "partial" not in merged["notes"]
    assert len((first / "records.jsonl").read_text().splitlines()) == 3
    assert len((first / "cases.jsonl").read_text().splitlines()) == 3


def test_embedding_cache_dir_reuses_vectors_across_runs_without_changing_results(tmp_path):
    options = BenchOptions(
        configs=("dense",), embedder="edge", embedding_cache_dir=tmp_path / "vectors"
    )
    data = FIXTURES / "locomo_smoke.json.gz"
    first = run_benchmark("locomo", data, options=options, out_dir=tmp_path / "a")
    second = run_benchmark("locomo", data, options=options, out_dir=tmp_path / "b")
    cache_first = first.summary["environment"]["embedding_cache"]
    cache_second = second.summary["environment"]["embedding_cache"]
    assert cache_first["embedded"] == 92 and cache_first["from_disk"] == 0
    assert cache_second["embedded"] == 0 and cache_second["from_disk"] == 92
    retrieved = [[r["retrieved"] for r in _records(tmp_path / run)] for run in ("a", "b")]
    assert retrieved[0] == retrieved[1]
