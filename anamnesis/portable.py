"""Portable snapshots: a JSONL format that moves a memory between stores losslessly.

Line 1 is a header naming the format, its version and the embedder; then one line per
session and one per episode (with its prior versions and its vector, base64 float32),
then one per fact (with its provenance and vector) and the consolidation marks (which
episodes fact extraction has read), grouped by user and time.
Importing into a store with the same embedder reuses the vectors; otherwise the text
is re-embedded.

Large imports run inside the store's ``bulk_load()``, a context manager under which a
store takes many rows faster (PostgresStore drops its HNSW index and builds it once at
the end; SQLiteStore refreshes its planner statistics afterwards).
"""

from __future__ import annotations

import base64
import itertools
import json
from collections.abc import Callable, Iterable
from contextlib import ExitStack
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import IO, Any

import numpy as np

from .embed.base import Embedder
from .errors import InvalidInputError
from .facts.predicates import embedding_text as fact_embedding_text
from .ingest.normalise import (
    as_text,
    check_count,
    check_id,
    check_metadata,
    check_modality,
    check_name,
    check_text,
    content_hash,
    embedding_text,
    parse_time,
    require_time,
)
from .store.base import FactChanges, Filters, Store
from .types import Episode, EpisodeVersion, Fact, Scope, Session

FORMAT = "anamnesis-export"
FORMAT_VERSION = 1
_IMPORT_BATCH = 512
#: An import switches to the store's bulk mode once it has written this many episodes,
#: ...
BULK_IMPORT_MIN_EPISODES = 10_000
#: ... if the store held at most this many times as many episodes before the import.
#: A bulk load rebuilds the vector index over every row, which pays while the rows
#: already there are few next to the new (per-row costs from ``anamnesis bench``'s
#: PostgreSQL scale run: study "Per dataset", "Figures from the code's comments").
BULK_IMPORT_MAX_EXISTING_RATIO = 3


def _time(value: datetime | None) -> str | None:
    return value.astimezone(UTC).isoformat() if value is not None else None


#: The largest export line read (an episode at the content limit, its versions and
#: vector, in JSON): a longer line is refused before it is parsed.
MAX_LINE_CHARS = 8_000_000


def export_jsonl(
    store: Store, embedder: Embedder, out: IO[str], *, user_id: str | None = None
) -> int:
    """Write the header, sessions and episodes; returns the number of episodes."""
    header = {
        "type": FORMAT,
        "version": FORMAT_VERSION,
        "embedder": embedder.name,
        "dim": embedder.dim,
    }
    out.write(json.dumps(header) + "\n")
    for session in store.iter_sessions():
        if user_id is not None and session.user_id != user_id:
            continue
        out.write(
            json.dumps(
                {
                    "type": "session",
                    "id": session.id,
                    "user_id": session.user_id,
                    "agent_id": session.agent_id,
                    "started_at": _time(session.started_at),
                    "metadata": session.metadata,
                },
                ensure_ascii=False,
            )
            + "\n"
        )
    count = 0
    # Archived episodes are written as episodes: an import brings them back hot.
    archived = store.iter_archived(Scope(user_id) if user_id is not None else None, Filters())
    for episode, vector in itertools.chain(store.iter_episodes(), archived):
        if user_id is not None and episode.user_id != user_id:
            continue
        versions = store.episode_versions(episode.id, Scope(episode.user_id))
        record: dict[str, Any] = {
            "type": "episode",
            "id": episode.id,
            "user_id": episode.user_id,
            "agent_id": episode.agent_id,
            "session_id": episode.session_id,
            "turn_index": episode.turn_index,
            "role": episode.role,
            "speaker": episode.speaker,
            "content": episode.content,
            "modality": episode.modality,
            "event_time": _time(episode.event_time),
            "recorded_at": _time(episode.recorded_at),
            "metadata": episode.metadata,
            "content_hash": episode.content_hash,
            "version": episode.version,
            "versions": [
                {
                    "version": v.version,
                    "content": v.content,
                    "metadata": v.metadata,
                    "changed_at": _time(v.changed_at),
                }
                for v in versions
            ],
            "embedding": _vector_text(vector),
        }
        out.write(json.dumps(record, ensure_ascii=False) + "\n")
        count += 1
    _export_facts(store, out, user_id)
    return count


