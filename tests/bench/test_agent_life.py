"""``anamnesis bench agent-life``: the metrics of one ranked list, and a run of the
command on one persona of the bundled dev set (its questions, gold and stale items)."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

from click.testing import CliRunner

from anamnesis.bench.agent_life import PERSONAS, Question, agent_life_command, score


def _question(gold: set[str], stale: frozenset[str] = frozenset()) -> Question:
    return Question(
        persona="p",
        index=0,
        text="q",
        asked_at=datetime(2025, 1, 1, tzinfo=UTC),
        type="current_state",
        kind="life",
        gold=frozenset(gold),
        stale=frozenset(stale),
    )


def test_a_ranked_list_is_scored_against_gold_and_stale() -> None:
    metrics = score(["s", "x", "g1", "y", "g2"], _question({"g1", "g2"}, frozenset({"s"})))
    assert metrics["hit@1"] == 0.0
    assert metrics["recall@5"] == 1.0
    assert metrics["mrr"] == 1 / 3
    assert metrics["stale_above"] == 1.0
    assert score(["g1", "s"], _question({"g1"}, frozenset({"s"})))["stale_above"] == 0.0
    assert (
        score(["x", "s"], _question({"g1"}, frozenset({"s"})))["stale_above"] == 1.0
    )  # gold not found


def test_the_command_reports_every_metric_by_type(tmp_path: Path) -> None:
    persona = sorted(PERSONAS.glob("*.json"))[0]
    out = tmp_path / "results.json"
    result = CliRunner().invoke(
        agent_life_command,
        ["--data", str(persona), "--config", "fast", "--embedder", "edge", "--out", str(out)],
    )
    assert result.exit_code == 0, result.output
    assert "| fast |" in result.output and "current_state" in result.output
    saved = json.loads(out.read_text())
    questions = json.loads(persona.read_text())["questions"]
    assert len(saved["results"]["fast"]) == len(questions)
