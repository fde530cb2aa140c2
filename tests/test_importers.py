"""Importing history: ChatGPT and Claude.ai exports, Claude Code transcripts, notes.

Each source imports with exact counts (kept, and skipped by reason); re-importing adds
nothing; a dry run writes nothing; a malformed or truncated file fails with
``ImportFormatError`` naming the place, and the memory is unchanged. The fixtures are
synthetic (tests/fixtures/importers/README.md).
"""

from __future__ import annotations

import json
import os
import shutil
import zipfile
from datetime import UTC, datetime
from pathlib import Path

import pytest
from store_fixtures import postgres_schema_url_fixture  # noqa: F401  (registered by name)

from anamnesis import Memory
from anamnesis.errors import ImportFormatError, InvalidInputError
from anamnesis.importers import import_export
from anamnesis.ingest.normalise import MAX_CONTENT_CHARS

FIXTURES = Path(__file__).parent / "fixtures" / "importers"
CHATGPT = FIXTURES / "chatgpt" / "conversations.json"
CLAUDE = FIXTURES / "claude" / "conversations.json"
CLAUDE_CODE = FIXTURES / "claude_code"
SESSION = CLAUDE_CODE / "-home-ana-src-garden" / "5e55a0de-0000-4000-8000-00000000cc01.jsonl"


def _all(memory: Memory, user: str = "ana") -> list:
    items, offset = [], 0
    while offset is not None:
        page = memory.get_all(user_id=user, limit=1000, offset=offset)
        items += page.items
        offset = page.next_offset
    return items


def _by_source_id(memory: Memory, user: str = "ana") -> dict[str, list]:
    found: dict[str, list] = {}
    for episode in _all(memory, user):
        found.setdefault(episode.metadata["source_id"], []).append(episode)
    return found


# ChatGPT


def test_chatgpt_keeps_the_branch_at_current_node_and_counts_what_it_skips(memory) -> None:
    report = import_export(memory, "chatgpt", CHATGPT, user_id="ana")
    assert (report.conversations, report.messages, report.added) == (3, 12, 12)
    assert report.already_present == 0
    assert report.skipped == {
        "other branches": 3,  # the question before its edit, and two replaced answers
        "system": 2,  # hidden system prompt and custom instructions
        "tool call": 2,
        "tool output": 2,
        "reasoning": 2,
        "attachment": 1,  # one image: in parts and in metadata, counted once
        "empty": 1,
    }
    stored = _by_source_id(memory)
    assert set(stored) == {"u-1b", "a-1c", "u-2", "a-2", "d-u1", "d-a2", "d-u2", "d-a3"} | {
        "r-u1",
        "r-a1",
        "r-a2",
    }
    contents = " ".join(e.content for e in _all(memory))
    assert "Plan 2 days" not in contents and "ride tram 28" not in contents
    edited = stored["u-1b"][0]
    assert edited.session_id == "chatgpt:6630a1f0-0000-4000-8000-00000000a001"
    assert (edited.role, edited.speaker) == ("user", None)
    assert edited.event_time == datetime(2024, 5, 1, 10, 1, tzinfo=UTC)
    assert edited.metadata["title"] == "Lisbon with Inês"
    answer = stored["a-1c"][0]
    assert (answer.role, answer.speaker, answer.metadata["model"]) == (
        "assistant",
        "ChatGPT",
        "gpt-4o",
    )
    assert stored["u-2"][0].content == "Is this the tram stop near the Sé cathedral?"
    assert stored["u-2"][0].metadata["attachments"] == ["tram.jpg"]
    # A message without create_time takes the time of the one before it.
    assert stored["r-a1"][0].event_time == datetime(2024, 7, 1, 10, 0, 4, tzinfo=UTC)
    assert stored["r-u1"][0].content == "Wie backe ich Pão de Queijo? 日本語でも教えて 🧀"
    turns = [e.turn_index for e in _all(memory) if e.session_id == edited.session_id]
    assert turns == [0, 1, 2, 3]


def test_a_message_longer_than_an_episode_is_stored_in_parts(memory) -> None:
    import_export(memory, "chatgpt", CHATGPT, user_id="ana")
    parts = _by_source_id(memory)["d-u1"]
    assert [p.metadata["part"] for p in parts] == [1, 2]
    assert all(p.metadata["parts"] == 2 for p in parts)
    assert all(len(p.content) <= MAX_CONTENT_CHARS for p in parts)
    source = json.loads(CHATGPT.read_text())[1]["mapping"]["d-u1"]["message"]
    original = source["content"]["parts"][0]
    assert "".join(p.content for p in parts).replace("\n", "") == original.replace("\n", "")