def _vector_text(vector: np.ndarray | None) -> str | None:
    if vector is None:
        return None
    return base64.b64encode(np.asarray(vector, dtype="<f4").tobytes()).decode()


def _export_facts(store: Store, out: IO[str], user_id: str | None) -> None:
    for fact, vector in store.iter_facts():
        if user_id is not None and fact.user_id != user_id:
            continue
        record = {
            "type": "fact",
            "id": fact.id,
            "user_id": fact.user_id,
            "agent_id": fact.agent_id,
            "subject": fact.subject,
            "predicate": fact.predicate,
            "object": fact.object,
            "text": fact.text,
            "valid_from": _time(fact.valid_from),
            "valid_to": _time(fact.valid_to),
            "recorded_at": _time(fact.recorded_at),
            "retracted_at": _time(fact.retracted_at),
            "supersedes": fact.supersedes,
            "superseded_by": fact.superseded_by,
            "superseded_at": _time(fact.superseded_at),
            "confidence": fact.confidence,
            "extractor": fact.extractor,
            "metadata": fact.metadata,
            "provenance": list(fact.provenance),
            "embedding": _vector_text(vector),
        }
        out.write(json.dumps(record, ensure_ascii=False) + "\n")
    groups: dict[tuple[str, str], list[str]] = {}
    for owner, episode_id, at in store.iter_consolidated():
        if user_id is None or owner == user_id:
            groups.setdefault((owner, _time(at) or ""), []).append(episode_id)
    for (owner, stamp), ids in groups.items():
        for start in range(0, len(ids), _IMPORT_BATCH):
            record = {
                "type": "consolidated",
                "user_id": owner,
                "consolidated_at": stamp,
                "episode_ids": ids[start : start + _IMPORT_BATCH],
            }
            out.write(json.dumps(record, ensure_ascii=False) + "\n")


def import_jsonl(
    store: Store,
    embedder: Embedder,
    lines: Iterable[str],
    *,
    progress: Callable[[int], None] | None = None,
    bulk: bool | None = None,
    owner: Scope | None = None,
) -> int:
    """Restore an export; episodes whose id is already stored are skipped.

    Every record is checked as ``add`` checks a message (ids, scope, text, times,
    metadata, types), content hashes are recomputed, and a vector is kept only when
    the export's embedder is the store's and its size is right: the whole file is
    checked before anything is written, so a bad line stores nothing and raises
    ``InvalidInputError`` naming the line. ``owner`` moves every record into that
    user (and agent, when it names one) instead of the ones the file names.

    Returns the number of episodes imported. ``bulk`` chooses the store's bulk mode
    (``Store.bulk_load``): True for the whole import, False never, None (the
    default) from the moment the import turns out large (``BULK_IMPORT_MIN_EPISODES``)
    relative to the store (``BULK_IMPORT_MAX_EXISTING_RATIO``).
    """
    replayable = _replayable(lines)
    for _ in _records(replayable(), embedder, owner):
        pass
    with ExitStack() as stack:
        return _import(store, embedder, replayable(), progress, bulk, stack, owner)


def _replayable(lines: Iterable[str]) -> Callable[[], Iterable[str]]:
    """A way to read ``lines`` twice: a sequence as it is, a seekable file from its
    current position, anything else kept in memory."""
    if isinstance(lines, list | tuple):
        return lambda: lines
    seek = getattr(lines, "seek", None)
    tell = getattr(lines, "tell", None)
    if callable(seek) and callable(tell):
        try:
            start = tell()
        except OSError:
            start = None
        if start is not None:

            def again() -> Iterable[str]:
                seek(start)
                return lines

            return again
    kept = list(lines)
    return lambda: kept


