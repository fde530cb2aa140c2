"""What every importer shares: the parsed form of an export, the plan of what is new,
and the write.

An importer reads its whole file into ``Parsed`` (conversations of turns, and the
count of what it skipped, by reason) before anything is written, so a malformed or
truncated file fails with ``ImportFormatError`` naming the place and the memory is
unchanged. ``import_parsed`` then keeps the turns the memory does not hold yet
(a stored episode of the same session with the same source id and content hash
answers for one turn) and writes them through
``Memory.add_many``, whole conversations per transaction.
"""

from __future__ import annotations

import json
import zipfile
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import ExitStack
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from ..errors import ImportFormatError, InvalidInputError
from ..ingest.normalise import MAX_CONTENT_CHARS, content_hash, parse_time, to_message
from ..memory import Memory
from ..portable import BULK_IMPORT_MAX_EXISTING_RATIO, BULK_IMPORT_MIN_EPISODES

#: Episodes written per transaction, at least (whole conversations are never split
#: across two, so an interruption leaves complete conversations and a re-run finishes).
WRITE_BATCH = 512
#: Episodes read per ``get_all`` page when looking for what a session already holds.
PAGE = 1000

#: Called with (stage, done, total): stage is "checking" or "writing".
ImportProgress = Callable[[str, int, int], None]


@dataclass(slots=True)
class Turn:
    """One message of a conversation, as it will be stored."""

    content: str
    role: str
    speaker: str | None
    event_time: datetime | None
    #: The message's id in the source (a node, message or line id; a note's path).
    source_id: str
    #: Where it came from, for error messages ("file: conversation 3 (id): message id").
    place: str
    metadata: dict[str, Any] = field(default_factory=dict)


@dataclass(slots=True)
class Conversation:
    """One conversation (or note) of the source: one session in the memory."""

    session_id: str
    title: str | None
    turns: list[Turn] = field(default_factory=list)


@dataclass(slots=True)
class Parsed:
    """A whole source file, read and checked, not yet written."""

    source: str
    conversations: list[Conversation] = field(default_factory=list)
    #: What was not imported, by reason ("tool call", "attachment", "system", ...).
    skipped: Counter[str] = field(default_factory=Counter)

    def skip(self, reason: str, count: int = 1) -> None:
        """Count ``count`` things not imported for ``reason`` (none: no entry)."""
        if count > 0:
            self.skipped[reason] += count


@dataclass(frozen=True, slots=True)
class ImportReport:
    """What an import read, added (or, with ``dry_run``, would add) and skipped."""

    kind: str
    path: str
    dry_run: bool
    #: Conversations (sessions) in the source, and those with something new.
    conversations: int
    new_conversations: int
    #: Turns read from the source (a message longer than one episode counts its parts).
    messages: int
    #: Episodes written, or that would be written with ``dry_run``.
    added: int
    #: Turns the memory already held (same source id and content hash).
    already_present: int
    #: Messages and parts not imported, by reason.
    skipped: dict[str, int]

    def to_dict(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "path": self.path,
            "dry_run": self.dry_run,
            "conversations": self.conversations,
            "new_conversations": self.new_conversations,
            "messages": self.messages,
            "added": self.added,
            "already_present": self.already_present,
            "skipped": dict(self.skipped),
        }

    def summary(self) -> str:
        """One line for a person: what was (or would be) added, and what was skipped."""
        verb = "would add" if self.dry_run else "added"
        line = (
            f"{self.kind}: {self.messages} messages in {self.conversations} conversations; "
            f"{verb} {self.added} episodes in {self.new_conversations} conversations, "
            f"{self.already_present} already present"
        )
        if self.skipped:
            parts = ", ".join(f"{n} {reason}" for reason, n in sorted(self.skipped.items()))
            line += f"; skipped {parts}"
        return line


# Reading


