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
import json
from collections.abc import Callable, Iterable
from contextlib import ExitStack
from datetime import UTC, datetime
from typing import IO, Any

import numpy as np

from .embed.base import Embedder
from .errors import InvalidInputError
from .facts.predicates import embedding_text as fact_embedding_text
from .ingest.normalise import embedding_text
from .store.base import FactChanges, Store
from .types import Episode, EpisodeVersion, Fact, Scope, Session

FORMAT = "anamnesis-export"
FORMAT_VERSION = 1
_IMPORT_BATCH = 512
#: An import switches to the store's bulk mode once it has written this many episodes,
#: ...
BULK_IMPORT_MIN_EPISODES = 10_000
#: ... if the store held at most this many times as many episodes before the import.
#: A bulk load rebuilds the vector index over every row (PostgreSQL: ~0.5 ms per row),
#: where a live insert costs ~2 ms per imported row (both from postgres_bench at 1M
#: rows), so the rebuild pays while the rows already there are fewer than ~3x the new.
BULK_IMPORT_MAX_EXISTING_RATIO = 3


def _time(value: datetime | None) -> str | None:
    return value.astimezone(UTC).isoformat() if value is not None else None


def _parse_time(value: str | None) -> datetime | None:
    return datetime.fromisoformat(value) if value is not None else None


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
    for episode, vector in store.iter_episodes():
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
    for (owner, at), ids in groups.items():
        for start in range(0, len(ids), _IMPORT_BATCH):
            record = {
                "type": "consolidated",
                "user_id": owner,
                "consolidated_at": at,
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
) -> int:
    """Restore an export; episodes whose id is already stored are skipped.

    Returns the number of episodes imported. Malformed lines raise InvalidInputError
    naming the line; batches already written stay written. ``bulk`` chooses the
    store's bulk mode (``Store.bulk_load``): True for the whole import, False never,
    None (the default) from the moment the import turns out large
    (``BULK_IMPORT_MIN_EPISODES``) relative to the store (``BULK_IMPORT_MAX_EXISTING_RATIO``).
    """
    with ExitStack() as stack:
        return _import(store, embedder, lines, progress, bulk, stack)


def _import(
    store: Store,
    embedder: Embedder,
    lines: Iterable[str],
    progress: Callable[[int], None] | None,
    bulk: bool | None,
    stack: ExitStack,
) -> int:
    iterator = iter(enumerate(lines, start=1))
    header = None
    for number, line in iterator:
        if line.strip():
            header = _json(line, number)
            break
    if not header or header.get("type") != FORMAT:
        raise InvalidInputError(
            f"not an Anamnesis export: the first line must be a {FORMAT} header"
        )
    if header.get("version") != FORMAT_VERSION:
        raise InvalidInputError(f"unsupported export version {header.get('version')!r}")
    reuse = header.get("embedder") == embedder.name and header.get("dim") == embedder.dim
    if bulk:
        stack.enter_context(store.bulk_load())
    undecided = bulk is None
    sessions: list[Session] = []
    batch: list[tuple[Episode, list[EpisodeVersion], np.ndarray | None]] = []
    facts: list[tuple[Fact, np.ndarray | None]] = []
    marks: list[dict[str, Any]] = []
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

    for number, line in iterator:
        if not line.strip():
            continue
        record = _json(line, number)
        try:
            kind = record["type"]
            if kind == "session":
                sessions.append(
                    Session(
                        id=record["id"],
                        user_id=record["user_id"],
                        agent_id=record.get("agent_id"),
                        started_at=_parse_time(record.get("started_at")),
                        metadata=record.get("metadata") or {},
                    )
                )
            elif kind == "episode":
                batch.append(_episode(record, reuse, embedder.dim))
                if len(batch) >= _IMPORT_BATCH:
                    flush()
            elif kind == "fact":
                facts.append(_fact(record, reuse, embedder.dim))
            elif kind == "consolidated":
                marks.append(record)
            else:
                raise InvalidInputError(f"line {number}: unknown record type {kind!r}")
        except (KeyError, TypeError, ValueError) as exc:
            raise InvalidInputError(f"line {number}: malformed record ({exc})") from exc
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
    marks: list[dict[str, Any]],
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
            FactChanges(
                consolidated=list(mark["episode_ids"]),
                consolidated_at=datetime.fromisoformat(mark["consolidated_at"]),
            ),
            Scope(mark["user_id"]),
        )


def _json(line: str, number: int) -> dict[str, Any]:
    try:
        value = json.loads(line)
    except json.JSONDecodeError as exc:
        raise InvalidInputError(f"line {number} is not JSON: {exc}") from exc
    if not isinstance(value, dict):
        raise InvalidInputError(f"line {number} is not a JSON object")
    return value


def _fact(record: dict[str, Any], reuse: bool, dim: int) -> tuple[Fact, np.ndarray | None]:
    fact = Fact(
        id=record["id"],
        user_id=record["user_id"],
        agent_id=record.get("agent_id"),
        subject=record["subject"],
        predicate=record["predicate"],
        object=record["object"],
        text=record["text"],
        valid_from=_parse_time(record.get("valid_from")),
        valid_to=_parse_time(record.get("valid_to")),
        recorded_at=datetime.fromisoformat(record["recorded_at"]),
        retracted_at=_parse_time(record.get("retracted_at")),
        supersedes=record.get("supersedes"),
        superseded_by=record.get("superseded_by"),
        superseded_at=_parse_time(record.get("superseded_at")),
        confidence=float(record.get("confidence", 1.0)),
        extractor=record.get("extractor") or "import",
        metadata=record.get("metadata") or {},
        provenance=tuple(record.get("provenance") or ()),
    )
    return fact, _vector(record, reuse, dim, "fact embedding")


def _episode(
    record: dict[str, Any], reuse: bool, dim: int
) -> tuple[Episode, list[EpisodeVersion], np.ndarray | None]:
    episode = Episode(
        id=record["id"],
        user_id=record["user_id"],
        agent_id=record.get("agent_id"),
        session_id=record.get("session_id"),
        role=record.get("role"),
        speaker=record.get("speaker"),
        content=record["content"],
        modality=record.get("modality") or "text",
        event_time=datetime.fromisoformat(record["event_time"]),
        recorded_at=datetime.fromisoformat(record["recorded_at"]),
        metadata=record.get("metadata") or {},
        content_hash=record["content_hash"],
        turn_index=record.get("turn_index"),
        version=record.get("version", 1),
    )
    versions = [
        EpisodeVersion(
            episode.id,
            v["version"],
            v["content"],
            v["metadata"],
            datetime.fromisoformat(v["changed_at"]),
        )
        for v in record.get("versions") or []
    ]
    return episode, versions, _vector(record, reuse, dim, "embedding")


def _vector(record: dict[str, Any], reuse: bool, dim: int, what: str) -> np.ndarray | None:
    """The record's stored vector when it can be reused (same embedder), else None."""
    if not reuse or not record.get("embedding"):
        return None
    vector = np.frombuffer(base64.b64decode(record["embedding"]), dtype="<f4")
    if vector.shape != (dim,):
        raise ValueError(f"{what} has {vector.size} values, expected {dim}")
    return vector