def test_reimporting_adds_nothing_and_a_dry_run_writes_nothing(memory) -> None:
    dry = import_export(memory, "chatgpt", CHATGPT, user_id="ana", dry_run=True)
    assert (dry.dry_run, dry.added, dry.new_conversations) == (True, 12, 3)
    assert memory.get_all(user_id="ana").total == 0
    import_export(memory, "chatgpt", CHATGPT, user_id="ana")
    again = import_export(memory, "chatgpt", CHATGPT, user_id="ana")
    assert (again.added, again.already_present, again.new_conversations) == (0, 12, 0)
    assert memory.get_all(user_id="ana").total == 12
    assert import_export(memory, "chatgpt", CHATGPT, user_id="ana", dry_run=True).added == 0


def test_the_export_zip_and_its_folder_import_like_the_file(memory, tmp_path) -> None:
    archive = tmp_path / "chatgpt-export.zip"
    with zipfile.ZipFile(archive, "w") as zipped:
        zipped.write(CHATGPT, "conversations.json")
        zipped.writestr("chat.html", "<html></html>")
    assert import_export(memory, "chatgpt", archive, user_id="ana").added == 12
    assert import_export(memory, "chatgpt", CHATGPT.parent, user_id="ana").added == 0


def test_a_source_without_attachments_reports_none(memory, tmp_path) -> None:
    only = tmp_path / "conversations.json"
    only.write_text(json.dumps(json.loads(CHATGPT.read_text())[1:2]))
    report = import_export(memory, "chatgpt", only, user_id="ana", dry_run=True)
    assert report.skipped == {"tool call": 1, "tool output": 1}
    assert "attachment" not in report.summary()
    claude = tmp_path / "claude.json"
    claude.write_text(json.dumps(json.loads(CLAUDE.read_text())[1:]))
    assert import_export(memory, "claude", claude, dry_run=True).skipped == {"empty": 1}


def test_an_import_large_for_the_store_runs_in_bulk_mode(memory, monkeypatch) -> None:
    # Bulk mode ends with fresh planner statistics: without them, checking what each
    # session holds walked the user's whole history (as slow as the import itself).
    from contextlib import contextmanager

    import anamnesis.importers.core as core

    entered = []
    bulk = memory.store.bulk_load

    @contextmanager
    def spy(*args, **kwargs):
        entered.append(True)
        with bulk(*args, **kwargs):
            yield

    monkeypatch.setattr(memory.store, "bulk_load", spy)
    monkeypatch.setattr(core, "BULK_IMPORT_MIN_EPISODES", 6)
    import_export(memory, "claude", CLAUDE, user_id="ana")  # 6 episodes into an empty store
    assert entered == [True]
    import_export(memory, "notes", FIXTURES / "notes", user_id="ana")  # 5: not large
    assert entered == [True]


def test_a_new_message_in_a_known_conversation_is_added_after_the_others(memory, tmp_path) -> None:
    import_export(memory, "chatgpt", CHATGPT, user_id="ana")
    data = json.loads(CHATGPT.read_text())
    mapping = data[0]["mapping"]
    mapping["a-2"]["children"] = ["u-3"]
    mapping["u-3"] = {
        "id": "u-3",
        "parent": "a-2",
        "children": [],
        "message": {
            "id": "u-3",
            "author": {"role": "user"},
            "create_time": 1714558000.0,
            "content": {"content_type": "text", "parts": ["Thanks, obrigada!"]},
            "metadata": {},
            "recipient": "all",
        },
    }
    data[0]["current_node"] = "u-3"
    later = tmp_path / "conversations.json"
    later.write_text(json.dumps(data))
    report = import_export(memory, "chatgpt", later, user_id="ana")
    assert (report.added, report.already_present) == (1, 12)
    (added,) = _by_source_id(memory)["u-3"]
    assert added.turn_index == 4


# Claude.ai


def test_claude_export_keeps_the_last_branch_and_the_older_text_format(memory) -> None:
    report = import_export(memory, "claude", CLAUDE, user_id="ana", speaker="Ana")
    assert (report.conversations, report.messages, report.added) == (2, 6, 6)
    assert report.skipped == {
        "other branches": 1,
        "attachment": 2,
        "reasoning": 1,
        "tool call": 1,
        "tool output": 1,
        "empty": 1,
    }
    stored = _by_source_id(memory)
    assert set(stored) == {"c1-m1", "c1-m2b", "c1-m3", "c1-m4", "c2-m1", "c2-m2"}
    retried = stored["c1-m2b"][0]
    assert retried.content.startswith("'Stupice' and 'Latah'")
    assert (retried.role, retried.speaker) == ("assistant", "Claude")
    question = stored["c1-m1"][0]
    assert (question.role, question.speaker) == ("user", "Ana")
    assert question.metadata["attachments"] == ["balcony.txt"]
    assert "shade after 14:00" not in question.content  # the attachment's text is not a turn
    assert stored["c2-m2"][0].content.endswith("«Feierabend» has no one-word English match.")
    assert stored["c2-m1"][0].event_time == datetime(2023, 11, 20, 21, 0, tzinfo=UTC)
    assert import_export(memory, "claude", CLAUDE, user_id="ana", speaker="Ana").added == 0


