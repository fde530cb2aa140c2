"""``anamnesis bench gate`` end to end on the LoCoMo smoke slice, so the sweep cannot rot."""

from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner

from anamnesis.bench.cli import bench

FIXTURES = Path(__file__).parent.parent / "fixtures" / "bench"


def test_gate_sweep_on_a_locomo_slice(tmp_path: Path) -> None:
    out = tmp_path / "gate.json"
    result = CliRunner().invoke(
        bench,
        [
            "gate",
            "locomo",
            "--data",
            str(FIXTURES / "locomo_smoke.json.gz"),
            "--thresholds",
            "off,0.3,0.6",
            "--embedder",
            "edge",
            "--out",
            str(out),
        ],
    )
    assert result.exit_code == 0, result.output
    assert "| threshold | episodes admitted | evidence turns admitted |" in result.output
    payload = json.loads(out.read_text())
    assert payload["cases"] == 1
    off, default, strict = payload["points"]
    assert off["threshold"] is None and off["admitted"] == off["episodes"] > 0
    assert off["evidence_admitted"] == off["evidence"] > 0
    assert off["gate_seconds"] == 0.0 < default["gate_seconds"]
    assert off["episodes"] > default["admitted"] > strict["admitted"]
    assert strict["evidence_admitted"] <= default["evidence_admitted"] <= off["evidence"]
    assert set(default["recall"]) == set(off["recall"]) == set(strict["archive_recall"])
    assert all(0.0 <= value <= 1.0 for value in strict["recall"].values())


def test_gate_sweep_refuses_a_bad_threshold(tmp_path: Path) -> None:
    result = CliRunner().invoke(
        bench,
        ["gate", "locomo", "--data", str(FIXTURES / "locomo_smoke.json.gz"), "--thresholds", "x"],
    )
    assert result.exit_code == 2 and "not a number" in result.output