def read_json(path: Path, member: str) -> Any:
    """The JSON value of ``path``: a file, a folder holding ``member``, or a zip (the
    export as downloaded) holding it. Bad JSON names the line and column."""
    if path.is_dir():
        path = path / member
        if not path.is_file():
            raise ImportFormatError(f"{path.parent} holds no {member}: point at the export")
    if zipfile.is_zipfile(path):
        with zipfile.ZipFile(path) as archive:
            names = [n for n in archive.namelist() if n.rsplit("/", 1)[-1] == member]
            if not names:
                raise ImportFormatError(f"{path} holds no {member}: is it the right export?")
            try:
                raw = archive.read(names[0])
            except (zipfile.BadZipFile, OSError) as exc:
                raise ImportFormatError(f"{path}: {names[0]} cannot be read: {exc}") from exc
            where = f"{path}!{names[0]}"
    else:
        raw = path.read_bytes()
        where = str(path)
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise ImportFormatError(f"{where} is not UTF-8 text: {exc}") from exc
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        # An unterminated string runs to the end of the text: both mean it stops early.
        ends_early = exc.pos >= len(text.rstrip()) or exc.msg.startswith("Unterminated string")
        hint = " (the file ends early: truncated?)" if ends_early else ""
        raise ImportFormatError(
            f"{where}: not valid JSON at line {exc.lineno}, column {exc.colno}: {exc.msg}{hint}; "
            "re-download the export"
        ) from exc


def expect(value: Any, kind: type | tuple[type, ...], place: str, what: str) -> Any:
    """``value`` if it is of ``kind``, else ImportFormatError naming the place."""
    if not isinstance(value, kind):
        names = kind.__name__ if isinstance(kind, type) else " or ".join(k.__name__ for k in kind)
        shown = "null" if value is None else type(value).__name__
        raise ImportFormatError(f"{place}: {what} should be {names}, not {shown}")
    return value


def conversations_json(
    path: Path, id_keys: tuple[str, ...], id_what: str, title_key: str
) -> Iterator[tuple[dict[str, Any], str, str | None, str]]:
    """Each conversation of an export's ``conversations.json`` (a list of objects):
    the object, its id (the first of ``id_keys`` set), its title and its place."""
    data = read_json(path, "conversations.json")
    expect(data, list, str(path), "conversations.json")
    for index, item in enumerate(data):
        place = f"{path}: conversation {index}"
        expect(item, dict, place, "a conversation")
        found = None
        for key in id_keys:
            found = item.get(key)
            if found:
                break
        conversation_id: str = expect(found, str, place, id_what)
        title = item.get(title_key) if isinstance(item.get(title_key), str) else None
        place = f"{path}: conversation {index} ({conversation_id}, {title!r})"
        yield item, conversation_id, title, place


def text_blocks(blocks: list[Any], place: str, parsed: Parsed, skipped: dict[str, str]) -> str:
    """The text of a message's content blocks (Anthropic's form), joined; any other
    block is counted in ``parsed`` under its reason in ``skipped`` (or its type)."""
    texts = []
    for block in blocks:
        expect(block, dict, place, "a content block")
        kind = block.get("type")
        if kind == "text":
            texts.append(expect(block.get("text"), str, place, "a text block's 'text'"))
        elif kind in skipped:
            parsed.skip(skipped[kind])
        else:
            parsed.skip(f"block {kind}")
    return "\n\n".join(t for t in texts if t.strip())


def source_time(value: Any, place: str, what: str = "timestamp") -> datetime | None:
    """A source timestamp (epoch seconds or ISO-8601) as UTC, None when absent."""
    if value is None or value == "":
        return None
    try:
        return parse_time(value, what)
    except InvalidInputError as exc:
        raise ImportFormatError(f"{place}: {exc}") from exc


def split_long(text: str, limit: int = MAX_CONTENT_CHARS) -> list[str]:
    """``text`` in parts of at most ``limit`` characters, cut at a paragraph, else a
    line, else a space, else anywhere: an episode has a length limit, a message not."""
    parts = []
    while len(text) > limit:
        window = text[:limit]
        for separator in ("\n\n", "\n", " "):
            cut = window.rfind(separator)
            if cut > limit // 2:
                break
        else:
            cut = limit
        parts.append(text[:cut])
        text = text[cut:].lstrip("\n")
    parts.append(text)
    return [p for p in parts if p.strip()]


