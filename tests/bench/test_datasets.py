"""Benchmark loaders: parsing quirks of the published files, on small real slices."""

from __future__ import annotations

import gzip
import json
from datetime import UTC, datetime
from pathlib import Path

import pytest

from anamnesis.bench import datasets as d
from anamnesis.errors import InvalidInputError

FIXTURES = Path(__file__).parent.parent / "fixtures" / "bench"


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ("D1:3", ["D1:3"]),
        ("D8:6; D9:17", ["D8:6", "D9:17"]),
        ("D9:1 D4:4 D4:6", ["D9:1", "D4:4", "D4:6"]),
        ("D:11:26", ["D11:26"]),
        ("D30:05", ["D30:5"]),
        ("D", []),
        ("", []),
    ],
)
def test_parse_dia_ids(raw, expected):
    assert d.parse_dia_ids(raw) == expected


def test_dates():
    assert d.parse_locomo_date("1:56 pm on 8 May, 2023") == datetime(2023, 5, 8, 13, 56, tzinfo=UTC)
    assert d.parse_locomo_date("10:04 am on 19 December, 2023").hour == 10
    assert d.parse_longmemeval_date("2023/05/20 (Sat) 02:21") == datetime(
        2023, 5, 20, 2, 21, tzinfo=UTC
    )
    assert d.parse_beam_date("March-15-2024") == datetime(2024, 3, 15, tzinfo=UTC)
    assert d.parse_beam_date("someday") is None
    with pytest.raises(InvalidInputError):
        d.parse_locomo_date("yesterday")


def test_other_date_formats_in_locomo_files_are_read_when_unambiguous():
    from collections import Counter

    notes: Counter[str] = Counter()
    assert d.parse_locomo_date("29.12.2023, 22:42:04", notes) == datetime(
        2023, 12, 29, 22, 42, 4, tzinfo=UTC
    )
    assert d.parse_locomo_date("2024-01-05 09:30", notes) == datetime(2024, 1, 5, 9, 30, tzinfo=UTC)
    assert notes["session_dates_read_leniently"] == 2
    assert "session_date '29.12.2023, 22:42:04' read as 2023-12-29T22:42:04+00:00 (UTC)" in notes
    with pytest.raises(InvalidInputError, match="ambiguous"):
        d.parse_locomo_date("05.03.2023, 10:00")
    with pytest.raises(InvalidInputError):
        d.parse_locomo_date("3 days ago")


def test_flatten_beam_ids():
    assert list(d.flatten_ids({"first_statement": [58], "second_statement": [24]})) == ["58", "24"]
    assert list(d.flatten_ids([4, [60, 116], "7"])) == ["4", "60", "116", "7"]
    assert list(d.flatten_ids(None)) == []
    assert list(d.flatten_ids(["chat_id: 5"])) == []


def test_locomo_fixture():
    ds = d.load("locomo", FIXTURES / "locomo_smoke.json.gz")
    assert ds.evidence_key == "dia_id" and len(ds.cases) == 1
    case = ds.cases[0]
    keys = {m["metadata"]["dia_id"] for m in case.messages}
    assert all(e in keys for q in case.questions for e in q.evidence)
    images = [m for m in case.messages if m["modality"] == "image"]
    assert images and all("[shared an image:" in m["content"] for m in images)
    assert all(m["metadata"]["image_caption"] for m in images)
    first = case.messages[0]
    assert first["session_id"] == "session_1"
    assert first["event_time"] == datetime(2023, 5, 8, 13, 56, tzinfo=UTC)
    assert case.messages[1]["event_time"] > first["event_time"]
    assert {q.evidence_sessions[0] for q in case.questions} <= {f"session_{n}" for n in range(1, 6)}


def test_locomo_counts_malformed_evidence(tmp_path):
    record = {
        "sample_id": "c1",
        "conversation": {
            "speaker_a": "A",
            "speaker_b": "B",
            "session_1_date_time": "1:56 pm on 8 May, 2023",
            "session_1": [
                {"speaker": "A", "dia_id": "D1:1", "text": "hello"},
                {"speaker": "B", "dia_id": "D1:2", "text": "hi"},
            ],
        },
        "qa": [
            {"question": "q1", "answer": "x", "evidence": ["D1:1; D1:2"], "category": 1},
            {"question": "q2", "answer": "x", "evidence": ["D"], "category": 4},
            {"question": "q3", "answer": "x", "evidence": ["D1:9"], "category": 2},
            {"question": "q4", "adversarial_answer": "y", "evidence": ["D:1:2"], "category": 5},
        ],
    }
    path = tmp_path / "tiny.json"
    path.write_text(json.dumps([record]))
    ds = d.load("locomo", path)
    questions = ds.cases[0].questions
    assert questions[0].evidence == ("D1:1", "D1:2")
    assert questions[1].evidence == () and questions[2].evidence == ()
    assert questions[3].evidence == ("D1:2",) and questions[3].abstention
    assert questions[3].category == "adversarial" and questions[3].answer == "y"
    assert ds.notes == {
        "evidence_repaired": 2,
        "evidence_unparseable": 1,
        "evidence_dangling": 1,
        "questions_without_evidence": 2,
    }


