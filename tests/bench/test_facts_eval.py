"""``anamnesis bench facts``: the scorer's matching rule, and the rules' floor on the
labelled sets (tests/fixtures/fact_statements*.jsonl; see tests/fixtures/README.md)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from anamnesis.bench.facts_eval import facts_command, family_of, load, part_of, score
from anamnesis.errors import InvalidInputError

FIXTURES = Path(__file__).parent.parent / "fixtures"


def write(tmp_path: Path, *rows: dict) -> Path:
    path = tmp_path / "set.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def row(text: str, *facts: dict, speaker: str | None = None) -> dict:
    return {"text": text, "speaker": speaker, "role": "user", "source": "own", "facts": list(facts)}


def fact(predicate: str, obj: str, op: str = "add", subject: str = "user", **extra) -> dict:
    return {"subject": subject, "predicate": predicate, "object": obj, "op": op, **extra}


def test_a_match_needs_subject_predicate_op_and_an_accepted_object(tmp_path: Path) -> None:
    statements = load(
        write(
            tmp_path,
            row(
                "Big news: I left Tencent and now work at Moonshot AI.",
                fact("works_at", "Moonshot AI"),
                fact("works_at", "Tencent", "end"),
            ),
            row("I bought a new car.", fact("owns", "car", also=["a new car"])),
            row("I live in Berlin.", fact("lives_in", "Berlin", "end")),  # wrong op
            row("My sister Emma called.", fact("sister", "Emma", subject="Ana"), speaker="Bo"),
            row("Do you work at Google?"),
        )
    )
    result = score(statements)
    overall = result.overall
    assert (overall.labelled, overall.extracted, overall.correct_extracted) == (5, 5, 3)
    assert overall.precision == pytest.approx(3 / 5) and overall.recall == pytest.approx(3 / 5)
    assert result.families["changes"].found == 1
    assert {f.predicate for _, f in result.wrong} == {"lives_in", "sister"}


def test_families_and_the_fixed_split() -> None:
    assert family_of("favorite band") == "preferences" and family_of("partner") == "relationships"
    assert family_of("habit") == "routines" and family_of("made_up") == "other"
    assert part_of("I live in Berlin.") == part_of("I live in Berlin.")
    statements = load(FIXTURES / "fact_statements.jsonl")
    held_out = sum(part_of(s.text) == "held-out" for s in statements)
    assert 0.25 < held_out / len(statements) < 0.42


def test_a_malformed_line_is_an_input_error(tmp_path: Path) -> None:
    path = tmp_path / "bad.jsonl"
    path.write_text('{"text": "I live in Oslo."}\n')
    with pytest.raises(InvalidInputError, match="bad.jsonl:1"):
        load(path)


def test_the_command_prints_each_part_and_family() -> None:
    result = CliRunner().invoke(
        facts_command, ["--data", str(FIXTURES / "fact_statements.jsonl"), "--part", "held-out"]
    )
    assert result.exit_code == 0, result.output
    assert "| held-out | dev-data turns |" in result.output and "| changes |" in result.output
    assert "| tuning |" not in result.output


@pytest.mark.parametrize(
    ("name", "precision", "recall"),
    [
        # The labelled set (tuned on, two thirds of it): at least the target.
        ("fact_statements.jsonl", 0.8, 0.6),
        # Dev-data turns drawn after tuning: the rules must not fall back to the old ones'
        # level there (fresh 0.69 / 0.37, final 0.45 / 0.21, blind 0.47 / 0.28, blind2
        # 0.67 / 0.22), nor below what the second round reached on the samples it read
        # (fresh 0.96 / 0.73, final 0.94 / 0.79, blind 0.90 / 0.81; blind2 0.86 / 0.33
        # at its one reading).
        ("fact_statements_fresh.jsonl", 0.85, 0.65),
        ("fact_statements_final.jsonl", 0.85, 0.7),
        ("fact_statements_blind.jsonl", 0.8, 0.7),
        ("fact_statements_blind2.jsonl", 0.75, 0.3),
    ],
)
def test_the_rules_keep_their_floor_on_the_labelled_sets(
    name: str, precision: float, recall: float
) -> None:
    overall = score(load(FIXTURES / name)).overall
    assert overall.precision >= precision and overall.recall >= recall
