"""An import is checked like ``add``: a bad file stores nothing, and trusts nothing it
should not (hashes are recomputed, vectors never cross users)."""

from __future__ import annotations

import base64
import io
import json
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

from anamnesis import InvalidInputError, Memory
from anamnesis.cli import main
from anamnesis.ingest.normalise import content_hash


def _export(memory: Memory, **kwargs) -> list[str]:
    buffer = io.StringIO()
    memory.export_jsonl(buffer, **kwargs)
    return buffer.getvalue().splitlines()


@pytest.fixture
def dump(memory: Memory) -> list[str]:
    memory.add(
        ["I moved to Porto", "I work at Acme", "My sister is allergic to cats"],
        user_id="ana",
        session_id="s1",
        event_time="2024-03-02T09:15:00Z",
    )
    return _export(memory)


def _edited(lines: list[str], index: int, **changes) -> list[str]:
    """``lines`` with the ``index``-th episode record changed (None deletes a key)."""
    out, seen = [], 0
    for line in lines:
        record = json.loads(line)
        if record.get("type") == "episode":
            if seen == index:
                for key, value in changes.items():
                    if value is None:
                        record.pop(key, None)
                    else:
                        record[key] = value
            seen += 1
        out.append(json.dumps(record))
    return out


@pytest.fixture
def target(tmp_path: Path, embedder) -> Memory:
    with Memory(path=tmp_path / "target.db", embedder=embedder, warm=False) as memory:
        yield memory


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"turn_index": "abc"}, "turn_index"),
        ({"turn_index": True}, "turn_index"),
        ({"user_id": ""}, "user_id"),
        ({"user_id": "ana\nbob"}, "user_id"),
        ({"user_id": ["ana"]}, "user_id"),
        ({"content": ""}, "content is empty"),
        ({"content": 42}, "content must be a string"),
        ({"content": "x" * 200_001}, "limit"),
        ({"event_time": "not a time"}, "event_time"),
        ({"event_time": None}, "event_time is required"),
        ({"metadata": ["a"]}, "metadata"),
        ({"speaker": "Ana\n"}, "speaker"),
        ({"version": 0}, "version"),
        ({"embedding": "***"}, "base64"),
        ({"embedding": base64.b64encode(b"\0\0\0\0").decode()}, "expected"),
        ({"versions": "old"}, "versions"),
        ({"id": None}, "episode id"),
    ],
)
def test_a_bad_record_stores_nothing(target: Memory, dump, changes, message) -> None:
    lines = _edited(dump, 2, **changes)  # the last episode: the first two are valid
    with pytest.raises(InvalidInputError, match=message):
        target.import_jsonl(lines)
    assert target.stats()["episodes"] == 0


def test_after_a_refused_import_search_still_works(target: Memory, dump) -> None:
    with pytest.raises(InvalidInputError, match="line"):
        target.import_jsonl(_edited(dump, 0, turn_index="abc"))
    target.import_jsonl(dump)
    assert target.search("Porto", user_id="ana")
    assert target.context("where does Ana live?", user_id="ana").text


def test_lines_that_are_not_text_are_refused(target: Memory, dump) -> None:
    raw = [dump[0].encode(), "é".encode("latin-1")]
    with pytest.raises(InvalidInputError, match="not valid UTF-8"):
        target.import_jsonl(raw)  # type: ignore[arg-type]


def test_content_hash_is_recomputed_not_trusted(target: Memory, dump) -> None:
    target.import_jsonl(_edited(dump, 0, content_hash="f" * 64))
    (episode,) = [e for e in target.get_all(user_id="ana").items if "Porto" in e.content]
    assert episode.content_hash == content_hash("I moved to Porto")


def test_an_imported_vector_never_reaches_another_user(target: Memory, dump, embedder) -> None:
    planted = np.zeros(embedder.dim, dtype="<f4")
    planted[0] = 1.0
    poisoned = _edited(dump, 0, embedding=base64.b64encode(planted.tobytes()).decode())
    target.import_jsonl(poisoned)
    (mine,) = target.add("I moved to Porto", user_id="bob")
    true = embedder.embed_documents(["I moved to Porto"])[0]
    stored = target.store.vectors_for_hashes([mine.content_hash], target._scope("bob", None, None))
    assert float(stored[mine.content_hash] @ true) == pytest.approx(1.0, abs=1e-4)


def test_user_moves_every_record_into_that_user(target: Memory, dump) -> None:
    assert target.import_jsonl(dump, user_id="carla") == 3
    assert target.stats(user_id="carla")["episodes"] == 3
    assert target.stats(user_id="ana")["episodes"] == 0


def test_a_file_object_is_read_twice_from_where_it_stands(target: Memory, dump) -> None:
    assert target.import_jsonl(io.StringIO("\n".join(dump) + "\n")) == 3


def test_cli_import_of_a_latin1_file_is_bad_input(tmp_path: Path) -> None:
    path = tmp_path / "chat.jsonl"
    path.write_bytes('{"content": "café"}\n'.encode("latin-1"))
    result = CliRunner().invoke(
        main, ["--path", str(tmp_path / "m.db"), "--embedder", "edge", "import", str(path)]
    )
    assert result.exit_code == 2, result.output
    assert "UTF-8" in result.output and "iconv" in result.output
    assert not isinstance(result.exception, UnicodeDecodeError)


def test_cli_import_of_an_export_honours_user_and_refuses_session(tmp_path: Path, dump) -> None:
    path = tmp_path / "dump.jsonl"
    path.write_text("\n".join(dump) + "\n")
    base = ["--path", str(tmp_path / "m.db"), "import", str(path)]
    refused = CliRunner().invoke(main, [*base, "--session", "s9"])
    assert refused.exit_code == 2 and "--session" in refused.output
    moved = CliRunner().invoke(main, [*base, "--user", "carla"])
    assert moved.exit_code == 0, moved.output
    with Memory(path=tmp_path / "m.db", warm=False) as memory:
        assert memory.stats(user_id="carla")["episodes"] == 3