def _records(
    lines: Iterable[str], embedder: Embedder, owner: Scope | None
) -> Iterable[tuple[int, str, Any]]:
    """(line number, record type, checked record) for each record after the header."""
    iterator = iter(enumerate(lines, start=1))
    header = None
    for number, line in iterator:
        if _text(line, number).strip():
            header = _json(line, number)
            break
    if not header or header.get("type") != FORMAT:
        raise InvalidInputError(
            f"not an Anamnesis export: the first line must be a {FORMAT} header"
        )
    if header.get("version") != FORMAT_VERSION:
        raise InvalidInputError(f"unsupported export version {header.get('version')!r}")
    reuse = header.get("embedder") == embedder.name and header.get("dim") == embedder.dim
    for number, line in iterator:
        if not _text(line, number).strip():
            continue
        record = _json(line, number)
        try:
            kind = record.get("type")
            if kind == "session":
                yield number, kind, _session(record, owner)
            elif kind == "episode":
                yield number, kind, _episode(record, reuse, embedder.dim, owner)
            elif kind == "fact":
                yield number, kind, _fact(record, reuse, embedder.dim, owner)
            elif kind == "consolidated":
                yield number, kind, _mark(record, owner)
            else:
                raise InvalidInputError(f"unknown record type {kind!r}")
        except InvalidInputError as exc:
            raise InvalidInputError(f"line {number}: {exc}") from exc
        except (KeyError, TypeError, ValueError, OverflowError) as exc:
            raise InvalidInputError(f"line {number}: malformed record ({exc!r})") from exc


def _import(
    store: Store,
    embedder: Embedder,
    lines: Iterable[str],
    progress: Callable[[int], None] | None,
    bulk: bool | None,
    stack: ExitStack,
    owner: Scope | None,
) -> int:
    if bulk:
        stack.enter_context(store.bulk_load())
    undecided = bulk is None
    sessions: list[Session] = []
    batch: list[tuple[Episode, list[EpisodeVersion], np.ndarray | None]] = []
    facts: list[tuple[Fact, np.ndarray | None]] = []
    marks: list[_Mark] = []
    imported = 0

    def flush() -> None:
        nonlocal imported, undecided
        existing = store.existing_ids([e.id for e, _, _ in batch])
        fresh = [item for item in batch if item[0].id not in existing]
        vectors = _with_missing_embedded(
            embedder,
            [v for _, _, v in fresh],
            [embedding_text(e.content, e.speaker) for e, _, _ in fresh],
        )
        matrix = np.stack(vectors) if fresh else np.zeros((0, embedder.dim), dtype=np.float32)
        store.insert_episodes(
            [e for e, _, _ in fresh],
            matrix,
            sessions=list(sessions),
            versions=[v for _, versions, _ in fresh for v in versions],
        )
        sessions.clear()
        imported += len(fresh)
        batch.clear()
        if progress is not None:
            progress(imported)
        if undecided and imported >= BULK_IMPORT_MIN_EPISODES:
            undecided = False
            before = store.stats(None)["episodes"] - imported
            if before <= BULK_IMPORT_MAX_EXISTING_RATIO * imported:
                stack.enter_context(store.bulk_load())

    for _, kind, item in _records(lines, embedder, owner):
        if kind == "session":
            sessions.append(item)
        elif kind == "episode":
            batch.append(item)
            if len(batch) >= _IMPORT_BATCH:
                flush()
        elif kind == "fact":
            facts.append(item)
        else:
            marks.append(item)
    if batch or sessions:
        flush()
    _import_facts(store, embedder, facts, marks)
    return imported


def _with_missing_embedded(
    embedder: Embedder, vectors: list[np.ndarray | None], texts: list[str]
) -> list[np.ndarray]:
    """``vectors`` with each None replaced by the embedding of the matching text."""
    missing = [text for text, v in zip(texts, vectors, strict=True) if v is None]
    embedded = iter(embedder.embed_documents(missing) if missing else ())
    return [v if v is not None else next(embedded) for v in vectors]