def test_longmemeval_fixture():
    ds = d.load("longmemeval", FIXTURES / "longmemeval_smoke.json.gz")
    assert ds.evidence_key == "turn_id" and len(ds.cases) == 3
    raw = json.loads(gzip.open(FIXTURES / "longmemeval_smoke.json.gz", "rt").read())
    for case, entry in zip(ds.cases, raw, strict=True):
        question = case.questions[0]
        expected = [
            f"{sid}_{i + 1}"
            for sid, turns in zip(
                entry["haystack_session_ids"], entry["haystack_sessions"], strict=True
            )
            for i, turn in enumerate(turns)
            if turn.get("has_answer")
        ]
        assert list(question.evidence) == expected
        assert set(question.evidence_sessions) == set(entry["answer_session_ids"])
        assert question.abstention == entry["question_id"].endswith("_abs")
        asked = d.parse_longmemeval_date(entry["question_date"])
        assert question.asked_at is not None and question.asked_at > asked
        assert all(m["event_time"] < question.asked_at for m in case.messages)
    assistant_case = next(c for c in ds.cases if c.questions[0].category.endswith("assistant"))
    ids = {m["metadata"]["turn_id"]: m for m in assistant_case.messages}
    assert any(ids[e]["role"] == "assistant" for e in assistant_case.questions[0].evidence)


def test_beam_fixture():
    ds = d.load("beam", FIXTURES / "beam_smoke.json.gz")
    assert ds.evidence_key == "message_id"
    case = ds.cases[0]
    assert len(case.messages) == 60 and case.messages[0]["session_id"] == "batch_1"
    assert case.messages[0]["event_time"] == datetime(2024, 3, 15, tzinfo=UTC)
    by_ability = {q.category: q for q in case.questions}
    assert set(by_ability["contradiction_resolution"].evidence) == {"58", "24"}
    assert by_ability["abstention"].abstention and by_ability["abstention"].evidence == ()
    assert ds.notes["evidence_dangling"] == 2  # event ordering evidence outside the slice


def test_load_rejects_wrong_format_and_name(tmp_path):
    path = tmp_path / "x.json"
    path.write_text("[1, 2]")
    with pytest.raises(InvalidInputError):
        d.load("locomo", path)
    with pytest.raises(InvalidInputError):
        d.load("squad", path)


def test_limit_caps_cases():
    ds = d.load("longmemeval", FIXTURES / "longmemeval_smoke.json.gz", limit=2)
    assert len(ds.cases) == 2


def test_prefix_speakers_ablation():
    ds = d.load("locomo", FIXTURES / "locomo_smoke.json.gz")
    d.prefix_speakers(ds)
    first = ds.cases[0].messages[0]
    assert first["content"].startswith("Caroline: ") and ds.notes["speaker_prefix"]


def test_overlong_messages_are_clipped_and_counted():
    from collections import Counter

    from anamnesis.ingest.normalise import MAX_CONTENT_CHARS

    notes: Counter[str] = Counter()
    assert d.clip("short", notes) == "short" and not notes
    assert len(d.clip("x" * (MAX_CONTENT_CHARS + 5), notes)) == MAX_CONTENT_CHARS
    assert notes["messages_truncated"] == 1


def test_a_locomo_file_with_other_dates_loads_and_says_what_it_assumed(tmp_path):
    import json
    from pathlib import Path

    record = json.loads(
        (Path(__file__).parent.parent / "fixtures" / "locomo_conv26_sessions1-4.json").read_text()
    )
    conversation = record["conversation"]
    for key in [k for k in conversation if k.endswith("_date_time")]:
        conversation[key] = "29.12.2023, 22:42:04"
    path = tmp_path / "other-dates.json"
    path.write_text(json.dumps([record]))
    dataset = d.load_locomo(path)
    assert dataset.notes["session_dates_read_leniently"] == 4
    first = dataset.cases[0].messages[0]["event_time"]
    assert str(first).startswith("2023-12-29")
