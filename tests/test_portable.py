"""Export → import round-trips a memory exactly."""

from __future__ import annotations

import io
import json

import pytest

from anamnesis import InvalidInputError, Memory


def _export(memory: Memory, **kwargs) -> str:
    buffer = io.StringIO()
    memory.export_jsonl(buffer, **kwargs)
    return buffer.getvalue()


@pytest.fixture
def populated(memory: Memory) -> Memory:
    memory.add(
        [
            {
                "role": "user",
                "speaker": "Ana",
                "content": "Olá! I moved to Porto 🏠",
                "event_time": "2024-03-02T09:15:00Z",
                "metadata": {"lang": "pt"},
            },
            {
                "role": "assistant",
                "content": "Welcome to Porto!",
                "event_time": "2024-03-02T09:16:00Z",
            },
        ],
        user_id="ana",
        agent_id="helper",
        session_id="s1",
    )
    (image,) = memory.add({"content": "photo of a bridge", "modality": "image"}, user_id="bob")
    memory.update(image.id, content="photo of the Dom Luís bridge", user_id="bob")
    return memory


def test_round_trip_is_exact(populated: Memory, tmp_path, embedder) -> None:
    dump = _export(populated)
    with Memory(path=tmp_path / "copy.db", embedder=embedder) as copy:
        assert copy.import_jsonl(dump.splitlines()) == 3
        assert _export(copy) == dump
        assert (
            copy.history(populated.get_all(user_id="bob").items[0].id, user_id="bob")[0].content
            == "photo of a bridge"
        )
        assert copy.search("bridge", user_id="bob")[0].episode.modality == "image"


def test_import_reuses_vectors_when_the_embedder_matches(
    populated, tmp_path, embedder, monkeypatch
) -> None:
    dump = _export(populated)
    with Memory(path=tmp_path / "copy.db", embedder=embedder) as copy:
        monkeypatch.setattr(
            copy.embedder, "embed_documents", lambda texts: pytest.fail("re-embedded")
        )
        copy.import_jsonl(dump.splitlines())


def test_import_re_embeds_for_another_embedder(populated, tmp_path) -> None:
    dump = _export(populated)
    with Memory(path=tmp_path / "edge.db", embedder="edge") as copy:
        assert copy.import_jsonl(dump.splitlines()) == 3
        assert copy.search("Porto", user_id="ana")[0].episode.speaker in ("Ana", None)


def test_import_twice_skips_what_is_already_there(populated, tmp_path, embedder) -> None:
    dump = _export(populated)
    with Memory(path=tmp_path / "copy.db", embedder=embedder) as copy:
        copy.import_jsonl(dump.splitlines())
        assert copy.import_jsonl(dump.splitlines()) == 0
        assert copy.stats()["episodes"] == 3


def test_export_of_one_user(populated: Memory) -> None:
    records = [json.loads(line) for line in _export(populated, user_id="bob").splitlines()]
    assert {r.get("user_id") for r in records[1:]} == {"bob"}


@pytest.mark.parametrize(
    ("lines", "message"),
    [
        (['{"type": "episode"}'], "not an Anamnesis export"),
        (["not json"], "not JSON"),
        (['{"type": "anamnesis-export", "version": 99}'], "unsupported export version"),
        (
            ['{"type": "anamnesis-export", "version": 1}', '{"type": "episode", "id": "x"}'],
            "line 2",
        ),
    ],
)
def test_malformed_exports_are_rejected(memory: Memory, lines, message) -> None:
    with pytest.raises(InvalidInputError, match=message):
        memory.import_jsonl(lines)
