"""The scale benchmark's distinct texts and its many-small-scopes layout, on the fixtures."""

from __future__ import annotations

import pytest

from anamnesis.bench.scale import (
    ScaleOptions,
    run_scale,
    scale_markdown,
    scope_user,
    search_users,
    segments,
)
from anamnesis.bench.scale_text import distinct_sentences, split_sentences, text_messages
from anamnesis.errors import InvalidInputError

from .test_smoke import FIXTURES

FILES = [
    ("longmemeval", FIXTURES / "longmemeval_smoke.json.gz"),
    ("locomo", FIXTURES / "locomo_smoke.json.gz"),
    ("beam", FIXTURES / "beam_smoke.json.gz"),
]


def test_sentences_are_cut_at_line_breaks_and_sentence_ends_and_short_pieces_dropped():
    text = (
        'First a full sentence here. "Quoted one ends here!" Then\n\n- ok\n1.\n'
        "Last line, long enough?"
    )
    assert split_sentences(text) == [
        "First a full sentence here.",
        '"Quoted one ends here!"',
        "Last line, long enough?",
    ]


def test_every_text_is_distinct_and_the_order_is_the_same_on_every_read():
    first = distinct_sentences(FILES)
    second = distinct_sentences(FILES)
    contents = [t.content for t in first.texts]
    assert len(contents) == len(set(contents)) == first.sentences > 500
    assert contents == [t.content for t in second.texts]
    assert [f["name"] for f in first.files] == ["longmemeval", "locomo", "beam"]
    assert all(f["sentences"] > 0 for f in first.files)
    assert first.pairs == 0
    # Sessions of different data sets and cases never merge.
    assert {t.session_id.split(":")[0] for t in first.texts} == {"longmemeval", "locomo", "beam"}
    assert first.questions and first.questions == second.questions


def test_adjacent_pairs_complete_the_list_without_repeating_a_text():
    plain = distinct_sentences(FILES)
    need = plain.sentences + 200
    grown = distinct_sentences(FILES, need=need)
    contents = [t.content for t in grown.texts]
    assert len(contents) == len(set(contents)) == need and grown.pairs == 200
    assert contents[: plain.sentences] == [t.content for t in plain.texts]
    pair = grown.texts[plain.sentences]
    assert pair.content.startswith(plain.texts[pair_index(plain, pair.content)].content)


def pair_index(source, content):
    return next(i for i, t in enumerate(source.texts) if content.startswith(t.content + " "))


def test_asking_for_more_than_the_data_sets_hold_is_an_error_not_a_repeat():
    with pytest.raises(InvalidInputError, match="distinct texts"):
        distinct_sentences(FILES[:1], need=10**6)
    texts = distinct_sentences(FILES[:1]).texts
    with pytest.raises(InvalidInputError, match="fewer episodes"):
        list(text_messages(texts, 0, len(texts) + 1))


def test_scopes_take_consecutive_blocks_and_searches_spread_over_full_scopes():
    batches = list(segments(lambda low, high: iter(range(low, high)), 0, 2500, 1000))  # type: ignore[arg-type,return-value]
    assert [(user, len(rows)) for user, rows in batches] == [
        ("scale-00000", 1000),
        ("scale-00001", 1000),
        ("scale-00002", 500),
    ]
    resumed = list(segments(lambda low, high: iter(range(low, high)), 2500, 3200, 1000))  # type: ignore[arg-type,return-value]
    assert [(user, len(rows)) for user, rows in resumed] == [
        ("scale-00002", 500),
        ("scale-00003", 200),
    ]
    assert search_users(10_000, 4, 1000) == [
        "scale-00000",
        "scale-00002",
        "scale-00005",
        "scale-00007",
    ]
    assert search_users(10_000, 2, None) == ["scale", "scale"]
    assert scope_user(999, 1000) == "scale-00000" and scope_user(1000, 1000) == "scale-00001"


def test_a_run_in_small_scopes_searches_one_scope_and_reports_every_column(tmp_path):
    options = ScaleOptions(
        sizes=(120, 300),
        embedder="edge",
        configs=("fast", "default"),
        queries=4,
        single_adds=2,
        scope_size=50,
        extra_data=(("locomo", str(FILES[1][1])), ("beam", str(FILES[2][1]))),
    )
    result = run_scale(FILES[0][1], options, tmp_path / "stores")
    first, second = result.points
    assert (first.episodes, first.scopes) == (122, 3)
    assert (second.episodes, second.scopes) == (302, 7)
    assert second.embedded_texts == second.segment_messages  # every text new and embedded
    assert set(second.search_ms) == {"fast", "default"}
    assert second.forget["removed"] == 1 and second.forget["occurrences_after"] == 0
    assert second.ann == {"graph": False}  # far below the graph's threshold
    report = scale_markdown(result.as_dict())
    assert "scopes of 50 consecutive episodes" in report
    assert "distinct sentences" in report and report.count("\n| 302 |") == 2
