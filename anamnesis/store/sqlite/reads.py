"""The read side of the SQLite store: episodes by id and by scope, neighbouring turns,
lexical, dense and time search, iteration and statistics.

Mixed into ``SQLiteStore``, whose connection, lock and in-memory indexes it reads.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from ...errors import (
    StoreError,
)
from ...types import Episode, EpisodeVersion, Scope, Session
from ..base import TURN_COLUMNS, Candidate, Filters, TurnInfo, adjacent_by_episode, fact_scope
from ..episode_times import EpisodeTimes, TimeRange, times_by_episode
from ..index.dense import DenseIndex, Place
from . import index_files
from .ann import SQLiteAnn
from .dense_file import DenseFile
from .driver import sqlite3
from .lexical import SQLiteLexical
from .sql import (
    EPISODE_COLUMNS,
    episode_from_row,
    filters_sql,
    from_epoch,
    fts_query,
    operational_error,
    scope_sql,
    scope_terms,
    to_epoch,
)


def _chunks(values: Sequence[Any], size: int = 500) -> Iterator[list[Any]]:
    """``values`` in lists of at most ``size`` (one statement's parameters each)."""
    for start in range(0, len(values), size):
        yield list(values[start : start + size])


def _filters_key(filters: Filters) -> tuple:
    """``filters`` as a dictionary key (metadata values as their sorted JSON)."""
    return (
        filters.role,
        filters.not_role,
        filters.speaker,
        filters.modality,
        filters.event_after,
        filters.event_before,
        filters.recorded_before,
        json.dumps(filters.metadata, sort_keys=True),
    )


def _rows_key(scope: Scope, filters: Filters) -> tuple | None:
    """What names the rows ``scope`` and ``filters`` let through while the file's rows do
    not change (their scope and filter columns never change in place), or None when
    there are no filters, or metadata filters (which an update changes in place:
    ``_filtered_rowids`` keeps their rows under its own epochs)."""
    if filters.is_empty() or filters.metadata:
        return None
    return (scope, _filters_key(filters))


#: Scopes and filters whose rows ``_filtered_rowids`` keeps between searches.
FILTERED_ROWS_CACHE = 16


#: Rows whose id, scope and place in a conversation ``_in_scope`` keeps between searches.
ROW_CACHE = 100_000
#: The columns of ``episodes e`` the dense index keeps per row (``dense.Columns``), in
#: its order.
DENSE_COLUMNS = "e.role, e.speaker, e.modality, e.event_time, e.recorded_at, e.id, e.turn_index"
#: Rows whose columns one statement reads into the dense index (``_add_dense_columns``).
COLUMN_BATCH = 20_000


class SQLiteReads:
    """Reads and searches for ``SQLiteStore`` (uses its connection, lock and indexes)."""

    #: ``_in_scope``'s rows: rowid -> place (id, user, agent, turn info), and the epoch
    #: read with them.
    _row_places: dict[int, Place] | None = None
    _row_places_epoch: str | None = None
    #: The same rows by id: id -> rowid.
    _id_rows: dict[str, int] | None = None
    #: ``_filtered_rowids``' rows, least recently used first: (scope, filters) ->
    #: (vector epoch, metadata epoch, last rowid read, rowids).
    _filtered_rows: dict[tuple, tuple[str | None, str | None, int, np.ndarray]]

    path: Path
    dim: int
    backend: str
    _lock: Any
    _conn: sqlite3.Connection
    _dense: DenseIndex
    _dense_loaded: bool
    _dense_epoch: str | None
    _dense_removal: tuple[str, list[int]] | None
    _lexical: SQLiteLexical
    _ann: SQLiteAnn
    _dense_file: DenseFile
    #: Whether the file has ``pending_vectors`` (not when an older store was opened
    #: without migrating it: read-only or damaged).
    _pending_table: bool = True
    #: The thread checking a mapped matrix's files (``_persist_dense``), if one ran.
    _dense_checker: threading.Thread | None = None

    def _read(self, sql: str, params: Sequence[Any] = ()) -> list[tuple]:  # pragma: no cover
        raise NotImplementedError

    def get_episodes(self, episode_ids: Sequence[str], scope: Scope) -> list[Episode]:
        if not episode_ids:
            return []
        where, params = scope_sql(scope, by_key=True)
        found: dict[str, Episode] = {}
        for chunk in _chunks(episode_ids):
            marks = ",".join("?" * len(chunk))
            for row in self._read(
                f"SELECT {EPISODE_COLUMNS} FROM episodes e WHERE e.id IN ({marks}) AND {where}",
                [*chunk, *params],
            ):
                found[row[0]] = episode_from_row(row)
        return [found[i] for i in episode_ids if i in found]

    def list_episodes(
        self, scope: Scope, *, limit: int, offset: int, filters: Filters | None = None
    ) -> tuple[list[Episode], int]:
        where, params = scope_sql(scope)
        extra, extra_params = filters_sql(filters or Filters())
        total = self._read(
            f"SELECT COUNT(*) FROM episodes e WHERE {where} AND {extra}", [*params, *extra_params]
        )[0][0]
        # A session's rows are found by its index and sorted; ordering by the bare
        # column would let SQLite walk the user's whole time index to skip the sort.
        order = "+e.event_time" if scope.session_id is not None else "e.event_time"
        rows = self._read(
            f"SELECT {EPISODE_COLUMNS} FROM episodes e WHERE {where} AND {extra} "
            f"ORDER BY {order}, e.rowid LIMIT ? OFFSET ?",
            [*params, *extra_params, limit, offset],
        )
        return [episode_from_row(r) for r in rows], total

    def episode_versions(self, episode_id: str, scope: Scope) -> list[EpisodeVersion]:
        where, params = scope_sql(scope, by_key=True)
        rows = self._read(
            f"""SELECT v.episode_id, v.version, v.content, v.metadata, v.changed_at
                FROM episode_versions v JOIN (
                    SELECT id, user_id, agent_id, session_id FROM episodes
                    UNION ALL
                    SELECT id, user_id, agent_id, session_id FROM archived_episodes
                ) e ON e.id = v.episode_id
                WHERE v.episode_id = ? AND {where} ORDER BY v.version""",
            [episode_id, *params],
        )
        return [EpisodeVersion(r[0], r[1], r[2], json.loads(r[3]), from_epoch(r[4])) for r in rows]

    def neighbours(
        self, episodes: Sequence[Episode], window: int
    ) -> dict[str, tuple[Episode, ...]]:
        result: dict[str, tuple[Episode, ...]] = {e.id: () for e in episodes}
        anchored = [e for e in episodes if e.session_id is not None and e.turn_index is not None]
        if window <= 0 or not anchored:
            return result
        clauses, params = [], []
        for episode in anchored:
            clauses.append("(e.user_id = ? AND e.session_id = ? AND e.turn_index BETWEEN ? AND ?)")
            params += [
                episode.user_id,
                episode.session_id,
                episode.turn_index - window,  # type: ignore[operator]
                episode.turn_index + window,  # type: ignore[operator]
            ]
        by_session: dict[tuple[str, str], list[Episode]] = {}
        for row in self._read(
            f"SELECT {EPISODE_COLUMNS} FROM episodes e WHERE {' OR '.join(clauses)} "
            "ORDER BY e.turn_index",
            params,
        ):
            found = episode_from_row(row)
            by_session.setdefault((found.user_id, found.session_id or ""), []).append(found)
        for episode in anchored:
            turn = episode.turn_index or 0
            result[episode.id] = tuple(
                other
                for other in by_session.get((episode.user_id, episode.session_id or ""), [])
                if other.id != episode.id and abs((other.turn_index or 0) - turn) <= window
            )
        return result

    def _by_id(self, select: str, episode_ids: Sequence[str], scope: Scope) -> list[tuple]:
        """Rows of ``SELECT <select> FROM episodes e ...`` for the in-scope episodes
        among ``episode_ids`` (each id once; 500 to a statement)."""
        where, params = scope_sql(scope, by_key=True)
        rows: list[tuple] = []
        unique = list(dict.fromkeys(episode_ids))
        for chunk in _chunks(unique):
            marks = ",".join("?" * len(chunk))
            rows += self._read(
                f"SELECT {select} WHERE e.id IN ({marks}) AND {where}", [*chunk, *params]
            )
        return rows

    def turn_info(self, episode_ids: Sequence[str], scope: Scope) -> dict[str, TurnInfo]:
        # The rows a search has placed (``_in_scope``) are known; the rest read by id.
        with self._lock:
            places, id_rows = self._places()
            placed = {r: places.get(r) for r in map(id_rows.get, episode_ids) if r is not None}
            known = self._in_scope([r for r, place in placed.items() if place], scope)
        found = {episode_id: turn for episode_id, turn in known.values()}
        missing = [i for i in episode_ids if i not in found]
        if missing:
            rows = self._by_id(f"e.id, {TURN_COLUMNS} FROM episodes e", missing, scope)
            found.update((r[0], (r[1], r[2], r[3], r[4])) for r in rows)
        return found

    def episode_vectors(self, episode_ids: Sequence[str], scope: Scope) -> dict[str, np.ndarray]:
        rows = self._by_id(
            "e.id, v.embedding FROM episodes e JOIN vectors v ON v.episode_rowid = e.rowid",
            episode_ids,
            scope,
        )
        return {episode_id: np.frombuffer(blob, dtype=np.float32) for episode_id, blob in rows}

    def adjacent_turns(
        self, episode_ids: Sequence[str], scope: Scope, filters: Filters, window: int
    ) -> dict[str, list[tuple[str, int]]]:
        unique = list(dict.fromkeys(episode_ids))
        if window <= 0 or not unique:
            return {}
        where_h, params_h = scope_sql(scope, "h", by_key=True)
        where_e, params_e = scope_sql(scope, by_key=True)  # the join drives e, not scope
        extra, extra_params = filters_sql(filters)
        rows: list[tuple] = []
        for chunk in _chunks(unique):
            marks = ",".join("?" * len(chunk))
            rows += self._read(
                f"""SELECT h.id, e.id, e.turn_index - h.turn_index FROM episodes h
                    JOIN episodes e ON e.user_id = h.user_id AND e.session_id = h.session_id
                     AND e.turn_index BETWEEN h.turn_index - ? AND h.turn_index + ?
                     AND e.rowid <> h.rowid
                    WHERE h.id IN ({marks}) AND {where_h} AND {where_e} AND {extra}""",
                [window, window, *chunk, *params_h, *params_e, *extra_params],
            )
        return adjacent_by_episode(rows)

    def lexical_search(
        self, terms: Sequence[str], scope: Scope, filters: Filters, limit: int
    ) -> list[Candidate]:
        if not terms:
            return []
        with self._lock:
            try:
                tokens = scope_terms(scope.user_id, scope.agent_id, scope.session_id).split()
                ranked = self._lexical.search(
                    self._conn,
                    terms,
                    tokens,
                    lambda: self._refreshed_rowids(scope, filters),
                    limit,
                    _rows_key(scope, filters),
                )
                if ranked is not None:
                    return self._candidates(ranked, scope)
            except sqlite3.OperationalError as exc:
                raise operational_error(exc, self.path, "lexical search") from exc
        return self.fts5_lexical_search(terms, scope, filters, limit)

    def lexical_rank(
        self, terms: Sequence[str], episode_ids: Sequence[str], scope: Scope, limit: int
    ) -> list[Candidate]:
        if not terms or not episode_ids or limit <= 0:
            return []
        with self._lock:
            try:
                rowids = self._rowids_in_scope(episode_ids, scope)
                ranked = self._lexical.rank(self._conn, terms, rowids, limit)
                if ranked is not None:
                    return self._candidates(ranked, scope)
            except sqlite3.OperationalError as exc:
                raise operational_error(exc, self.path, "lexical search") from exc
        if not rowids:
            return []
        # FTS5's own bm25() over the same rows, while the in-memory index is not current.
        scores: list[tuple[int, float]] = []
        for chunk in _chunks(rowids):
            scores += self._read(
                f"""SELECT rowid, -bm25(episodes_fts, 1.0, 0.0) FROM episodes_fts
                    WHERE episodes_fts MATCH ? AND rowid IN ({",".join("?" * len(chunk))})""",
                [fts_query(terms, scope), *chunk],
            )
        scores.sort(key=lambda pair: (-pair[1], pair[0]))
        return self._candidates(scores[:limit], scope)

    def fts5_lexical_search(
        self, terms: Sequence[str], scope: Scope, filters: Filters, limit: int
    ) -> list[Candidate]:
        """``lexical_search`` answered by FTS5's own ``bm25()`` (the reference ranking)."""
        if not terms:
            return []
        where, params = scope_sql(scope, by_key=True)
        extra, extra_params = filters_sql(filters)
        rows = self._read(
            f"""SELECT e.id, bm25(episodes_fts, 1.0, 0.0) AS rank FROM episodes_fts
                JOIN episodes e ON e.rowid = episodes_fts.rowid
                WHERE episodes_fts MATCH ? AND {where} AND {extra}
                ORDER BY rank LIMIT ?""",
            [fts_query(terms, scope), *params, *extra_params, limit],
        )
        # FTS5's bm25() is negative (smaller is better); report the usual positive score.
        return [Candidate(r[0], -float(r[1])) for r in rows]

    def warm_up(self) -> None:
        """Load the dense and lexical indexes now rather than on the first searches.

        The lexical index is built on a connection of its own, so searches running
        meanwhile are not held up (they use FTS5 until it is ready).
        """
        with self._lock:
            if self._conn is None:  # closed while a warm-up was queued
                return
            self._refresh_dense()
            self._dense.group_users()  # here rather than in the first search of a user
            epoch = self._dense_epoch
        # A copy saved without the rows' columns: read once, saved with it next time.
        self._warm_dense_columns(epoch)
        if epoch is not None:
            self._persist_dense(epoch)
            self._ann.warm_up(self._dense, epoch)
        self._lexical.warm_up()

    def _persist_dense(self, epoch: str) -> None:
        """Check the matrix mapped from beside the store, or save it there; both read
        every row once, outside the lock (``DenseFile``). The check runs on a thread of
        its own (``_dense_checker``), so that closing soon after open does not wait
        for it to read the whole file."""
        with self._lock:
            check = self._dense_file.checking()
        if check is None:
            self._dense_file.save(self._dense, epoch, self._locked_file_epoch, self._lock)
            return
        self._dense_checker = threading.Thread(
            target=self._check_dense,
            args=(check, epoch),
            name="anamnesis-dense-check",
            daemon=True,
        )
        self._dense_checker.start()

    def _check_dense(self, check: Callable[[], bool], epoch: str) -> None:
        """Run ``check``; if the mapped matrix is damaged, read it from the store again
        (unless the store was closed or changed meanwhile) and save that."""
        if check():
            return
        with self._lock:
            if self._conn is None or self._dense_epoch != epoch:
                return
            self._dense_loaded = False
            self._refresh_dense()
        self._dense_file.save(self._dense, epoch, self._locked_file_epoch, self._lock)

    def _locked_file_epoch(self) -> str | None:
        with self._lock:
            return self._file_epoch()

    def _file_epoch(self) -> str | None:  # pragma: no cover - SQLiteStore's
        raise NotImplementedError

    def _refreshed_rowids(self, scope: Scope, filters: Filters) -> np.ndarray | None:
        """``_allowed_rowids`` with the dense index brought up to date first."""
        if not filters.is_empty():
            self._refresh_dense()
        return self._allowed_rowids(scope, filters)

    def _allowed_rowids(self, scope: Scope, filters: Filters) -> np.ndarray | None:
        """Rowids in ``scope`` passing ``filters``, ascending; None when there are no
        filters. Read off the dense index's columns (every indexed episode has a row
        there; the caller has refreshed it), except for metadata filters, which SQL
        evaluates, and while some of the user's episodes wait for their vector (not in
        the dense index yet, the lexical channel must still see them)."""
        if filters.is_empty():
            return None
        if not filters.metadata and not self._user_has_pending(scope.user_id):
            self._load_dense_columns()
            return self._dense.rowids_where(
                scope.user_id, scope.agent_id, scope.session_id, filters
            )
        return self._filtered_rowids(scope, filters)

    def _filtered_rowids(self, scope: Scope, filters: Filters) -> np.ndarray:
        """``_allowed_rowids`` in SQL, remembered per scope and filters.

        A row's scope and filter columns never change in place, except its metadata,
        and every change to them moves ``metadata_epoch`` (``update_episode``); deletes
        move ``vector_epoch``; new rows get higher rowids. So while both epochs stay,
        only rows past the last one read are evaluated. Epochs and the last rowid are
        read in one statement, and rows past it are left for the next call."""
        vector_epoch, metadata_epoch, last = self._conn.execute(
            "SELECT (SELECT value FROM meta WHERE key = 'vector_epoch'), "
            "(SELECT value FROM meta WHERE key = 'metadata_epoch'), "
            "(SELECT COALESCE(MAX(rowid), 0) FROM episodes)"
        ).fetchone()
        key = (scope, _filters_key(filters))
        known = self._filtered_rows.pop(key, None)
        extra, extra_params = filters_sql(filters)
        if known is not None and known[:2] == (vector_epoch, metadata_epoch) and known[2] <= last:
            rowids = known[3]
            if known[2] < last:
                # By the rowid key (scope written ``+col``): only the new rows are read.
                where, params = scope_sql(scope, by_key=True)
                new = self._rowids(
                    f"SELECT e.rowid FROM episodes e WHERE {where} AND {extra} "
                    "AND e.rowid > ? AND e.rowid <= ? ORDER BY e.rowid",
                    [*params, *extra_params, known[2], last],
                )
                rowids = np.concatenate([rowids, new])
        else:
            where, params = scope_sql(scope)
            rowids = self._rowids(
                f"SELECT e.rowid FROM episodes e WHERE {where} AND {extra} "
                "AND e.rowid <= ? ORDER BY e.rowid",
                [*params, *extra_params, last],
            )
        self._filtered_rows[key] = (vector_epoch, metadata_epoch, last, rowids)
        while len(self._filtered_rows) > FILTERED_ROWS_CACHE:
            self._filtered_rows.pop(next(iter(self._filtered_rows)))
        return rowids

    def _user_has_pending(self, user_id: str) -> bool:
        """Whether some of the user's episodes wait for their vector (caller holds the lock)."""
        if not self._pending_table:
            return False
        return (
            self._conn.execute(
                "SELECT 1 FROM pending_vectors WHERE user_id = ? LIMIT 1", (user_id,)
            ).fetchone()
            is not None
        )

    def _candidates(self, pairs: Sequence[tuple[int, float]], scope: Scope) -> list[Candidate]:
        """Map ranked ``(rowid, score)`` pairs to episode ids (with where each turn sits),
        re-checking scope (``_in_scope``)."""
        known = self._in_scope([rowid for rowid, _ in pairs], scope)
        return [Candidate(known[r][0], score, known[r][1]) for r, score in pairs if r in known]

    def _in_scope(self, rowids: Sequence[int], scope: Scope) -> dict[int, tuple[str, TurnInfo]]:
        """The id and ``turn_info`` of each of ``rowids`` that is in ``scope``.

        Each row's place (``Place``: id, user, agent, turn info) is read once and
        remembered while the file's ``vector_epoch`` stays the same: a row's id, scope
        and place in its conversation never change while it exists, rowids are never
        reused, and every delete changes the epoch. Rows the dense index holds are
        placed from its columns when it is in step with the file (``_dense_places``),
        the others in SQL. The scope is checked on each call against the place.
        """
        if not rowids:
            return {}
        cache, id_rows = self._places()
        missing = [r for r in dict.fromkeys(rowids) if r not in cache]
        if missing:
            found = self._dense_places(missing)
            unplaced = [r for r in missing if r not in found]
            if unplaced:
                marks = ",".join("?" * len(unplaced))
                for row in self._conn.execute(
                    f"SELECT e.rowid, e.id, e.user_id, e.agent_id, {TURN_COLUMNS} "
                    f"FROM episodes e WHERE e.rowid IN ({marks})",
                    unplaced,
                ):
                    found[row[0]] = (row[1], row[2], row[3], row[4:8])
            cache.update(found)
            id_rows.update((place[0], rowid) for rowid, place in found.items())
        places: dict[int, tuple[str, TurnInfo]] = {}
        for rowid in rowids:
            place = cache.get(rowid)
            if (
                place is not None
                and place[1] == scope.user_id
                and (scope.agent_id is None or place[2] == scope.agent_id)
                and (scope.session_id is None or place[3][0] == scope.session_id)
            ):
                places[rowid] = (place[0], place[3])
        return places

    def _dense_places(self, rowids: Sequence[int]) -> dict[int, Place]:
        """The places of those of ``rowids`` the dense index holds, read off its columns;
        none unless it is in step with the file (the epoch ``_places`` read: no row
        deleted since it was loaded, and its own removals applied). Rows it lacks (added
        since it was loaded, or waiting for their vector) are the caller's."""
        if not (self._dense_loaded and self._dense_epoch == self._row_places_epoch):
            return {}
        return self._dense.places(rowids)

    def _places(self) -> tuple[dict[int, Place], dict[str, int]]:
        """``_in_scope``'s remembered rows, by rowid and by id; emptied when the file's
        ``vector_epoch`` has moved (a delete) or they grew past ``ROW_CACHE``."""
        row = self._conn.execute("SELECT value FROM meta WHERE key = 'vector_epoch'").fetchone()
        epoch = row[0] if row else "0"
        cache, id_rows = self._row_places, self._id_rows
        if (
            cache is None
            or id_rows is None
            or epoch != self._row_places_epoch
            or len(cache) > ROW_CACHE
        ):
            cache, id_rows = self._row_places, self._id_rows = {}, {}
            self._row_places_epoch = epoch
        return cache, id_rows

    def _rowids_in_scope(self, episode_ids: Sequence[str], scope: Scope) -> list[int]:
        """The rowids of those of ``episode_ids`` that are in ``scope``: those
        ``_in_scope`` has placed are known, the others read by id."""
        _, id_rows = self._places()
        wanted = list(dict.fromkeys(episode_ids))
        missing = [i for i in wanted if i not in id_rows]
        for chunk in _chunks(missing):
            marks = ",".join("?" * len(chunk))
            for rowid, episode_id in self._conn.execute(
                f"SELECT e.rowid, e.id FROM episodes e WHERE e.id IN ({marks})", chunk
            ):
                id_rows[episode_id] = rowid
        return list(self._in_scope([id_rows[i] for i in wanted if i in id_rows], scope))

    def _refresh_dense(self) -> None:
        """Bring the numpy matrix, and the approximate graph above its threshold, up to
        date with the file, incrementally when possible."""
        self._load_dense()
        assert self._dense_epoch is not None
        self._ann.sync(self._dense, self._dense_epoch)

    def _load_dense(self) -> None:
        """Bring the numpy matrix up to date with the file, incrementally when possible."""
        epoch_row = self._conn.execute(
            "SELECT value FROM meta WHERE key = 'vector_epoch'"
        ).fetchone()
        epoch = epoch_row[0] if epoch_row else "0"
        if not self._dense_loaded or epoch != self._dense_epoch:
            removal, self._dense_removal = self._dense_removal, None
            # A mapping replaced here may be of a file an erasure unlinked: dropping it
            # frees the file, which takes time that grows with it, so not in a search.
            mapping = self._dense.mapping()
            if removal is not None and removal[0] == epoch:
                self._dense.remove(removal[1])  # this process's own removal, nothing else
            else:
                self._dense.clear()
                self._dense_file.load(self._dense, self._conn, epoch)
            if mapping and any(held is mapping[0] for held in self._dense.mapping()):
                mapping = []  # still the index's own (a removal only marks its rows)
            index_files.release_later(mapping)
        # Rowids only grow (AUTOINCREMENT), so rows past the last one loaded are exactly
        # the appends made since, by this process or another.
        (pending,) = self._conn.execute(
            "SELECT COUNT(*) FROM vectors WHERE episode_rowid > ?", (self._dense.max_rowid,)
        ).fetchone()
        if not pending:
            self._dense_loaded, self._dense_epoch = True, epoch
            return
        self._dense.reserve(pending)
        # The rows' columns come along (``DenseIndex.append`` keeps them if complete).
        cursor = self._conn.execute(
            f"""SELECT e.rowid, e.user_id, e.agent_id, e.session_id, v.embedding,
                      {DENSE_COLUMNS}
               FROM vectors v JOIN episodes e ON e.rowid = v.episode_rowid
               WHERE v.episode_rowid > ? ORDER BY v.episode_rowid""",
            (self._dense.max_rowid,),
        )
        while rows := cursor.fetchmany(20000):
            self._dense.append(rows)
            self._dense_file.unsaved += len(rows)
        self._dense_loaded = True
        self._dense_epoch = epoch

    def _load_dense_columns(self) -> None:
        """Give the dense index's rows that lack them their columns (``DENSE_COLUMNS``),
        a batch at a time (``_add_dense_columns``); should another process have changed
        those rows since the vectors were read, their rowids differ and the index is
        rebuilt."""
        if self._dense.removed and self._dense.columns_loaded < self._dense.size:
            self._dense.compact()  # SQL has no row for a removed one: rowids must agree
        for _ in range(2):
            while self._dense.columns_loaded < self._dense.size:
                if not self._add_dense_columns():
                    break
            else:
                return
            self._dense.clear()
            self._dense_loaded = False
            self._refresh_dense()
        raise StoreError(f"{self.path} changed while its vectors were being read; retry")

    def _warm_dense_columns(self, epoch: str | None) -> None:
        """``_load_dense_columns`` for ``warm_up``: a batch per hold of the lock, so that
        searches go on meanwhile (placing the rows without columns in SQL). It stops
        where the index changes under it (another epoch, removed rows, other rows): a
        filtered search reads what is left."""
        while True:
            with self._lock:
                dense = self._dense
                if (
                    self._conn is None
                    or not self._dense_loaded
                    or self._dense_epoch != epoch
                    or dense.removed
                    or dense.columns_loaded == dense.size
                ):
                    return
                if not self._add_dense_columns():
                    return

    def _add_dense_columns(self) -> bool:
        """Read the columns of the next ``COLUMN_BATCH`` rows of the dense index that lack
        them, over the same join as the vectors; False, adding none, when the store's
        rows there are not the index's."""
        loaded = self._dense.columns_loaded
        expected = self._dense.rowids_from(loaded)[:COLUMN_BATCH]
        after = self._dense.rowid_at(loaded - 1) if loaded else 0
        rows = self._conn.execute(
            f"""SELECT v.episode_rowid, {DENSE_COLUMNS}
                FROM vectors v JOIN episodes e ON e.rowid = v.episode_rowid
                WHERE v.episode_rowid > ? AND v.episode_rowid <= ?
                ORDER BY v.episode_rowid""",
            (after, int(expected[-1])),
        ).fetchall()
        if [row[0] for row in rows] != expected.tolist():
            return False
        self._dense.add_columns(row[1:] for row in rows)
        # The saved copy lacked them: the next save writes them beside the rest.
        self._dense_file.unsaved += len(rows)
        return True

    def dense_search(
        self, vector: np.ndarray, scope: Scope, filters: Filters, limit: int
    ) -> list[Candidate]:
        with self._lock:
            self._refresh_dense()
            allowed = self._allowed_rowids(scope, filters)
            return self._dense_ranked(vector, scope, allowed, limit)

    def dense_search_sessions(
        self,
        vector: np.ndarray,
        scope: Scope,
        session_ids: Sequence[str],
        filters: Filters,
        limit: int,
    ) -> dict[str, list[Candidate]]:
        wanted = [s for s in dict.fromkeys(session_ids) if scope.session_id in (None, s)]
        with self._lock:
            self._refresh_dense()
            allowed = self._allowed_rowids(scope, filters)
            ranked = {
                session_id: self._dense.search(
                    vector,
                    user_id=scope.user_id,
                    agent_id=scope.agent_id,
                    session_id=session_id,
                    allowed_rowids=allowed,
                    limit=limit,
                )
                for session_id in wanted
            }
            # One call places every session's rowids, re-checking the scope and each
            # turn's session.
            known = self._in_scope([r for pairs in ranked.values() for r, _ in pairs], scope)
        found: dict[str, list[Candidate]] = {s: [] for s in dict.fromkeys(session_ids)}
        for session_id, session_pairs in ranked.items():
            found[session_id] = [
                Candidate(known[rowid][0], score, known[rowid][1])
                for rowid, score in session_pairs
                if rowid in known and known[rowid][1][0] == session_id
            ]
        return found

    def _rowids(self, sql: str, params: Sequence[Any]) -> np.ndarray:
        return np.fromiter((r[0] for r in self._conn.execute(sql, params)), dtype=np.int64)

    def _dense_ranked(
        self, vector: np.ndarray, scope: Scope, allowed: np.ndarray | None, limit: int
    ) -> list[Candidate]:
        """Rank the scope's vectors (only ``allowed`` rowids, when given) by cosine."""
        pairs = self._dense.search(
            vector,
            user_id=scope.user_id,
            agent_id=scope.agent_id,
            session_id=scope.session_id,
            allowed_rowids=allowed,
            limit=limit,
        )
        return self._candidates(pairs, scope)

    def time_search(
        self,
        vector: np.ndarray,
        ranges: Sequence[TimeRange],
        scope: Scope,
        filters: Filters,
        limit: int,
    ) -> list[Candidate]:
        if not ranges or limit <= 0:
            return []
        where, params = scope_sql(scope)
        extra, extra_params = filters_sql(filters)
        own = " OR ".join("(e.event_time >= ? AND e.event_time < ?)" for _ in ranges)
        mentioned = " OR ".join("(t.start_time < ? AND t.end_time > ?)" for _ in ranges)
        own_params = [to_epoch(moment) for r in ranges for moment in r]
        mentioned_params = [to_epoch(moment) for start, end in ranges for moment in (end, start)]
        with self._lock:
            self._refresh_dense()
            allowed = self._rowids(
                f"""SELECT e.rowid FROM episodes e WHERE {where} AND {extra} AND ({own})
                    UNION
                    SELECT e.rowid FROM episode_times t
                    JOIN episodes e ON e.rowid = t.episode_rowid
                    WHERE t.user_id = ? AND ({mentioned}) AND {where} AND {extra}
                    ORDER BY 1""",
                [
                    *params,
                    *extra_params,
                    *own_params,
                    scope.user_id,
                    *mentioned_params,
                    *params,
                    *extra_params,
                ],
            )
            if not len(allowed):
                return []
            return self._dense_ranked(vector, scope, allowed, limit)

    def episode_times(self, episode_ids: Sequence[str], scope: Scope) -> dict[str, EpisodeTimes]:
        if not episode_ids:
            return {}
        where, params = scope_sql(scope, by_key=True)
        rows: list[tuple] = []
        for chunk in _chunks(episode_ids):
            marks = ",".join("?" * len(chunk))
            rows += self._read(
                f"""SELECT e.id, e.event_time, t.start_time, t.end_time, t.granularity,
                           t.expression
                    FROM episodes e LEFT JOIN episode_times t ON t.episode_rowid = e.rowid
                    WHERE e.id IN ({marks}) AND {where} ORDER BY e.id, t.position""",
                [*chunk, *params],
            )
        return times_by_episode(rows, from_epoch)

    def scope_pages(self, scope: Scope, size: int) -> Iterator[list[Episode]]:
        # The scope written ``+col`` keeps the planner on the rowid key: pages walk the
        # table once in all, where the scope's indexes would sort its rows per page.
        where, params = scope_sql(scope, by_key=True)
        last = 0
        while True:
            rows = self._read(
                f"SELECT e.rowid, {EPISODE_COLUMNS} FROM episodes e "
                f"WHERE {where} AND e.rowid > ? ORDER BY e.rowid LIMIT ?",
                [*params, last, size],
            )
            if not rows:
                return
            yield [episode_from_row(row[1:]) for row in rows]
            last = rows[-1][0]

    def iter_episodes(self, batch_size: int = 1000) -> Iterator[tuple[Episode, np.ndarray | None]]:
        last = 0
        while True:
            rows = self._read(
                f"""SELECT e.rowid, v.embedding, {EPISODE_COLUMNS} FROM episodes e
                    LEFT JOIN vectors v ON v.episode_rowid = e.rowid
                    WHERE e.rowid > ? ORDER BY e.rowid LIMIT ?""",
                (last, batch_size),
            )
            if not rows:
                return
            for row in rows:
                vector = None if row[1] is None else np.frombuffer(row[1], dtype=np.float32)
                yield episode_from_row(row[2:]), vector
            last = rows[-1][0]

    def iter_sessions(self) -> Iterator[Session]:
        for user_id, session_id, agent_id, started_at, metadata in self._read(
            "SELECT user_id, id, agent_id, started_at, metadata FROM sessions ORDER BY user_id, id"
        ):
            yield Session(
                id=session_id,
                user_id=user_id,
                agent_id=agent_id,
                started_at=from_epoch(started_at) if started_at is not None else None,
                metadata=json.loads(metadata),
            )

    def _pending_sql(self, scope: Scope | None) -> tuple[str, list[Any]]:
        """A statement counting the episodes of ``scope`` that wait for their vector,
        led by the marks, which are few, rather than by the scope's episodes."""
        if not self._pending_table:
            return "SELECT 0", []
        if scope is None:
            return "SELECT COUNT(*) FROM pending_vectors", []
        where, params = scope_sql(scope, "w", by_key=True)
        return (
            f"""SELECT COUNT(*) FROM pending_vectors p CROSS JOIN episodes w
                ON w.rowid = p.episode_rowid WHERE p.user_id = ? AND {where}""",
            [scope.user_id, *params],
        )

    def stats(self, scope: Scope | None) -> dict[str, Any]:
        params: list[Any]
        if scope is None:
            where, params = "1", []
            # No index leads with event_time: one scan counts and finds both ends.
            ends, ends_params = "MIN(e.event_time), MAX(e.event_time)", []
        else:
            where, params = scope_sql(scope)
            # Two seeks in the scope's (user_id, event_time) index, each a subquery of
            # its own (SQLite seeks for a MIN or MAX only when it is the whole query).
            bound = scope_sql(scope, "b")[0]
            ends = (
                f"(SELECT MIN(b.event_time) FROM episodes b WHERE {bound}), "
                f"(SELECT MAX(b.event_time) FROM episodes b WHERE {bound})"
            )
            ends_params = [*params, *params]
        # Two statements, each answered from an index on (user_id, ...) alone: one
        # statement reading every column it needs read every row of the table.
        waiting, waiting_params = self._pending_sql(scope)
        episodes, first, last, pending = self._read(
            f"SELECT COUNT(*), {ends}, ({waiting}) FROM episodes e WHERE {where}",
            [*ends_params, *waiting_params, *params],
        )[0]
        users, sessions = self._read(
            f"""SELECT COUNT(DISTINCT user_id), COUNT(*) FROM (
                    SELECT DISTINCT e.user_id, COALESCE(e.session_id, '') AS session_id
                    FROM episodes e WHERE {where})""",
            params,
        )[0]
        # Every episode has one vector or one mark saying it waits for it, never both
        # (``check`` verifies it), so the vectors are counted without reading them: from
        # the scope's episodes, counted in one statement with its marks.
        vectors = episodes - pending
        # Versions exist only of updated episodes, so they lead the join: the scope's
        # episodes are looked up by id for each version instead of the reverse.
        versions = self._read(
            f"SELECT COUNT(*) FROM episode_versions v CROSS JOIN episodes e "
            f"ON e.id = v.episode_id WHERE {where}",
            params,
        )[0][0]
        fact_where, fact_params = ("1", []) if scope is None else scope_sql(fact_scope(scope), "f")
        facts, current = self._read(
            f"SELECT COUNT(*), COUNT(*) FILTER (WHERE f.superseded_at IS NULL) FROM facts f "
            f"WHERE {fact_where}",
            fact_params,
        )[0]
        whole_store = (
            {}
            if scope is not None
            else {
                "path": str(self.path),
                "file_bytes": self.path.stat().st_size if self.path.exists() else 0,
            }
        )
        return {
            "backend": self.backend,
            **whole_store,
            "episodes": episodes,
            "users": users,
            "sessions": sessions,
            "vectors": vectors,
            "versions": versions,
            "facts": facts,
            "current_facts": current,
            "first_event": from_epoch(first).isoformat() if first is not None else None,
            "last_event": from_epoch(last).isoformat() if last is not None else None,
        }
