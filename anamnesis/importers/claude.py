"""Claude.ai's data export: ``conversations.json`` (inside the export zip).

Each conversation has ``chat_messages`` in order, each with a ``sender`` ("human" or
"assistant"), its text (``content`` blocks, or ``text`` in older exports), and
``attachments`` and ``files``. When the messages carry ``parent_message_uuid`` and an
edit or a retry made a branch, the branch kept is the one ending at the last message
of the list (the latest written: the conversation as the user left it); the others
are counted under "other branches".

Kept: text blocks. Skipped and counted: tool use and tool results, thinking,
attachments and files (their names go in the turn's metadata), empty messages, and
block types this reader does not know (counted by type).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ..errors import ImportFormatError
from .core import (
    Conversation,
    Parsed,
    conversations_json,
    expect,
    source_time,
    text_blocks,
    turns_of,
)

SOURCE = "claude"
ASSISTANT = "Claude"
#: The parent id of a conversation's first message.
ROOT = "00000000-0000-4000-8000-000000000000"
ROLES = {"human": "user", "assistant": "assistant"}
SKIPPED_BLOCKS = {
    "tool_use": "tool call",
    "tool_result": "tool output",
    "thinking": "reasoning",
    "redacted_thinking": "reasoning",
}


def read(path: Path, *, speaker: str | None = None) -> Parsed:
    """Every conversation of a Claude.ai export (a zip, its folder or its
    ``conversations.json``); ``speaker`` names the user's turns."""
    parsed = Parsed(SOURCE)
    conversations = conversations_json(path, ("uuid",), "'uuid'", "name")
    for item, conversation_id, title, place in conversations:
        messages = expect(item.get("chat_messages"), list, place, "'chat_messages'")
        conversation = Conversation(f"{SOURCE}:{conversation_id}", title or None)
        last_time = source_time(item.get("created_at"), place, "created_at")
        for message in _branch(messages, place, parsed):
            where = f"{place}: message {message.get('uuid')}"
            last_time = source_time(message.get("created_at"), where, "created_at") or last_time
            sender = message.get("sender")
            if sender not in ROLES:
                parsed.skip(f"sender {sender}")
                continue
            attachments = _attachments(message, where)
            parsed.skip("attachment", len(attachments))
            text = _text(message, where, parsed)
            if not text.strip():
                parsed.skip("empty")
                continue
            metadata: dict[str, Any] = {"conversation_id": conversation_id}
            if title:
                metadata["title"] = title
            if attachments:
                metadata["attachments"] = attachments
            role = ROLES[sender]
            conversation.turns.extend(
                turns_of(
                    text,
                    role=role,
                    speaker=ASSISTANT if role == "assistant" else speaker,
                    event_time=last_time,
                    source_id=expect(message.get("uuid"), str, where, "'uuid'"),
                    place=where,
                    metadata=metadata,
                )
            )
        parsed.conversations.append(conversation)
    return parsed


def _branch(messages: list[Any], place: str, parsed: Parsed) -> list[dict[str, Any]]:
    """The messages of the branch ending at the last one, in order."""
    for i, message in enumerate(messages):
        expect(message, dict, f"{place}: message {i}", "a message")
    if not messages or not all("parent_message_uuid" in m for m in messages):
        return messages
    by_id = {m.get("uuid"): m for m in messages}
    chain = []
    seen: set[str] = set()
    current: Any = messages[-1]
    while current is not None:
        uuid = current.get("uuid")
        if uuid in seen:
            raise ImportFormatError(f"{place}: the messages' parents form a cycle at {uuid}")
        seen.add(uuid)
        chain.append(current)
        parent = current.get("parent_message_uuid")
        if parent in (None, ROOT):
            break
        current = by_id.get(parent)
        if current is None:
            raise ImportFormatError(
                f"{place}: message {uuid} names parent {parent}, which is not in the "
                "conversation (truncated export?)"
            )
    parsed.skip("other branches", len(messages) - len(chain))
    return chain[::-1]


def _attachments(message: dict[str, Any], where: str) -> list[str]:
    names = []
    for key in ("attachments", "files", "files_v2"):
        items = expect(message.get(key) or [], list, where, f"'{key}'")
        names += [str(a.get("file_name") or "file") for a in items if isinstance(a, dict)]
    if message.get("files_v2") and message.get("files"):
        names = names[: len(names) - len(message["files_v2"])]  # the same files, listed twice
    return names


def _text(message: dict[str, Any], where: str, parsed: Parsed) -> str:
    blocks = message.get("content")
    if not blocks:
        return str(expect(message.get("text") or "", str, where, "'text'"))
    expect(blocks, list, where, "'content'")
    return text_blocks(blocks, where, parsed, SKIPPED_BLOCKS)
