"""Claude Code's session transcripts: ``~/.claude/projects/<project>/<session>.jsonl``.

One JSON record a line: ``user`` and ``assistant`` records carry an API ``message``
(content as a string or a list of blocks), with ``uuid``, ``sessionId``,
``timestamp``, ``cwd`` and ``gitBranch``; ``summary`` records title the session;
other record types (``system``, file snapshots, ...) are not messages. PATH is one
transcript, or a folder whose ``*.jsonl`` files are read (a project, or all of
``~/.claude/projects``). Records are kept in file order.

Kept: the text the user typed and the text of the assistant's answers. Skipped and
counted: tool calls and their results, thinking, images, slash commands and their
output, meta and system records, compaction summaries, sub-agent (sidechain) turns.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from ..errors import ImportFormatError
from .core import Conversation, Parsed, expect, source_time, text_blocks, turns_of

SOURCE = "claude-code"
ASSISTANT = "Claude"
SKIPPED_BLOCKS = {
    "tool_use": "tool call",
    "tool_result": "tool output",
    "thinking": "reasoning",
    "redacted_thinking": "reasoning",
    "image": "attachment",
    "document": "attachment",
}
#: Text Claude Code writes as the user's turn for slash commands and their output.
COMMAND_MARKERS = ("<command-name>", "<command-message>", "<local-command-stdout>")


def read(path: Path, *, speaker: str | None = None) -> Parsed:
    """Every session in ``path`` (a transcript, or a folder of them, searched
    recursively); ``speaker`` names the user's turns."""
    files = sorted(path.rglob("*.jsonl")) if path.is_dir() else [path]
    parsed = Parsed(SOURCE)
    for file in files:
        parsed.conversations.extend(_sessions(file, speaker, parsed))
    return parsed


def _records(file: Path) -> list[tuple[int, dict[str, Any]]]:
    try:
        text = file.read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        raise ImportFormatError(f"{file} is not UTF-8 text: {exc}") from exc
    records = []
    lines = text.splitlines()
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except json.JSONDecodeError as exc:
            last = number == len(lines) and not text.endswith("\n")
            hint = " (the last line is cut off: truncated?)" if last else ""
            raise ImportFormatError(f"{file}: line {number} is not JSON: {exc.msg}{hint}") from exc
        records.append((number, expect(record, dict, f"{file}: line {number}", "a record")))
    return records


def _sessions(file: Path, speaker: str | None, parsed: Parsed) -> list[Conversation]:
    """The sessions of one transcript (one, unless the file was resumed into another)."""
    sessions: dict[str, Conversation] = {}
    titles: list[str] = []
    for number, record in _records(file):
        place = f"{file}: line {number}"
        kind = record.get("type")
        if kind == "summary":
            if isinstance(record.get("summary"), str):
                titles.append(record["summary"])
            continue
        if kind not in ("user", "assistant"):
            parsed.skip("system" if kind == "system" else f"record {kind}")
            continue
        reason = _skip_reason(record)
        if reason is not None:
            parsed.skip(reason)
            continue
        message = expect(record.get("message"), dict, place, "'message'")
        counted = parsed.skipped.total()
        text = _text(message.get("content"), place, parsed)
        if kind == "user" and text.lstrip().startswith(COMMAND_MARKERS):
            parsed.skip("command")
            continue
        if not text.strip():
            if parsed.skipped.total() == counted:  # not tool calls only: counted then
                parsed.skip("empty")
            continue
        session = record.get("sessionId") or file.stem
        expect(session, str, place, "'sessionId'")
        if session not in sessions:
            sessions[session] = Conversation(f"{SOURCE}:{session}", None)
        metadata: dict[str, Any] = {"session": session}
        for key, name in (("cwd", "cwd"), ("gitBranch", "git_branch")):
            if isinstance(record.get(key), str) and record[key]:
                metadata[name] = record[key]
        if kind == "assistant" and isinstance(message.get("model"), str):
            metadata["model"] = message["model"]
        role = "assistant" if kind == "assistant" else "user"
        sessions[session].turns.extend(
            turns_of(
                text,
                role=role,
                speaker=ASSISTANT if role == "assistant" else speaker,
                event_time=source_time(record.get("timestamp"), place),
                source_id=expect(record.get("uuid"), str, place, "'uuid'"),
                place=place,
                metadata=metadata,
            )
        )
    for conversation in sessions.values():
        conversation.title = titles[-1] if titles else None
        for turn in conversation.turns:
            if conversation.title:
                turn.metadata["title"] = conversation.title
    return list(sessions.values())


def _skip_reason(record: dict[str, Any]) -> str | None:
    if record.get("isSidechain"):
        return "sidechain"
    if record.get("isCompactSummary"):
        return "compaction summary"
    if record.get("isMeta") or record.get("isApiErrorMessage"):
        return "system"
    return None


def _text(content: Any, place: str, parsed: Parsed) -> str:
    if isinstance(content, str):
        return content
    expect(content, list, place, "'message.content'")
    return text_blocks(content, place, parsed, SKIPPED_BLOCKS)
