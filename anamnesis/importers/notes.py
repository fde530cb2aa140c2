"""A folder of Markdown or plain-text notes (``.md``, ``.markdown``, ``.txt``).

Each note is one session holding one episode (``split="note"``) or one per paragraph
(``split="paragraph"``: blocks between blank lines; a heading stays with the paragraph
below it; a fenced code block is never cut). A note is dated by its own text when it
can be: a ``date:`` (or ``created:``) line in its front matter, else a full date
(day, month and year) in its file name or first line, else the file's modification
time. In paragraph mode a heading holding a full date ("## 8 May 2024") dates the
paragraphs under it, as in a journal. Each episode's metadata says which
(``dated``: "text" or "file").

A note's source id is its path within the folder, so re-importing adds only the
notes, or paragraphs, whose text is new; an edited note is added again as it now
reads (its earlier text stays until deleted). Hidden files and folders (``.git``,
``.obsidian``) are not read; other files are counted as skipped.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal

from ..errors import ImportFormatError, InvalidInputError
from ..ingest.normalise import MAX_ID_CHARS
from ..ingest.timeparse import resolve
from .core import Conversation, Parsed, source_time, turns_of

SOURCE = "notes"
SUFFIXES = {".md", ".markdown", ".txt"}
Split = Literal["note", "paragraph"]
#: A line this short holding a full date is a heading ("3 March 2024", "Mon, 8 May 2023").
MAX_DATE_LINE = 40
_YEAR = re.compile(r"\d{4}")
_HEADING = re.compile(r"^\s{0,3}#{1,6}\s+(.*)$")


@dataclass(slots=True)
class _Block:
    text: str
    event_time: datetime
    dated: str


def read(path: Path, *, speaker: str | None = None, split: Split = "note") -> Parsed:
    """The notes in ``path`` (a folder, read recursively, or one file)."""
    if split not in ("note", "paragraph"):
        raise InvalidInputError(f"split must be 'note' or 'paragraph', not {split!r}")
    parsed = Parsed(SOURCE)
    if path.is_dir():
        root = path
        files = []
        for file in sorted(path.rglob("*")):
            relative = file.relative_to(path)
            if any(part.startswith(".") for part in relative.parts) or not file.is_file():
                continue
            if file.suffix.lower() in SUFFIXES:
                files.append(file)
            else:
                parsed.skip("not a note")
    else:
        root, files = path.parent, [path]
    for file in files:
        note = _note(file, root, speaker, split)
        if note.turns:
            parsed.conversations.append(note)
        else:
            parsed.skip("empty")
    return parsed


def _note(file: Path, root: Path, speaker: str | None, split: Split) -> Conversation:
    relative = file.relative_to(root).as_posix()
    try:
        text = file.read_text(encoding="utf-8-sig")
    except UnicodeDecodeError as exc:
        raise ImportFormatError(
            f"{file} is not UTF-8 text ({exc}); convert it (iconv -t utf-8) or move it out"
        ) from exc
    front, body = _front_matter(text)
    modified = datetime.fromtimestamp(file.stat().st_mtime, tz=UTC)
    first_line = next((line for line in body.splitlines() if line.strip()), "")
    when, dated = modified, "file"
    own = next(
        (
            source_time(front[key], f"{file}: front matter", key)
            for key in ("date", "created")
            if front.get(key)
        ),
        None,
    )
    own = own or _full_date(file.stem, modified) or _full_date(first_line, modified)
    when, dated = (own, "text") if own is not None else (modified, "file")
    heading = _HEADING.match(first_line)
    title = front.get("title") or (heading.group(1).strip() if heading else file.stem)
    session = f"{SOURCE}:{relative}"
    if len(session) > MAX_ID_CHARS:  # a deep path: its hash keeps the id short and stable
        session = f"{SOURCE}:{hashlib.sha256(relative.encode()).hexdigest()}"
    note = Conversation(session, title)
    if split == "note":
        blocks = [_Block(body.strip(), when, dated)] if body.strip() else []
    else:
        blocks = _paragraphs(body, when, dated)
    for index, block in enumerate(blocks):
        metadata: dict[str, Any] = {"path": relative, "title": title, "dated": block.dated}
        if split == "paragraph":
            metadata["paragraph"] = index
        note.turns.extend(
            turns_of(
                block.text,
                role="user",
                speaker=speaker,
                event_time=block.event_time,
                source_id=relative,
                place=f"{file}" + (f": paragraph {index}" if split == "paragraph" else ""),
                metadata=metadata,
            )
        )
    return note


def _front_matter(text: str) -> tuple[dict[str, str], str]:
    """The ``key: value`` lines of a leading ``---`` block, and the text after it."""
    lines = text.splitlines()
    if not lines or lines[0].strip() != "---":
        return {}, text
    for end in range(1, len(lines)):
        if lines[end].strip() in ("---", "..."):
            fields = {}
            for line in lines[1:end]:
                key, colon, value = line.partition(":")
                if colon and key.strip() and not key.startswith((" ", "\t", "-")):
                    fields[key.strip().lower()] = value.strip().strip("'\"")
            return fields, "\n".join(lines[end + 1 :])
    return {}, text  # no closing line: not front matter


def _full_date(text: str, said: datetime) -> datetime | None:
    """The first date in ``text`` with day, month and year, at the start of that day."""
    for mention in resolve(text, said):
        if mention.granularity == "day" and _YEAR.search(mention.expression):
            return mention.start
    return None


def _title(line: str, when: datetime) -> str | None:
    """The text of a heading, or of a line that is only a date ("3 March 2024");
    None for any other line."""
    heading = _HEADING.match(line)
    if heading:
        return heading.group(1)
    if len(line) <= MAX_DATE_LINE and _full_date(line, when) is not None:
        return line
    return None


def _paragraphs(body: str, when: datetime, dated: str) -> list[_Block]:
    """Blocks between blank lines (code fences whole; headings and date lines joined
    to what follows, a dated one dating the blocks below it)."""
    raw: list[list[str]] = [[]]
    fenced = False
    for line in body.splitlines():
        if line.strip().startswith(("```", "~~~")):
            fenced = not fenced
        if not line.strip() and not fenced:
            if raw[-1]:
                raw.append([])
            continue
        raw[-1].append(line)
    blocks: list[_Block] = []
    pending: list[str] = []
    for lines in raw:
        if not lines:
            continue
        titles = [_title(line, when) for line in lines]
        if all(t is not None for t in titles):
            for title in titles:
                own = _full_date(title, when) if title else None
                if own is not None:
                    when, dated = own, "text"
            pending += ["\n".join(lines)]
            continue
        blocks.append(_Block("\n\n".join([*pending, "\n".join(lines)]), when, dated))
        pending = []
    if pending:
        blocks.append(_Block("\n\n".join(pending), when, dated))
    return blocks