# Claude Code


def test_claude_code_transcripts_keep_what_was_said_and_count_the_rest(memory) -> None:
    report = import_export(memory, "claude-code", CLAUDE_CODE, user_id="ana")
    assert (report.conversations, report.messages, report.added) == (2, 6, 6)
    assert report.skipped == {
        "system": 2,  # a meta caveat and a system record
        "reasoning": 1,
        "tool call": 1,
        "tool output": 1,
        "command": 1,
        "sidechain": 1,
        "attachment": 1,
        "record file-history-snapshot": 1,
    }
    stored = _by_source_id(memory)
    assert set(stored) == {"u-1", "a-1", "u-4", "a-2", "o-1", "o-2"}
    answer = stored["a-1"][0]
    assert answer.content == "I'll add `water.py` with a 48-hour schedule."
    assert answer.session_id == "claude-code:5e55a0de-0000-4000-8000-00000000cc01"
    assert answer.metadata["cwd"] == "/home/ana/src/garden"
    assert answer.metadata["git_branch"] == "main"
    assert answer.metadata["title"] == "Watering schedule script"
    assert stored["u-4"][0].content == "Also skip watering when it rained — Regen ☔"
    assert stored["u-1"][0].event_time == datetime(2025, 6, 1, 10, 0, tzinfo=UTC)
    assert import_export(memory, "claude-code", SESSION, user_id="ana").added == 0


def test_a_transcript_imported_while_it_grows_adds_only_the_new_turns(memory, tmp_path) -> None:
    transcript = tmp_path / "session.jsonl"
    lines = SESSION.read_text().splitlines(keepends=True)
    transcript.write_text("".join(lines[:4]))
    assert import_export(memory, "claude-code", transcript, user_id="ana").added == 2
    transcript.write_text("".join(lines))
    report = import_export(memory, "claude-code", transcript, user_id="ana")
    assert (report.added, report.already_present) == (2, 2)
    assert [e.turn_index for e in _all(memory)] == [0, 1, 2, 3]


# Notes


@pytest.fixture
def notes(tmp_path) -> Path:
    """The notes fixture, copied, with known modification times."""
    folder = tmp_path / "notes"
    shutil.copytree(FIXTURES / "notes", folder)
    stamp = datetime(2024, 9, 9, 12, 0, tzinfo=UTC).timestamp()
    for file in folder.rglob("*"):
        os.utime(file, (stamp, stamp))
    return folder


def test_notes_are_one_episode_each_dated_by_their_text_or_their_file(memory, notes) -> None:
    report = import_export(memory, "notes", notes, user_id="ana")
    assert (report.conversations, report.messages, report.added) == (5, 5, 5)
    assert report.skipped == {"empty": 1, "not a note": 1}
    stored = {k: v[0] for k, v in _by_source_id(memory).items()}
    day = lambda y, m, d: datetime(y, m, d, tzinfo=UTC)  # noqa: E731
    assert {k: (e.event_time, e.metadata["dated"]) for k, e in stored.items()} == {
        "ideas.md": (day(2024, 2, 14), "text"),  # front matter
        "journal/2024-05-08.md": (day(2024, 5, 8), "text"),  # file name
        "trips/porto.txt": (day(2024, 3, 3), "text"),  # first line
        "log.md": (datetime(2024, 9, 9, 12, 0, tzinfo=UTC), "file"),
        "recipes/pão de queijo.md": (datetime(2024, 9, 9, 12, 0, tzinfo=UTC), "file"),
    }
    assert stored["ideas.md"].content.startswith("A rain sensor")  # front matter left out
    assert stored["ideas.md"].metadata["title"] == "Ideas"
    assert (stored["log.md"].role, stored["log.md"].session_id) == ("user", "notes:log.md")
    assert import_export(memory, "notes", notes, user_id="ana").added == 0


