"""ChatGPT's data export: ``conversations.json`` (inside the export zip).

Each conversation is a tree of message nodes (``mapping``: node id -> ``{message,
parent, children}``): editing a message or regenerating an answer starts a sibling
branch. The branch kept is the one that ends at ``current_node``, read from the leaf
back to the root: it is the conversation as the user last saw it, and the one the
later turns build on; the other branches are drafts the user replaced, and their
messages are counted under "other branches". Without ``current_node`` (old exports)
the branch of the most recent leaf is kept.

Kept: the user's and the assistant's text to everyone (``recipient`` "all"). Skipped
and counted: system and hidden context messages, tool calls (a message to a tool) and
tool output, reasoning, attachments and images (the text beside them is kept), and
empty messages.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ..errors import ImportFormatError
from .core import Conversation, Parsed, conversations_json, expect, source_time, turns_of

SOURCE = "chatgpt"
ASSISTANT = "ChatGPT"

#: Content types that carry text between the user and the assistant.
TEXT_TYPES = {"text", "multimodal_text"}
#: Content types skipped, and the reason counted for each.
SKIPPED_TYPES = {
    "code": "tool call",
    "execution_output": "tool output",
    "tether_browsing_display": "tool output",
    "tether_quote": "tool output",
    "system_error": "tool output",
    "computer_output": "tool output",
    "user_editable_context": "system",
    "model_editable_context": "system",
    "thoughts": "reasoning",
    "reasoning_recap": "reasoning",
}


def read(path: Path, *, speaker: str | None = None) -> Parsed:
    """Every conversation of a ChatGPT export (a zip, its folder or its
    ``conversations.json``); ``speaker`` names the user's turns."""
    parsed = Parsed(SOURCE)
    conversations = conversations_json(path, ("conversation_id", "id"), "its id", "title")
    for item, conversation_id, title, place in conversations:
        parsed.conversations.append(_conversation(item, conversation_id, title, place, parsed))
        if speaker is not None:
            for turn in parsed.conversations[-1].turns:
                if turn.role == "user":
                    turn.speaker = speaker
    return parsed


def _branch(mapping: dict[str, Any], leaf: str, place: str) -> list[str]:
    """The node ids from the root to ``leaf``."""
    chain: list[str] = []
    seen: set[str] = set()
    node_id: str | None = leaf
    while node_id is not None:
        if node_id in seen:
            raise ImportFormatError(f"{place}: the message tree has a cycle at node {node_id}")
        node = mapping.get(node_id)
        if node is None:
            raise ImportFormatError(
                f"{place}: node {node_id} is missing from 'mapping' (truncated export?)"
            )
        expect(node, dict, f"{place}: node {node_id}", "a node")
        seen.add(node_id)
        chain.append(node_id)
        parent = node.get("parent")
        node_id = expect(parent, (str, type(None)), f"{place}: node {node_id}", "'parent'")
    return chain[::-1]


def _latest_leaf(mapping: dict[str, Any]) -> str:
    leaves = [
        k for k, node in mapping.items() if isinstance(node, dict) and not node.get("children")
    ]

    def created(node_id: str) -> float:
        message = mapping[node_id].get("message") or {}
        return float(message.get("create_time") or 0)

    return max(leaves, key=created)


def _conversation(
    item: dict[str, Any], conversation_id: str, title: str | None, place: str, parsed: Parsed
) -> Conversation:
    mapping = expect(item.get("mapping"), dict, place, "'mapping'")
    conversation = Conversation(f"{SOURCE}:{conversation_id}", title)
    if not mapping:
        return conversation
    leaf = item.get("current_node") or _latest_leaf(mapping)
    expect(leaf, str, place, "'current_node'")
    branch = _branch(mapping, leaf, place)
    on_branch = set(branch)
    off_branch = [
        node_id
        for node_id, node in mapping.items()
        if node_id not in on_branch and isinstance(node, dict) and node.get("message")
    ]
    parsed.skip("other branches", len(off_branch))
    last_time = source_time(item.get("create_time"), place, "create_time")
    for node_id in branch:
        message = mapping[node_id].get("message")
        if message is None:
            continue  # the root: a node without a message
        where = f"{place}: message {node_id}"
        expect(message, dict, where, "'message'")
        last_time = source_time(message.get("create_time"), where, "create_time") or last_time
        text, reason, attachments = _text(message, where, parsed)
        if reason is not None:
            parsed.skip(reason)
            continue
        role = message["author"]["role"]
        metadata: dict[str, Any] = {"conversation_id": conversation_id}
        if title:
            metadata["title"] = title
        model = (message.get("metadata") or {}).get("model_slug")
        if role == "assistant" and isinstance(model, str):
            metadata["model"] = model
        if attachments:
            metadata["attachments"] = attachments
        conversation.turns.extend(
            turns_of(
                text,
                role=role,
                speaker=ASSISTANT if role == "assistant" else None,
                event_time=last_time,
                source_id=str(message.get("id") or node_id),
                place=where,
                metadata=metadata,
            )
        )
    return conversation


def _text(message: dict[str, Any], where: str, parsed: Parsed) -> tuple[str, str | None, list[str]]:
    """(text, the reason it is skipped or None, the names of its attachments)."""
    author = expect(message.get("author"), dict, where, "'author'")
    role = author.get("role")
    content = expect(message.get("content"), dict, where, "'content'")
    content_type = content.get("content_type")
    meta = message.get("metadata") or {}
    expect(meta, dict, where, "'metadata'")
    attachments = [
        str(a.get("name") or a.get("id") or "attachment")
        for a in meta.get("attachments") or []
        if isinstance(a, dict)
    ]
    pointers = sum(
        1 for part in content.get("parts") or [] if isinstance(part, dict)
    )  # images and files inline; the same uploads are usually listed in attachments too
    parsed.skip("attachment", max(len(attachments), pointers))
    if role == "system" or meta.get("is_visually_hidden_from_conversation"):
        return "", "system", attachments
    if role == "tool":
        return "", "tool output", attachments
    if role not in ("user", "assistant"):
        return "", f"author {role}", attachments
    if content_type in SKIPPED_TYPES:
        return "", SKIPPED_TYPES[content_type], attachments
    if content_type not in TEXT_TYPES:
        return "", f"content type {content_type}", attachments
    if message.get("recipient", "all") != "all":
        return "", "tool call", attachments
    parts = expect(content.get("parts"), list, where, "'content.parts'")
    text = "\n".join(part for part in parts if isinstance(part, str) and part.strip())
    if not text.strip():
        return "", "empty", attachments
    return text, None, attachments
