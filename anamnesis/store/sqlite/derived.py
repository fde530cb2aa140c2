"""``derived_nearest`` for the SQLite store: a derived item's cited turns scored off the
dense index, not read one by one.

A profile cites every turn behind its facts, a number that grows with the user's life;
reading them and their vectors through SQL at each search costs in proportion. Here each
item's cited rowids are kept (``_CitedRows``) while nothing they depend on changes, the
scope and filters are checked on the dense index's own columns (every row carries its
user, agent, session, role, speaker, modality and times), the cosines come from its
matrix, and the few rows kept are checked in SQL once more, which also gives their
order on ties. The answer is the shared path's (``DerivedReads.derived_nearest``) to
the last bit; that path answers whenever this one cannot: metadata filters (SQL's
alone), or a cited turn still waiting for its vector.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ...types import Scope
from ..base import Filters, fact_scope
from ..index.dense import DenseIndex
from ..shared.derived import DERIVED_EPOCH, DerivedReads, closest
from .driver import sqlite3
from .sql import filters_sql, scope_sql

#: Items whose cited rowids ``_CitedRows`` keeps; past it, it starts again.
CITED_ITEMS = 4096


@dataclass
class _CitedRows:
    """Each asked item's cited episodes as rowids, valid while ``DERIVED_EPOCH`` (moved by
    every change of the items' sources) and ``vector_epoch`` (moved by every delete;
    until one, a row keeps its rowid) stay the same. A cited id with no row (archived)
    is kept aside with the highest rowid when it was looked for: a restore gives it a
    new row above that without a delete, so it is looked for again once rows have been
    added."""

    epochs: tuple[str | None, str | None]
    #: (user, agent, item id) -> (rowids ascending, ids without a row, highest rowid then).
    items: dict[tuple[str, str | None, str], tuple[np.ndarray, tuple[str, ...], int]] = field(
        default_factory=dict
    )


class SQLiteDerived:
    """``derived_nearest`` for ``SQLiteStore`` (uses its connection, lock and dense index)."""

    _lock: Any
    _conn: sqlite3.Connection
    _dense: DenseIndex
    _dense_epoch: str | None
    _cited: _CitedRows | None = None

    def _refresh_dense(self) -> None:  # pragma: no cover - SQLiteReads'
        raise NotImplementedError

    def _load_dense_columns(self) -> None:  # pragma: no cover - SQLiteReads'
        raise NotImplementedError

    def derived_nearest(
        self,
        item_ids: Sequence[str],
        vector: np.ndarray,
        scope: Scope,
        filters: Filters,
        limit: int,
    ) -> dict[str, list[tuple[str, float]]]:
        if limit <= 0 or not item_ids:
            return {}
        found = None
        if not filters.metadata:
            with self._lock:
                found = self._nearest_in_index(item_ids, vector, scope, filters, limit)
        if found is None:
            return DerivedReads.derived_nearest(
                self,  # type: ignore[arg-type]
                item_ids,
                vector,
                scope,
                filters,
                limit,
            )
        return found

    def _nearest_in_index(
        self,
        item_ids: Sequence[str],
        vector: np.ndarray,
        scope: Scope,
        filters: Filters,
        limit: int,
    ) -> dict[str, list[tuple[str, float]]] | None:
        """``derived_nearest`` off the dense index; None when a cited turn in the store has
        no row there (its vector is pending), or SQL disagrees with the index's columns
        (the shared path answers)."""
        self._refresh_dense()
        if not filters.is_empty():
            self._load_dense_columns()
        dense = self._dense
        cited = self._cited_rowids(item_ids, scope)
        names = list(cited)
        rowids = np.concatenate([cited[name] for name in names]) if names else np.zeros(0, int)
        groups = np.repeat(np.arange(len(names)), [cited[name].size for name in names])
        positions = dense.positions(rowids)
        if positions.size < rowids.size:
            return None
        inside = dense.in_scope(positions, scope.user_id, scope.agent_id, scope.session_id, filters)
        positions, groups = positions[inside], groups[inside]
        found, cosines = dense.nearest_among(vector, positions, groups, limit)
        owners = groups[found].tolist()
        kept = dense.rowids_at(positions[found]).tolist()
        # The rows kept, checked in SQL too (scope and filters), with what orders them
        # on ties as the shared path does: oldest first, then by id.
        where, params = scope_sql(scope, by_key=True)
        extra, extra_params = filters_sql(filters)
        unique = sorted(set(kept))
        rows: list[tuple[int, str, float]] = []
        for start in range(0, len(unique), 500):
            chunk = unique[start : start + 500]
            rows += self._conn.execute(
                f"""SELECT e.rowid, e.id, e.event_time FROM episodes e
                    WHERE e.rowid IN ({",".join("?" * len(chunk))}) AND {where} AND {extra}""",
                [*chunk, *params, *extra_params],
            ).fetchall()
        if len(rows) < len(unique):
            return None
        rows.sort(key=lambda row: (row[2], row[1]))
        ids = {rowid: episode_id for rowid, episode_id, _ in rows}
        scored: list[dict[str, float]] = [{} for _ in names]
        for owner, rowid, cosine in zip(owners, kept, cosines.tolist(), strict=True):
            scored[owner][ids[rowid]] = cosine
        oldest_first = [episode_id for _, episode_id, _ in rows]
        return {
            name: closest([i for i in oldest_first if i in scored[j]], scored[j], limit)
            for j, name in enumerate(names)
            if scored[j]
        }

    def _cited_rowids(self, item_ids: Sequence[str], scope: Scope) -> dict[str, np.ndarray]:
        """The rowids of the episodes each of ``item_ids`` cites, ascending: only items of
        the scope's user and agent (an item elsewhere cites none here), kept between
        searches (``_CitedRows``)."""
        (derived_epoch,) = self._conn.execute(
            "SELECT (SELECT value FROM meta WHERE key = ?)", (DERIVED_EPOCH,)
        ).fetchone()  # read before the sources: never newer than them
        epochs = (derived_epoch, self._dense_epoch)
        if (
            self._cited is None
            or self._cited.epochs != epochs
            or len(self._cited.items) > CITED_ITEMS
        ):
            self._cited = _CitedRows(epochs)
        cited = self._cited.items
        home = fact_scope(scope)
        keys = {item_id: (home.user_id, home.agent_id, item_id) for item_id in item_ids}
        unread = [item_id for item_id, key in keys.items() if key not in cited]
        if any(cited[key][1] for key in keys.values() if key in cited):
            top = self._top_rowid()
            for key in keys.values():
                if key in cited and cited[key][1] and cited[key][2] < top:
                    rowids, absent, _ = cited[key]
                    found = dict(self._rowids_of(list(absent)))
                    more = np.array(list(found.values()), dtype=np.int64)
                    cited[key] = (
                        np.sort(np.concatenate((rowids, more))),
                        tuple(i for i in absent if i not in found),
                        top,
                    )
        if unread:
            top = self._top_rowid()
            where, params = scope_sql(home, alias="d", by_key=True)
            sources: dict[str, tuple[list[int], list[str]]] = {i: ([], []) for i in unread}
            for start in range(0, len(unread), 500):
                chunk = unread[start : start + 500]
                for item_id, episode_id, rowid in self._conn.execute(
                    f"""SELECT s.item_id, s.episode_id, e.rowid FROM derived_sources s
                        JOIN derived_items d ON d.id = s.item_id
                        LEFT JOIN episodes e ON e.id = s.episode_id
                        WHERE s.item_id IN ({",".join("?" * len(chunk))}) AND {where}""",
                    [*chunk, *params],
                ):
                    if rowid is None:
                        sources[item_id][1].append(episode_id)
                    else:
                        sources[item_id][0].append(rowid)
            for item_id, (found_rows, not_found) in sources.items():
                ordered = np.sort(np.array(found_rows, dtype=np.int64))
                cited[keys[item_id]] = (ordered, tuple(not_found), top)
        return {item_id: cited[key][0] for item_id, key in keys.items()}

    def _top_rowid(self) -> int:
        (top,) = self._conn.execute("SELECT COALESCE(MAX(rowid), 0) FROM episodes").fetchone()
        return int(top)

    def _rowids_of(self, episode_ids: list[str]) -> list[tuple[str, int]]:
        """``(id, rowid)`` of those of ``episode_ids`` that have a row."""
        found: list[tuple[str, int]] = []
        for start in range(0, len(episode_ids), 500):
            chunk = episode_ids[start : start + 500]
            marks = ",".join("?" * len(chunk))
            found += self._conn.execute(
                f"SELECT e.id, e.rowid FROM episodes e WHERE e.id IN ({marks})", chunk
            ).fetchall()
        return found