def _import_facts(
    store: Store,
    embedder: Embedder,
    facts: list[tuple[Fact, np.ndarray | None]],
    marks: list[_Mark],
) -> None:
    """Write imported facts (skipping ids already stored) and consolidation marks,
    after the episodes they refer to."""
    existing = store.existing_fact_ids([f.id for f, _ in facts])
    by_scope: dict[tuple[str, str | None], list[tuple[Fact, np.ndarray | None]]] = {}
    for fact, vector in facts:
        if fact.id not in existing:
            by_scope.setdefault((fact.user_id, fact.agent_id), []).append((fact, vector))
    for (user_id, agent_id), items in by_scope.items():
        for start in range(0, len(items), _IMPORT_BATCH):
            chunk = items[start : start + _IMPORT_BATCH]
            vectors = _with_missing_embedded(
                embedder, [v for _, v in chunk], [fact_embedding_text(f) for f, _ in chunk]
            )
            store.write_facts(
                FactChanges(added=[f for f, _ in chunk], vectors=vectors),
                Scope(user_id, agent_id),
            )
    for mark in marks:
        store.write_facts(
            FactChanges(consolidated=list(mark.episode_ids), consolidated_at=mark.at),
            Scope(mark.user_id),
        )


def _text(value: object, number: int) -> str:
    line = as_text(value, f"line {number}")
    if len(line) > MAX_LINE_CHARS:
        raise InvalidInputError(
            f"line {number} has {len(line):,} characters; the limit is {MAX_LINE_CHARS:,}"
        )
    return line


def _json(line: object, number: int) -> dict[str, Any]:
    try:
        value = json.loads(_text(line, number))
    except (json.JSONDecodeError, RecursionError) as exc:
        raise InvalidInputError(f"line {number} is not JSON: {exc}") from exc
    if not isinstance(value, dict):
        raise InvalidInputError(f"line {number} is not a JSON object")
    return value


@dataclass(frozen=True, slots=True)
class _Mark:
    """Which episodes a consolidation read, and when."""

    user_id: str
    at: datetime
    episode_ids: tuple[str, ...]


def _owned(record: dict[str, Any], owner: Scope | None) -> tuple[str, str | None]:
    """The (user, agent) a record goes to: ``owner``'s when given, else its own."""
    if owner is not None:
        return owner.user_id, owner.agent_id or _agent(record)
    user_id = check_id(record.get("user_id"), "user_id", required=True)
    assert user_id is not None
    return user_id, _agent(record)


def _agent(record: dict[str, Any]) -> str | None:
    return check_id(record.get("agent_id"), "agent_id")


def _optional_name(record: dict[str, Any], key: str) -> str | None:
    value = record.get(key)
    return None if value is None else check_name(value, key)


def _ids(value: object, what: str) -> tuple[str, ...]:
    if value is None:
        return ()
    if not isinstance(value, list):
        raise InvalidInputError(f"{what} must be a list of ids")
    return tuple(str(check_id(item, what, required=True)) for item in value)


def _session(record: dict[str, Any], owner: Scope | None) -> Session:
    user_id, agent_id = _owned(record, owner)
    return Session(
        id=str(check_id(record.get("id"), "session id", required=True)),
        user_id=user_id,
        agent_id=agent_id,
        started_at=parse_time(record.get("started_at"), "started_at"),
        metadata=check_metadata(record.get("metadata")),
    )


def _mark(record: dict[str, Any], owner: Scope | None) -> _Mark:
    user_id, _ = _owned(record, owner)
    return _Mark(
        user_id=user_id,
        at=require_time(record.get("consolidated_at"), "consolidated_at"),
        episode_ids=_ids(record.get("episode_ids"), "episode_ids"),
    )