def test_notes_by_paragraph_follow_dated_headings_and_keep_repeated_paragraphs(
    memory, notes
) -> None:
    report = import_export(memory, "notes", notes, user_id="ana", split="paragraph")
    assert (report.conversations, report.messages, report.added) == (5, 10, 10)
    log = [e for e in _all(memory) if e.session_id == "notes:log.md"]
    assert [(e.content, e.event_time.day, e.event_time.month) for e in log] == [
        ("# Garden log\n\n## 1 April 2024\n\nSowed Stupice indoors.", 1, 4),
        ("Watered.", 1, 4),
        ("## 20 April 2024\n\nFirst true leaves.", 20, 4),
        ("Watered.", 20, 4),
    ]
    recipe = [e.content for e in _all(memory) if e.metadata["path"] == "recipes/pão de queijo.md"]
    assert recipe[1] == "```\nbake 180 °C\n\n25 min\n```"  # a code fence is never cut
    again = import_export(memory, "notes", notes, user_id="ana", split="paragraph")
    assert (again.added, again.already_present) == (0, 10)


def test_an_edited_note_is_added_as_it_now_reads(memory, notes) -> None:
    import_export(memory, "notes", notes, user_id="ana")
    (notes / "ideas.md").write_text("---\ndate: 2024-02-14\n---\nA rain sensor, solar powered.\n")
    report = import_export(memory, "notes", notes, user_id="ana")
    assert (report.added, report.already_present) == (1, 4)


def test_imports_are_the_same_on_postgresql(postgres_schema_url, embedder) -> None:
    with Memory(url=postgres_schema_url, embedder=embedder) as memory:
        first = import_export(memory, "claude-code", CLAUDE_CODE, user_id="ana")
        again = import_export(memory, "claude-code", CLAUDE_CODE, user_id="ana")
        assert (first.added, again.added, again.already_present) == (6, 0, 6)
        assert {e.metadata["source_id"] for e in _all(memory)} == {
            "u-1",
            "a-1",
            "u-4",
            "a-2",
            "o-1",
            "o-2",
        }


# Malformed and truncated sources: a clear error naming the place, nothing written


def _unchanged_after(memory: Memory, kind: str, path: Path, match: str) -> None:
    before = sorted(e.id for e in _all(memory))
    with pytest.raises(ImportFormatError, match=match):
        import_export(memory, kind, path, user_id="ana")
    assert sorted(e.id for e in _all(memory)) == before


@pytest.fixture
def seeded(memory) -> Memory:
    """A memory holding the Claude.ai fixture, to show a failed import leaves it as is."""
    import_export(memory, "claude", CLAUDE, user_id="ana")
    return memory


def test_a_truncated_chatgpt_export_names_the_line_and_writes_nothing(seeded, tmp_path) -> None:
    cut = tmp_path / "conversations.json"
    cut.write_bytes(CHATGPT.read_bytes()[:50_000])
    _unchanged_after(
        seeded, "chatgpt", cut, r"conversations.json: not valid JSON at line \d+.*trunc"
    )


def test_a_chatgpt_tree_missing_a_node_names_the_conversation(seeded, tmp_path) -> None:
    data = json.loads(CHATGPT.read_text())
    del data[2]["mapping"]["r-browse"]
    broken = tmp_path / "conversations.json"
    broken.write_text(json.dumps(data))
    _unchanged_after(
        seeded,
        "chatgpt",
        broken,
        r"conversation 2 \(6630a1f0-0000-4000-8000-00000000a003, 'Pão de Queijo 🧀'\): "
        r"node r-browse is missing",
    )


def test_a_bad_message_in_the_last_conversation_stops_the_whole_import(seeded, tmp_path) -> None:
    data = json.loads(CHATGPT.read_text())
    data[2]["mapping"]["r-a2"]["message"]["content"]["parts"] = ["bad \ud800 text"]
    broken = tmp_path / "conversations.json"
    broken.write_text(json.dumps(data))  # a lone surrogate: valid JSON, not valid text
    _unchanged_after(seeded, "chatgpt", broken, r"conversation 2 .*message r-a2: content")


def test_a_claude_export_of_the_wrong_shape_names_the_field(seeded, tmp_path) -> None:
    data = json.loads(CLAUDE.read_text())
    data[1]["chat_messages"] = {"not": "a list"}
    broken = tmp_path / "conversations.json"
    broken.write_text(json.dumps(data))
    _unchanged_after(
        seeded, "claude", broken, r"conversation 1 .*'chat_messages' should be list, not dict"
    )
    _unchanged_after(seeded, "claude", CHATGPT, r"conversation 0: 'uuid' should be str")


def test_a_transcript_cut_mid_line_names_the_file_and_line(seeded, tmp_path) -> None:
    cut = tmp_path / "session.jsonl"
    cut.write_text(SESSION.read_text()[:-40])
    _unchanged_after(seeded, "claude-code", cut, r"session.jsonl: line 11 is not JSON.*cut off")


