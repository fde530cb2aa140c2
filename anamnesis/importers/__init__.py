"""Bring existing history into a memory: chat exports, agent transcripts, notes.

``import_export(memory, kind, path)`` reads a whole source, checks it, and stores what
the memory does not hold yet through ``Memory.add_many`` (one module per source;
``core`` holds what they share). Conversations become sessions, messages turns with
their role, speaker and source time; each episode's metadata keeps ``source`` and
``source_id``. It sits above the facade, beside the CLI and the servers.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from ..errors import ImportFormatError, InvalidInputError
from ..memory import Memory
from . import chatgpt, claude, claude_code, notes
from .core import ImportProgress, ImportReport, Parsed, import_parsed

#: Importer name -> its reader (path, speaker=...) -> Parsed.
READERS: dict[str, Callable[..., Parsed]] = {
    "chatgpt": chatgpt.read,
    "claude": claude.read,
    "claude-code": claude_code.read,
    "notes": notes.read,
}
KINDS = tuple(READERS)


def read_export(
    kind: str, path: str | Path, *, speaker: str | None = None, split: str | None = None
) -> Parsed:
    """The whole source at ``path`` read and checked, nothing written."""
    if kind not in READERS:
        raise InvalidInputError(f"unknown import kind {kind!r}; choose one of {', '.join(KINDS)}")
    path = Path(path).expanduser()
    if not path.exists():
        raise InvalidInputError(f"{path} does not exist")
    options: dict[str, Any] = {"speaker": speaker}
    if split is not None:
        if kind != "notes":
            raise InvalidInputError("split applies to notes only")
        options["split"] = split
    return READERS[kind](path, **options)


def import_export(
    memory: Memory,
    kind: str,
    path: str | Path,
    *,
    user_id: str | None = None,
    agent_id: str | None = None,
    speaker: str | None = None,
    split: str | None = None,
    dry_run: bool = False,
    progress: ImportProgress | None = None,
) -> ImportReport:
    """Import the source at ``path`` (``kind``: chatgpt, claude, claude-code, notes).

    The whole source is read and checked first: a malformed or truncated file raises
    ``ImportFormatError`` naming the place, with nothing written. Turns already in
    the memory (same source id and content hash) are not added again, so
    re-importing adds nothing. ``speaker`` names the user's turns; ``split`` is
    "note" or "paragraph" for notes. With ``dry_run`` nothing is written and the
    report says what would be added. ``progress(stage, done, total)`` is called as
    conversations are checked and episodes written.
    """
    parsed = read_export(kind, path, speaker=speaker, split=split)
    return import_parsed(
        memory,
        parsed,
        kind=kind,
        path=Path(path),
        user_id=user_id,
        agent_id=agent_id,
        dry_run=dry_run,
        progress=progress,
    )


__all__ = [
    "KINDS",
    "ImportFormatError",
    "ImportReport",
    "import_export",
    "read_export",
]