def _fact(
    record: dict[str, Any], reuse: bool, dim: int, owner: Scope | None
) -> tuple[Fact, np.ndarray | None]:
    user_id, agent_id = _owned(record, owner)
    confidence = record.get("confidence", 1.0)
    if isinstance(confidence, bool) or not isinstance(confidence, int | float):
        raise InvalidInputError("confidence must be a number")
    if not 0.0 <= float(confidence) <= 1.0:
        raise InvalidInputError(f"confidence must be between 0 and 1, got {confidence!r}")
    fact = Fact(
        id=str(check_id(record.get("id"), "fact id", required=True)),
        user_id=user_id,
        agent_id=agent_id,
        subject=check_text(record.get("subject"), "subject"),
        predicate=check_name(record.get("predicate"), "predicate"),
        object=check_text(record.get("object"), "object"),
        text=check_text(record.get("text"), "text"),
        valid_from=parse_time(record.get("valid_from"), "valid_from"),
        valid_to=parse_time(record.get("valid_to"), "valid_to"),
        recorded_at=require_time(record.get("recorded_at"), "recorded_at"),
        retracted_at=parse_time(record.get("retracted_at"), "retracted_at"),
        supersedes=check_id(record.get("supersedes"), "supersedes"),
        superseded_by=check_id(record.get("superseded_by"), "superseded_by"),
        superseded_at=parse_time(record.get("superseded_at"), "superseded_at"),
        confidence=float(confidence),
        extractor=_optional_name(record, "extractor") or "import",
        metadata=check_metadata(record.get("metadata")),
        provenance=_ids(record.get("provenance"), "provenance"),
    )
    return fact, _vector(record, reuse, dim, "fact embedding")


def _episode(
    record: dict[str, Any], reuse: bool, dim: int, owner: Scope | None
) -> tuple[Episode, list[EpisodeVersion], np.ndarray | None]:
    user_id, agent_id = _owned(record, owner)
    content = check_text(record.get("content"))
    speaker = _optional_name(record, "speaker")
    turn_index = record.get("turn_index")
    episode = Episode(
        id=str(check_id(record.get("id"), "episode id", required=True)),
        user_id=user_id,
        agent_id=agent_id,
        session_id=check_id(record.get("session_id"), "session_id"),
        role=_optional_name(record, "role"),
        speaker=speaker,
        content=content,
        modality=check_modality(record.get("modality")),
        event_time=require_time(record.get("event_time"), "event_time"),
        recorded_at=require_time(record.get("recorded_at"), "recorded_at"),
        metadata=check_metadata(record.get("metadata")),
        content_hash=content_hash(content, speaker),
        turn_index=None if turn_index is None else check_count(turn_index, "turn_index"),
        version=check_count(record.get("version", 1), "version", minimum=1),
    )
    prior = record.get("versions") or []
    if not isinstance(prior, list) or not all(isinstance(v, dict) for v in prior):
        raise InvalidInputError("versions must be a list of objects")
    versions = [
        EpisodeVersion(
            episode.id,
            check_count(v.get("version"), "version", minimum=1),
            check_text(v.get("content")),
            check_metadata(v.get("metadata")),
            require_time(v.get("changed_at"), "changed_at"),
        )
        for v in prior
    ]
    return episode, versions, _vector(record, reuse, dim, "embedding")


def _vector(record: dict[str, Any], reuse: bool, dim: int, what: str) -> np.ndarray | None:
    """The record's stored vector when it can be reused (same embedder), else None."""
    encoded = record.get("embedding")
    if not reuse or not encoded:
        return None
    if not isinstance(encoded, str):
        raise InvalidInputError(f"{what} must be base64 text")
    try:
        raw = base64.b64decode(encoded, validate=True)
    except ValueError as exc:
        raise InvalidInputError(f"{what} is not valid base64: {exc}") from exc
    if len(raw) != 4 * dim:
        raise InvalidInputError(f"{what} has {len(raw) / 4:g} values, expected {dim}")
    vector = np.frombuffer(raw, dtype="<f4")
    if not np.all(np.isfinite(vector)):
        raise InvalidInputError(f"{what} holds values that are not finite numbers")
    return vector