def turns_of(
    text: str,
    *,
    role: str,
    speaker: str | None,
    event_time: datetime | None,
    source_id: str,
    place: str,
    metadata: dict[str, Any],
) -> list[Turn]:
    """The turn(s) of one message: one, or several parts of a very long one (each
    part's metadata says ``part`` and ``parts``)."""
    parts = split_long(text)
    if len(parts) == 1:
        return [Turn(parts[0], role, speaker, event_time, source_id, place, metadata)]
    return [
        Turn(
            part,
            role,
            speaker,
            event_time,
            source_id,
            f"{place} (part {i})",
            {**metadata, "part": i, "parts": len(parts)},
        )
        for i, part in enumerate(parts, start=1)
    ]


# Planning and writing


def _message(turn: Turn, session_id: str, source: str) -> dict[str, Any]:
    return {
        "content": turn.content,
        "role": turn.role,
        "speaker": turn.speaker,
        "event_time": turn.event_time,
        "session_id": session_id,
        "metadata": {"source": source, "source_id": turn.source_id, **turn.metadata},
    }


def _stored_keys(
    memory: Memory, session_id: str, user_id: str | None, agent_id: str | None
) -> Counter[tuple[str, str]]:
    """(source id, content hash) of the episodes a session already holds, with how
    many times each (a note may hold the same paragraph twice)."""
    keys: Counter[tuple[str, str]] = Counter()
    offset: int | None = 0
    while offset is not None:
        page = memory.get_all(
            user_id=user_id, agent_id=agent_id, session_id=session_id, limit=PAGE, offset=offset
        )
        for episode in page.items:
            source_id = episode.metadata.get("source_id")
            if isinstance(source_id, str):
                keys[(source_id, episode.content_hash)] += 1
        offset = page.next_offset
    return keys


def _large(memory: Memory, to_add: int) -> bool:
    """Whether an import is large for the store, as ``import_jsonl`` decides: then it
    runs in the store's bulk mode, which refreshes the planner's statistics at the end
    (without them, looking up a session's episodes walks the user's whole history)."""
    if to_add < BULK_IMPORT_MIN_EPISODES:
        return False
    existing = int(memory.stats()["episodes"])
    return existing <= BULK_IMPORT_MAX_EXISTING_RATIO * to_add


def _batches(planned: list[list[dict[str, Any]]]) -> Iterator[list[dict[str, Any]]]:
    """Whole conversations grouped until a group holds ``WRITE_BATCH`` messages."""
    batch: list[dict[str, Any]] = []
    for messages in planned:
        batch.extend(messages)
        if len(batch) >= WRITE_BATCH:
            yield batch
            batch = []
    if batch:
        yield batch


def import_parsed(
    memory: Memory,
    parsed: Parsed,
    *,
    kind: str,
    path: Path,
    user_id: str | None = None,
    agent_id: str | None = None,
    dry_run: bool = False,
    progress: ImportProgress | None = None,
) -> ImportReport:
    """Write what ``parsed`` holds that the memory does not (nothing with ``dry_run``).

    Every message is checked as ``add_many`` would check it before the first write, so
    a bad one fails with its place and nothing written.
    """
    planned: list[list[dict[str, Any]]] = []
    messages = present = 0
    total = len(parsed.conversations)
    for done, conversation in enumerate(parsed.conversations, start=1):
        known = _stored_keys(memory, conversation.session_id, user_id, agent_id)
        new = []
        for turn in conversation.turns:
            messages += 1
            message = _message(turn, conversation.session_id, parsed.source)
            try:
                to_message(message, {})
            except InvalidInputError as exc:
                raise ImportFormatError(f"{turn.place}: {exc}") from exc
            key = (turn.source_id, content_hash(turn.content, turn.speaker))
            if known[key] > 0:  # each stored episode answers for one turn
                known[key] -= 1
                present += 1
                continue
            new.append(message)
        if new:
            planned.append(new)
        if progress is not None:
            progress("checking", done, total)
    to_add = sum(len(p) for p in planned)
    if not dry_run:
        with ExitStack() as stack:
            if _large(memory, to_add):
                stack.enter_context(memory.store.bulk_load())
            written = 0
            for batch in _batches(planned):
                memory.add_many(batch, user_id=user_id, agent_id=agent_id, atomic=True)
                written += len(batch)
                if progress is not None:
                    progress("writing", written, to_add)
    return ImportReport(
        kind=kind,
        path=str(path),
        dry_run=dry_run,
        conversations=total,
        new_conversations=len(planned),
        messages=messages,
        added=to_add,
        already_present=present,
        skipped=dict(parsed.skipped),
    )