def test_a_note_that_is_not_text_names_the_file(seeded, notes) -> None:
    (notes / "scan.md").write_bytes(b"\xff\xfe\x00binary")
    _unchanged_after(seeded, "notes", notes, r"scan.md is not UTF-8 text")


def test_unknown_kinds_and_missing_paths_are_refused(memory, tmp_path) -> None:
    with pytest.raises(InvalidInputError, match="choose one of chatgpt, claude"):
        import_export(memory, "myspace", CHATGPT)
    with pytest.raises(InvalidInputError, match="does not exist"):
        import_export(memory, "chatgpt", tmp_path / "nowhere.json")
    with pytest.raises(InvalidInputError, match="split applies to notes only"):
        import_export(memory, "chatgpt", CHATGPT, split="paragraph")


# The command line: `import --from` and the Claude Code hook


def _cli(db: Path, *args: str, input: str | None = None):
    from click.testing import CliRunner

    from anamnesis.cli import main

    return CliRunner().invoke(main, ["--path", str(db), "--embedder", "edge", *args], input=input)


def test_import_from_dry_run_reports_and_writes_nothing(tmp_path) -> None:
    db = tmp_path / "m.db"
    dry = _cli(
        db, "import", str(CLAUDE), "--from", "claude", "--user", "ana", "--dry-run", "--json"
    )
    assert dry.exit_code == 0, dry.output
    report = json.loads(dry.stdout)
    assert (report["dry_run"], report["added"], report["skipped"]["attachment"]) == (True, 6, 2)
    assert "would add 6 episodes in 2 conversations" in dry.stderr
    assert "skipped 2 attachment" in dry.stderr
    listed = _cli(db, "list", "--user", "ana", "--json")
    assert json.loads(listed.stdout) == []
    done = _cli(db, "import", str(CLAUDE), "--from", "claude", "--user", "ana")
    assert "added 6 episodes" in done.stderr
    again = _cli(db, "import", str(CLAUDE), "--from", "claude", "--user", "ana")
    assert "added 0 episodes in 0 conversations, 6 already present" in again.stderr


def test_import_from_names_a_bad_file_and_exits_2(tmp_path) -> None:
    cut = tmp_path / "session.jsonl"
    cut.write_text(SESSION.read_text()[:-40])
    result = _cli(tmp_path / "m.db", "import", str(cut), "--from", "claude-code")
    assert result.exit_code == 2
    assert "ImportFormatError" in result.stderr and "line 11" in result.stderr


def test_import_options_of_history_need_from_and_a_folder_needs_it_too(tmp_path) -> None:
    db = tmp_path / "m.db"
    assert _cli(db, "import", str(CHATGPT), "--dry-run").exit_code == 2
    folder = _cli(db, "import", str(FIXTURES / "notes"))
    assert folder.exit_code == 2 and "give a file, or --from" in folder.stderr
    session = _cli(db, "import", str(CHATGPT), "--from", "chatgpt", "--session", "s")
    assert session.exit_code == 2


def test_the_claude_code_hook_imports_the_finished_session(tmp_path) -> None:
    db = tmp_path / "m.db"
    event = {
        "session_id": "5e55a0de-0000-4000-8000-00000000cc01",
        "transcript_path": str(SESSION),
        "cwd": "/home/ana/src/garden",
        "hook_event_name": "SessionEnd",
        "reason": "exit",
    }
    first = _cli(db, "hook", "claude-code", "--user", "ana", input=json.dumps(event))
    assert first.exit_code == 0, first.output
    assert "added 4 episodes in 1 conversations" in first.stderr
    second = _cli(db, "hook", "claude-code", "--user", "ana", input=json.dumps(event))
    assert "added 0 episodes" in second.stderr
    with Memory(path=db, embedder="edge", create=False) as memory:
        hits = memory.search("watering when it rained", user_id="ana", limit=1)
    assert hits[0].episode.metadata["source_id"] == "u-4"


def test_the_hook_refuses_input_that_is_not_a_hook_event(tmp_path) -> None:
    db = tmp_path / "m.db"
    assert _cli(db, "hook", "claude-code", input="not json").exit_code == 2
    missing = _cli(db, "hook", "claude-code", input='{"session_id": "x"}')
    assert missing.exit_code == 2 and "transcript_path" in missing.stderr
    gone = _cli(db, "hook", "claude-code", input='{"transcript_path": "/nowhere.jsonl"}')
    assert gone.exit_code == 2 and "does not exist" in gone.stderr
