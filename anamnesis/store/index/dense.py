"""An in-memory numpy matrix over the vectors of a SQLite store.

Brute-force cosine over float32 rows is exact and, at the scale of one store, faster
here than an ANN index or sqlite-vec's scan. Rows carry small integer codes for user,
agent, session, role, speaker and modality, and their event and recording times, so that
a scope and the store's filters become boolean masks, far cheaper than reading the same
rowids out of SQL (timings: study "Per dataset", "Figures from the code's comments").
They also carry their episode id and turn index, so that a ranked row's place (``places``)
is known without SQL; the store re-checks each row's scope against it, and again in SQL
when it fetches the hits.

Above a size threshold a store attaches an approximate graph (``index.ann``): a
search over a scope that is most of the index then takes the graph's candidates and
rescores them here, exactly; small scopes, small indexes and filtered searches over
few rows keep the exact scan.
"""

from __future__ import annotations

import math
import os
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import numpy as np

from ...errors import InvalidInputError
from ..base import Filters, TurnInfo
from .ann import AnnIndex

#: Below this fraction of rows in scope, score only the selected rows; above it,
#: score everything and mask (one matrix-vector product beats a large gather).
_SUBSET_FRACTION = 0.25
#: Queries scored together by ``search_many`` (a rows x block float32 matrix of scores).
_QUERY_BLOCK = 64
#: Rows scored per BLAS call in an exact scan: few enough that OpenBLAS scores them on
#: the calling thread (its helper threads stall a search when the CPUs are busy).
_SCAN_BLOCK = 1024
#: Environment variable that overrides ``AnnSettings.threshold``.
THRESHOLD_ENV = "ANAMNESIS_ANN_THRESHOLD"
#: Rows taken out by erasures are only marked (no copy of the matrix in a search)
#: until they are this share of the index; then, and whenever the index is saved,
#: the arrays are compacted.
_COMPACT_SHARE = 0.125
#: Scopes whose row positions are remembered (``_rows_in_scope``); past it they are
#: dropped and taken again as asked for.
_SCOPE_CACHE = 256
#: Graph candidates asked for per result, over the share of the index in scope (the
#: graph knows nothing of scopes, so out-of-scope rows are asked for and dropped).
_ANN_OVERSAMPLE = 1.25


@dataclass(frozen=True, slots=True)
class AnnSettings:
    """When a search uses the approximate graph instead of the exact scan.

    ``threshold``: rows the searched scope must hold (and the index, for a graph to be
    built at all); ``scope_fraction``: the share of the index the scope must hold (a
    small scope in a large store is scanned exactly over its own rows).
    """

    threshold: int = 50_000
    scope_fraction: float = 0.5

    @classmethod
    def from_environment(cls) -> AnnSettings:
        """The defaults, with ``threshold`` from ``$ANAMNESIS_ANN_THRESHOLD`` when set
        (for benchmarks that force the graph on, or off)."""
        raw = os.environ.get(THRESHOLD_ENV)
        if not raw:
            return cls()
        try:
            return cls(threshold=int(raw))
        except ValueError:
            raise InvalidInputError(
                f"{THRESHOLD_ENV}={raw!r} is not a number of rows; unset it or give an integer"
            ) from None


class _Codes:
    """Interns strings as small integers; -1 stands for None."""

    def __init__(self) -> None:
        self._codes: dict[object, int] = {}
        #: The values in code order.
        self._values: list = []

    def code(self, value: object) -> int:
        if value is None:
            return -1
        found = self._codes.get(value)
        if found is None:
            found = self._codes[value] = len(self._codes)
            self._values.append(value)
        return found

    def lookup(self, value: object) -> int | None:
        return self._codes.get(value)

    def __len__(self) -> int:
        return len(self._codes)

    def values(self) -> list:
        """The values interned so far, in code order."""
        return list(self._values)

    @classmethod
    def of(cls, values: Iterable[object]) -> _Codes:
        """Codes for ``values`` in order (the inverse of ``values``)."""
        codes = cls()
        codes._values = list(values)
        codes._codes = {value: code for code, value in enumerate(codes._values)}
        return codes


#: A row as ``DenseIndex.append`` takes it: rowid, user, agent, session, float32 blob,
#: optionally followed by its columns (``Columns``).
Row = tuple[Any, ...]
#: A row's filter and place columns as ``DenseIndex.add_columns`` takes them: role,
#: speaker, modality, event time and recording time (epoch seconds), episode id and
#: turn index.
Columns = tuple[str | None, str | None, str | None, float, float, str, int | None]
#: The columns as ``export`` gives them, and the code tables behind the first three.
#: ``episode_ids`` are UTF-8 bytes of a width that grows with the longest (``_id_bytes``).
_COLUMN_ARRAYS = {
    "roles": ("_roles", np.int32),
    "speakers": ("_speakers", np.int32),
    "modalities": ("_modalities", np.int32),
    "event_times": ("_event_times", np.float64),
    "recorded": ("_recorded", np.float64),
    "episode_ids": ("_episode_ids", np.bytes_),
    "turn_indexes": ("_turn_indexes", np.int64),
}
_COLUMN_CODES = {
    "roles": "_role_codes",
    "speakers": "_speaker_codes",
    "modalities": "_modality_codes",
}
#: ``_turn_indexes`` of a turn without an index.
_NO_TURN = int(np.iinfo(np.int64).min)
#: Longest episode id, in UTF-8 bytes, a row keeps: a longer one (ids are generated far
#: shorter) is kept as empty bytes, which ``places`` leaves to the store's SQL, as it
#: does an id that ends in a NUL character (numpy's fixed-width bytes drop them).
_MAX_ID_BYTES = 64
#: Where a row sits (``DenseIndex.places``): episode id, user, agent, and its ``TurnInfo``.
Place = tuple[str, str, str | None, TurnInfo]


#: ``DenseIndex``'s arrays with one entry per row.
_ROW_ARRAYS = (
    "_matrix",
    "_rowids",
    "_users",
    "_agents",
    "_sessions",
    "_roles",
    "_speakers",
    "_modalities",
    "_event_times",
    "_recorded",
    "_episode_ids",
    "_turn_indexes",
)


class DenseIndex:
    """Append-friendly matrix of unit vectors with per-row scope codes."""

    def __init__(self, dim: int, ann_settings: AnnSettings | None = None) -> None:
        self.dim = dim
        self.ann_settings = ann_settings or AnnSettings.from_environment()
        #: The approximate graph, when the store has one in step with this index (its
        #: epoch); None: every search is exact.
        self.ann: AnnIndex | None = None
        #: Rowids whose vectors changed since the graph took them: scored exactly.
        self.ann_stale: set[int] = set()
        #: Searches answered so far through the graph, and by the exact scan: how a
        #: benchmark checks that a forced graph was in use.
        self.graph_searches = 0
        self.exact_searches = 0
        self.clear()

    def clear(self) -> None:
        """Forget every row."""
        self._size = 0
        self._columns_size = 0
        self._matrix = np.zeros((0, self.dim), dtype=np.float32)
        self._rowids = np.zeros(0, dtype=np.int64)
        self._users = np.zeros(0, dtype=np.int32)
        self._agents = np.zeros(0, dtype=np.int32)
        self._sessions = np.zeros(0, dtype=np.int32)
        self._roles = np.zeros(0, dtype=np.int32)
        self._speakers = np.zeros(0, dtype=np.int32)
        self._modalities = np.zeros(0, dtype=np.int32)
        self._event_times = np.zeros(0, dtype=np.float64)
        self._recorded = np.zeros(0, dtype=np.float64)
        self._episode_ids = np.zeros(0, dtype="S1")
        self._turn_indexes = np.zeros(0, dtype=np.int64)
        self._user_codes = _Codes()
        self._agent_codes = _Codes()
        self._session_codes = _Codes()
        #: Each session's and each user's row positions, ascending (a scope's rows
        #: without a pass over every row): for the first ``_grouped`` rows (attached
        #: from a file, or kept by a removal), a ``_Groups``; for rows appended since,
        #: the ``_session_rows`` and ``_user_rows`` lists. ``_user_groups`` is None
        #: after a removal, or when a file did not hold it, until ``group_users``.
        self._grouped = 0
        self._session_groups: _Groups | None = None
        self._user_groups: _Groups | None = None
        self._session_rows: dict[int, list[int]] = {}
        self._user_rows: dict[int, list[int]] = {}
        self._role_codes = _Codes()
        self._speaker_codes = _Codes()
        self._modality_codes = _Codes()
        #: Each scope's live row positions, ascending, and how many rows the index held
        #: when they were taken: kept by appends (extended when next asked for) and by
        #: removals (their positions taken out), dropped by a compaction.
        self._scope_rows: dict[tuple, tuple[np.ndarray, int]] = {}
        #: Rows removed but still in the arrays (``remove``): True at their positions
        #: (rows past its end are live); None when there are none.
        self._dead: np.ndarray | None = None
        self._dead_count = 0
        self.ann = None

    @property
    def size(self) -> int:
        return self._size

    @property
    def max_rowid(self) -> int:
        return int(self._rowids[self._size - 1]) if self._size else 0

    def reserve(self, extra: int) -> None:
        """Make room for ``extra`` more rows up front (avoids repeated copying)."""
        self._grow(extra)

    def _grow(self, extra: int) -> None:
        needed = self._size + extra
        if needed <= len(self._rowids):
            return
        capacity = max(needed, 2 * len(self._rowids), 1024)

        def grown(array: np.ndarray) -> np.ndarray:
            shape = (capacity, *array.shape[1:])
            out = np.zeros(shape, dtype=array.dtype)
            out[: self._size] = array[: self._size]
            return out

        for name in _ROW_ARRAYS:
            setattr(self, name, grown(getattr(self, name)))

    def append(self, rows: Iterable[Row]) -> None:
        """Add rows (see ``Row``) in rowid order. Rows that carry their columns keep
        the columns complete, if they were; otherwise ``add_columns`` fills them
        (the store does at warm-up, or when a filtered search first needs them)."""
        rows = list(rows)
        if not rows:
            return
        self._grow(len(rows))
        if len(rows[0]) > 5 and self._columns_size == self._size:
            self._set_columns(self._size, [row[5:12] for row in rows])
        start, end = self._size, self._size + len(rows)
        blob = b"".join(row[4] for row in rows)
        self._matrix[start:end] = np.frombuffer(blob, dtype=np.float32).reshape(-1, self.dim)
        self._rowids[start:end] = [row[0] for row in rows]
        users = [self._user_codes.code(row[1]) for row in rows]
        self._users[start:end] = users
        self._agents[start:end] = [self._agent_codes.code(row[2]) for row in rows]
        sessions = [self._session_codes.code((row[1], row[3])) for row in rows]
        self._sessions[start:end] = sessions
        for position, (user, session) in enumerate(zip(users, sessions, strict=True), start):
            self._session_rows.setdefault(session, []).append(position)
            self._user_rows.setdefault(user, []).append(position)
        self._size = end

    def remove(self, rowids: Iterable[int]) -> None:
        """Take rows out (an erasure's, an archive's), the others kept in order. They
        are marked, and every search and lookup leaves them out; the arrays keep them
        until ``compact`` (at ``_COMPACT_SHARE`` of the rows, and before ``export``),
        so a removal costs what its rows cost, not a copy of the matrix."""
        positions = self.positions(np.fromiter(rowids, dtype=np.int64))
        if positions.size == 0:
            return
        if self._dead is None or self._dead.size < self._size:
            dead = np.zeros(self._size, dtype=bool)
            if self._dead is not None:
                dead[: self._dead.size] = self._dead
            self._dead = dead
        self._dead[positions] = True
        self._dead_count += int(positions.size)
        if self._dead_count > _COMPACT_SHARE * self._size:
            self.compact()
            return
        # Each remembered scope loses these positions: a binary search in its rows, not
        # a pass over every row.
        gone = np.sort(positions)
        for key, (rows, upto) in self._scope_rows.items():
            at = np.minimum(np.searchsorted(rows, gone), max(rows.size - 1, 0))
            hit = at[rows[at] == gone] if rows.size else at[:0]
            if hit.size:
                self._scope_rows[key] = (np.delete(rows, hit), upto)

    @property
    def removed(self) -> int:
        """Rows removed and not yet compacted away."""
        return self._dead_count

    def compact(self) -> None:
        """Drop the removed rows from every array (a mapped matrix is copied off its
        file into memory), so nothing of them is held or read again."""
        if self._dead is None:
            return
        keep = np.ones(self._size, dtype=bool)
        keep[: self._dead.size] = ~self._dead[: self._size]
        self._dead, self._dead_count = None, 0
        columns_size = int(keep[: self._columns_size].sum())
        for name in _ROW_ARRAYS:
            rows = np.asarray(getattr(self, name)[: self._size])  # a plain array, not a map
            setattr(self, name, np.compress(keep, rows, axis=0))
        self._size = int(keep.sum())
        self._columns_size = columns_size
        # Each session's positions, read again from the compacted codes; each user's
        # when a search first needs them.
        self._grouped = self._size
        self._session_groups = _Groups.of(self._sessions[: self._size], len(self._session_codes))
        self._user_groups = None
        self._session_rows, self._user_rows = {}, {}
        self._scope_rows.clear()

    def live_mask(self, start: int, stop: int) -> np.ndarray | None:
        """Which rows at positions ``[start, stop)`` are not removed (a copy); None
        when all of them are."""
        if self._dead is None or start >= self._dead.size:
            return None
        keep = np.ones(stop - start, dtype=bool)
        marked = self._dead[start:stop]
        keep[: marked.size] = ~marked
        return None if keep.all() else keep

    def live_rows(self, start: int, stop: int) -> tuple[np.ndarray, np.ndarray]:
        """The rowids and vectors of the rows at positions ``[start, stop)`` that are not
        removed (views when none is; else copies)."""
        rowids, vectors = self._rowids[start:stop], self._matrix[start:stop]
        keep = self.live_mask(start, stop)
        return (rowids, vectors) if keep is None else (rowids[keep], vectors[keep])

    def _live(self, positions: np.ndarray) -> np.ndarray:
        """Those of ``positions`` whose rows are not removed."""
        dead = self._dead
        if dead is None or positions.size == 0:
            return positions
        inside = positions < dead.size
        keep = np.ones(positions.size, dtype=bool)
        keep[inside] = ~dead[positions[inside]]
        return positions[keep]

    @property
    def columns_loaded(self) -> int:
        """How many rows (from the first) have their columns (``add_columns``)."""
        return self._columns_size

    def places(self, rowids: Iterable[int]) -> dict[int, Place]:
        """The place of each of ``rowids`` the index holds with its columns (``Place``):
        the same values the store's rows hold. Rows it does not hold, removed ones,
        rows without columns yet and rows whose id it does not keep are left out (the
        caller reads them from the store)."""
        positions = self.positions(np.fromiter(rowids, dtype=np.int64))
        positions = positions[positions < self._columns_size]
        if positions.size == 0:
            return {}
        # The values behind the codes, looked up inline (-1 is None: a row may have no
        # agent, speaker or role).
        users, agents = self._user_codes._values, self._agent_codes._values
        sessions = self._session_codes._values
        roles, speakers = self._role_codes._values, self._speaker_codes._values
        out: dict[int, Place] = {}
        for rowid, episode_id, user, agent, session, turn, speaker, role in zip(
            self._rowids[positions].tolist(),
            self._episode_ids[positions].tolist(),
            self._users[positions].tolist(),
            self._agents[positions].tolist(),
            self._sessions[positions].tolist(),
            self._turn_indexes[positions].tolist(),
            self._speakers[positions].tolist(),
            self._roles[positions].tolist(),
            strict=True,
        ):
            if not episode_id:
                continue
            out[rowid] = (
                episode_id.decode("utf-8"),
                users[user],
                agents[agent] if agent >= 0 else None,
                (
                    sessions[session][1],
                    turn if turn != _NO_TURN else None,
                    speakers[speaker] if speaker >= 0 else None,
                    roles[role] if role >= 0 else None,
                ),
            )
        return out

    def rowid_at(self, position: int) -> int:
        """The rowid of the row at ``position`` (0-based, in append order)."""
        return int(self._rowids[position])

    def positions(self, rowids: np.ndarray) -> np.ndarray:
        """Positions of those of ``rowids`` the index holds (rows are in rowid order)."""
        held = self._rowids[: self._size]
        rowids = np.asarray(rowids, dtype=np.int64)
        found = np.searchsorted(held, rowids)
        inside = found < self._size
        found, rowids = found[inside], rowids[inside]
        return self._live(found[held[found] == rowids])

    def rows_upto(self, rowid: int) -> int:
        """How many rows have a rowid up to ``rowid``."""
        return int(np.searchsorted(self._rowids[: self._size], rowid, side="right"))

    def rowids_from(self, position: int) -> np.ndarray:
        """Rowids of the rows from ``position`` on (a view)."""
        return self._rowids[position : self._size]

    def vectors_at(self, positions: np.ndarray | slice) -> np.ndarray:
        """The vectors of the rows at ``positions`` (a view for a slice)."""
        return self._matrix[: self._size][positions]

    def add_columns(self, rows: Iterable[Columns]) -> None:
        """Set the filter columns of the next rows that lack them, in append order.

        Rows read from the store bring their columns (``append``) and a saved matrix
        holds them (``export``); only rows attached from a file saved without them get
        them here, when the store warms up or a filtered search first needs them.
        """
        rows = list(rows)
        if self._columns_size + len(rows) > self._size:
            raise ValueError("more filter columns than rows")
        self._set_columns(self._columns_size, rows)

    def _set_columns(self, start: int, rows: list[Columns]) -> None:
        end = start + len(rows)
        self._roles[start:end] = [self._role_codes.code(row[0]) for row in rows]
        self._speakers[start:end] = [self._speaker_codes.code(row[1]) for row in rows]
        self._modalities[start:end] = [self._modality_codes.code(row[2]) for row in rows]
        self._event_times[start:end] = [row[3] for row in rows]
        self._recorded[start:end] = [row[4] for row in rows]
        ids = [_id_bytes(row[5]) for row in rows]
        width = max(map(len, ids), default=0)
        if width > self._episode_ids.dtype.itemsize:
            self._episode_ids = self._episode_ids.astype(f"S{width}")
        self._episode_ids[start:end] = ids
        self._turn_indexes[start:end] = [_NO_TURN if row[6] is None else row[6] for row in rows]
        self._columns_size = end

    def group_users(self) -> None:
        """Group the rows by user if they are not (after a removal, or attached from a
        file saved without the grouping): a stable sort of their user codes, once."""
        if self._user_groups is None and self._grouped:
            self._user_groups = _Groups.of(self._users[: self._grouped], len(self._user_codes))

    def _rows_in_scope(
        self, user_id: str, agent_id: str | None, session_id: str | None
    ) -> np.ndarray:
        """The live row positions of a scope, ascending; remembered, and extended by the
        rows appended since rather than taken again from every row."""
        key = (user_id, agent_id, session_id)
        cached = self._scope_rows.get(key)
        if cached is not None:
            rows, upto = cached
            if upto < self._size:
                more = self._scope_rows_among(upto, user_id, agent_id, session_id)
                rows = np.concatenate((rows, more)) if more.size else rows
                self._scope_rows[key] = (rows, self._size)
            return rows
        user = self._user_codes.lookup(user_id)
        if user is None:
            rows = np.zeros(0, dtype=np.int64)
        else:
            if session_id is not None:
                session = self._session_codes.lookup((user_id, session_id))
                rows = _positions(self._session_groups, self._session_rows, session)
            else:
                self.group_users()
                rows = _positions(self._user_groups, self._user_rows, user)
            if agent_id is not None:
                agent = self._agent_codes.lookup(agent_id)
                rows = rows[self._agents[rows] == (-2 if agent is None else agent)]
            rows = self._live(rows)
        if len(self._scope_rows) >= _SCOPE_CACHE:
            self._scope_rows.clear()
        self._scope_rows[key] = (rows, self._size)
        return rows

    def _scope_rows_among(
        self, start: int, user_id: str, agent_id: str | None, session_id: str | None
    ) -> np.ndarray:
        """The live positions from ``start`` on in the scope, ascending (the rows
        appended since a scope's positions were taken)."""
        user = self._user_codes.lookup(user_id)
        if user is None:
            return np.zeros(0, dtype=np.int64)
        keep = self._users[start : self._size] == user
        if session_id is not None:
            session = self._session_codes.lookup((user_id, session_id))
            keep &= self._sessions[start : self._size] == (-2 if session is None else session)
        if agent_id is not None:
            agent = self._agent_codes.lookup(agent_id)
            keep &= self._agents[start : self._size] == (-2 if agent is None else agent)
        return self._live(np.flatnonzero(keep).astype(np.int64) + start)

    @property
    def mapped(self) -> bool:
        """Whether the vectors are read from a file mapping (``attach``)."""
        return isinstance(self._matrix, np.memmap)

    def mapping(self) -> list[np.ndarray]:
        """The file mapping the vectors are read from, alone in a list (empty when they
        are in memory): for a caller that replaces the rows to release it."""
        return [self._matrix] if self.mapped else []

    def export(
        self, *, grouped: bool = True
    ) -> tuple[np.ndarray, dict[str, np.ndarray], dict[str, list]]:
        """What ``attach`` takes back: the vectors (a view), the per-row columns and each
        code table's values, for writing beside the store. ``grouped=False`` leaves out
        the rows' grouping by session and by user (a sort of every row), for the caller
        to add with ``grouping`` outside its lock: the views stay valid, since rows are
        never rewritten in place (a compaction makes new arrays). Removed rows are
        compacted away first: nothing of them is exported."""
        self.compact()
        size = self._size
        columns: dict[str, np.ndarray] = {
            "rowids": self._rowids[:size],
            "users": self._users[:size],
            "agents": self._agents[:size],
            "sessions": self._sessions[:size],
        }
        tables = {
            "users": self._user_codes.values(),
            "agents": self._agent_codes.values(),
            "sessions": [list(pair) for pair in self._session_codes.values()],
        }
        if self._columns_size == size:  # the filter columns, when every row has them
            columns.update(
                {name: getattr(self, a)[:size] for name, (a, _) in _COLUMN_ARRAYS.items()}
            )
            tables.update({name: getattr(self, a).values() for name, a in _COLUMN_CODES.items()})
        if grouped:
            columns.update(grouping(columns, tables))
        return self._matrix[:size], columns, tables

    def attach(
        self, matrix: np.ndarray, columns: dict[str, np.ndarray], tables: dict[str, list]
    ) -> None:
        """Replace every row by those ``export`` gave: ``matrix`` (``count`` rows, then
        room to append, e.g. a copy-on-write mapping of a file) and the columns."""
        count = columns["rowids"].size
        capacity = matrix.shape[0]
        if matrix.ndim != 2 or matrix.shape[1] != self.dim or capacity < count:
            raise ValueError("the vectors do not fit the rows")
        self.clear()

        def padded(values: np.ndarray | None, dtype: type) -> np.ndarray:
            # Bytes as wide as the saved values.
            wide = values.dtype if dtype is np.bytes_ and values is not None else dtype
            out: np.ndarray = np.zeros(capacity, dtype=wide)
            if values is not None:
                out[:count] = values
            return out

        self._matrix = matrix
        self._rowids = padded(columns["rowids"], np.int64)
        self._users = padded(columns["users"], np.int32)
        self._agents = padded(columns["agents"], np.int32)
        self._sessions = padded(columns["sessions"], np.int32)
        # The filter and place columns, when the file holds them all (else
        # ``add_columns`` fills them).
        held = all(name in columns for name in _COLUMN_ARRAYS)
        for name, (attribute, dtype) in _COLUMN_ARRAYS.items():
            setattr(self, attribute, padded(columns[name] if held else None, dtype))
        if held:
            for name, attribute in _COLUMN_CODES.items():
                setattr(self, attribute, _Codes.of(tables[name]))
        self._user_codes = _Codes.of(tables["users"])
        self._agent_codes = _Codes.of(tables["agents"])
        self._session_codes = _Codes.of(tuple(pair) for pair in tables["sessions"])
        self._grouped = count
        self._session_groups = _Groups.read(columns, "session")
        # Files saved before the users' grouping was kept lack it: made when first needed.
        self._user_groups = _Groups.read(columns, "user") if "user_order" in columns else None
        self._size = count
        self._columns_size = count if held else 0

    def rowids_where(
        self, user_id: str, agent_id: str | None, session_id: str | None, where: Filters
    ) -> np.ndarray:
        """Rowids in the scope whose columns pass ``where``, ascending. Metadata filters
        are not evaluated here (the rows do not hold metadata): the caller must. Every
        row needs its filter columns (``add_columns``)."""
        if self._columns_size != self._size:
            raise ValueError("filter columns are not loaded for every row")
        rows = self._rows_in_scope(user_id, agent_id, session_id)
        return self._rowids[rows[self._passing(rows, where)]]

    def _passing(self, rows: np.ndarray, where: Filters) -> np.ndarray:
        """Which of the rows at ``rows`` pass ``where``'s column filters (metadata
        aside), as a boolean array; every row needs its filter columns."""
        mask = np.ones(rows.size, dtype=bool)
        for value, codes, column in (
            (where.role, self._role_codes, self._roles),
            (where.speaker, self._speaker_codes, self._speakers),
            (where.modality, self._modality_codes, self._modalities),
        ):
            if value is not None:
                code = codes.lookup(value)
                mask &= column[rows] == (-2 if code is None else code)
        if where.not_role is not None:
            code = self._role_codes.lookup(where.not_role)
            if code is not None:
                mask &= self._roles[rows] != code
        # The same bounds as the SQL filters, on the same epoch seconds.
        if where.event_after is not None:
            mask &= self._event_times[rows] >= where.event_after.timestamp()
        if where.event_before is not None:
            mask &= self._event_times[rows] < where.event_before.timestamp()
        if where.recorded_before is not None:
            mask &= self._recorded[rows] <= where.recorded_before.timestamp()
        return mask

    def in_scope(
        self,
        positions: np.ndarray,
        user_id: str,
        agent_id: str | None,
        session_id: str | None,
        where: Filters,
    ) -> np.ndarray:
        """Which of ``positions`` (a boolean array) are rows in the scope that pass
        ``where``'s column filters (metadata filters are the caller's), read off the
        rows' own columns: no pass over the scope. Filters need every row's columns."""
        user = self._user_codes.lookup(user_id)
        if user is None:
            return np.zeros(positions.size, dtype=bool)
        keep: np.ndarray = self._users[positions] == user
        if agent_id is not None:
            agent = self._agent_codes.lookup(agent_id)
            keep &= self._agents[positions] == (-2 if agent is None else agent)
        if session_id is not None:
            session = self._session_codes.lookup((user_id, session_id))
            keep &= self._sessions[positions] == (-2 if session is None else session)
        if not where.is_empty():
            if self._columns_size != self._size:
                raise ValueError("filter columns are not loaded for every row")
            keep &= self._passing(positions, where)
        return keep

    def nearest_among(
        self, query: np.ndarray, positions: np.ndarray, groups: np.ndarray, limit: int
    ) -> tuple[np.ndarray, np.ndarray]:
        """In each group of ``positions`` (``groups``: a group number per position,
        ascending), the rows that can be among the group's ``limit`` closest to
        ``query`` when a row's cosine is its own product with it (``row @ query``, what
        one stored vector gives, to the last bit): their indexes in ``positions`` and
        those cosines.

        The blocked scan finds them: its products round differently from a single
        row's, so every row within twice the rounding of a dot product of this length
        of its group's ``limit``-th best is kept, then taken one by one."""
        if positions.size == 0 or limit <= 0:
            return np.zeros(0, dtype=np.int64), np.zeros(0)
        rows = np.asarray(self._matrix[positions])
        picked = np.arange(positions.size)
        edges = np.concatenate(([0], np.flatnonzero(np.diff(groups)) + 1, [positions.size]))
        sizes = np.diff(edges)
        if (sizes > limit).any():
            scanned = scan_cosines(rows, query)
            if np.isfinite(scanned).all():  # a NaN has no place in a partial sort
                margin = _rounding(rows, query)
                keep = np.ones(positions.size, dtype=bool)
                for start, stop in zip(edges[:-1].tolist(), edges[1:].tolist(), strict=True):
                    if stop - start > limit:
                        group = scanned[start:stop]
                        kth = np.partition(group, group.size - limit)[group.size - limit]
                        keep[start:stop] = group >= kth - margin
                picked = np.flatnonzero(keep)
        cosines = np.array([float(rows[i] @ query) for i in picked.tolist()])
        return picked, cosines

    def rowids_at(self, positions: np.ndarray) -> np.ndarray:
        """The rowids of the rows at ``positions``."""
        rowids: np.ndarray = self._rowids[positions]
        return rowids

    def search_many(
        self,
        vectors: np.ndarray,
        *,
        user_id: str,
        agent_id: str | None = None,
        limit: int,
    ) -> list[list[tuple[int, float]]]:
        """For each of ``vectors``, the ``limit`` best ``(rowid, cosine)`` pairs in the
        user (and agent) scope, best first: ``search`` for many queries at once, one
        matrix product per block of queries instead of one pass over the rows each."""
        queries = np.asarray(vectors, dtype=np.float32).reshape(-1, self.dim)
        rows = self._rows_in_scope(user_id, agent_id, None)
        if rows.size == 0 or limit <= 0:
            return [[] for _ in range(len(queries))]
        # With removed rows marked, a scope of most rows is scored whole, then picked out.
        whole = rows.size == self._size or (
            self._dead_count > 0 and rows.size >= _SUBSET_FRACTION * self._size
        )
        matrix = self._matrix[: self._size] if whole else self._matrix[rows]
        out: list[list[tuple[int, float]]] = []
        for start in range(0, len(queries), _QUERY_BLOCK):
            scores = matrix @ queries[start : start + _QUERY_BLOCK].T
            if whole and rows.size < self._size:
                scores = scores[rows]
            out.extend(self._top(rows, column, limit) for column in scores.T)
        return out

    def search(
        self,
        vector: np.ndarray,
        *,
        user_id: str,
        agent_id: str | None = None,
        session_id: str | None = None,
        allowed_rowids: np.ndarray | None = None,
        limit: int,
        exact: bool = False,
    ) -> list[tuple[int, float]]:
        """The ``limit`` best ``(rowid, cosine)`` pairs inside the scope (and among
        ``allowed_rowids``, ascending, when given), best first.

        With a graph attached (``ann``), a scope of at least ``ann_settings.threshold``
        rows and ``scope_fraction`` of the index takes its candidates from the graph;
        ``exact`` forces the exact scan."""
        if allowed_rowids is not None and session_id is None:
            # Positions of the allowed rows, kept if in scope (a binary search in the
            # scope's ascending positions): no pass over the scope.
            allowed = self.positions(allowed_rowids)
            scope = self._rows_in_scope(user_id, agent_id, None)
            at = np.minimum(np.searchsorted(scope, allowed), max(scope.size - 1, 0))
            rows = allowed[scope[at] == allowed] if scope.size else scope
        else:
            rows = self._rows_in_scope(user_id, agent_id, session_id)
            if allowed_rowids is not None:
                # By binary search in the ascending allowed rows: no sort of them.
                rows = rows[_among(self._rowids[rows], np.asarray(allowed_rowids))]
        if rows.size == 0 or limit <= 0:
            return []
        query = np.asarray(vector, dtype=np.float32)
        settings = self.ann_settings
        if (
            not exact
            and self.ann is not None
            and rows.size >= settings.threshold
            and rows.size >= settings.scope_fraction * self._size
        ):
            found = self._graph_search(query, rows, limit)
            if found is not None:
                self.graph_searches += 1
                return found
        self.exact_searches += 1
        if rows.size == self._size:  # the whole index is in scope: no gather needed
            scores = scan_cosines(self._matrix[: self._size], query)
        elif rows.size < _SUBSET_FRACTION * self._size:
            scores = scan_cosines(self._matrix[rows], query)
        else:
            scores = scan_cosines(self._matrix[: self._size], query)[rows]
        return self._top(rows, scores, limit)

    def _top(self, rows: np.ndarray, scores: np.ndarray, limit: int) -> list[tuple[int, float]]:
        """The ``limit`` best of ``rows`` by ``scores``, best first, ties in row order
        (whichever rows were scored: the graph's candidates rank as the full scan's)."""
        top = np.arange(rows.size)
        if limit < rows.size:
            # Keep every row tied with the limit-th score, then order them all.
            threshold = np.partition(scores, rows.size - limit)[rows.size - limit]
            top = np.flatnonzero(scores >= threshold)
        order = np.lexsort((rows[top], -scores[top]))[:limit]
        return [(int(self._rowids[rows[i]]), float(scores[i])) for i in top[order]]

    def _graph_search(
        self, query: np.ndarray, rows: np.ndarray, limit: int
    ) -> list[tuple[int, float]] | None:
        """``search`` through the graph: its candidates, the rows it does not hold or
        holds with an old vector, kept if among ``rows`` and rescored exactly. None when
        too few of its candidates are among ``rows`` (the caller scans exactly)."""
        assert self.ann is not None
        graph = self.ann
        k = min(limit, rows.size)
        ask = min(len(graph), math.ceil(k * _ANN_OVERSAMPLE * self._size / rows.size))
        proposed = self.positions(graph.search(query, ask))
        extra = [np.arange(self.rows_upto(graph.max_rowid), self._size)]
        if self.ann_stale:
            stale = self.positions(np.fromiter(self.ann_stale, dtype=np.int64))
            proposed = proposed[~np.isin(proposed, stale)]
            extra.append(stale)
        # Membership in the scope by binary search in its ascending rows: no pass over
        # every row (removed rows are not among them, so the graph's are dropped here).
        whole = rows.size == self._size
        if not whole:
            proposed = proposed[_among(proposed, rows)]
        if proposed.size < k and ask < len(graph):
            return None
        candidates = np.concatenate([proposed, *extra])
        if not whole:
            candidates = candidates[_among(candidates, rows)]
        # Sorted and deduplicated (np.unique would import numpy.ma on a first search).
        candidates = np.sort(candidates)
        if candidates.size:
            candidates = candidates[np.concatenate(([True], candidates[1:] != candidates[:-1]))]
        return self._top(candidates, self._matrix[candidates] @ query, limit)


@dataclass(frozen=True, slots=True)
class _Groups:
    """Row positions grouped by a code column: code ``c``'s rows, ascending, are
    ``order[offsets[c] : offsets[c + 1]]``."""

    order: np.ndarray
    offsets: np.ndarray

    @classmethod
    def of(cls, codes: np.ndarray, count: int) -> _Groups:
        """The grouping of ``codes`` (one per row, each below ``count``; a stable sort)."""
        order = np.argsort(codes, kind="stable").astype(np.int64)
        offsets = np.zeros(count + 1, dtype=np.int64)
        np.cumsum(np.bincount(codes, minlength=count), out=offsets[1:])
        return cls(order, offsets)

    @classmethod
    def read(cls, columns: dict[str, np.ndarray], name: str) -> _Groups:
        """The grouping ``export`` saved as ``<name>_order`` and ``<name>_offsets``."""
        return cls(
            np.asarray(columns[f"{name}_order"], dtype=np.int64),
            np.asarray(columns[f"{name}_offsets"], dtype=np.int64),
        )


def grouping(columns: dict[str, np.ndarray], tables: dict[str, list]) -> dict[str, np.ndarray]:
    """The rows' grouping by session and by user, as ``export`` gives it (``<name>_order``
    and ``<name>_offsets``), from its ungrouped columns and tables."""
    out: dict[str, np.ndarray] = {}
    for name, plural in (("session", "sessions"), ("user", "users")):
        groups = _Groups.of(columns[plural], len(tables[plural]))
        out[f"{name}_order"], out[f"{name}_offsets"] = groups.order, groups.offsets
    return out


def _positions(
    groups: _Groups | None, appended: dict[int, list[int]], code: int | None
) -> np.ndarray:
    """The positions of ``code``'s rows, ascending: those ``groups`` holds, then those
    appended since (None: a value no row holds)."""
    if code is None:
        return np.zeros(0, dtype=np.int64)
    parts = []
    if groups is not None and 0 <= code < groups.offsets.size - 1:
        parts.append(groups.order[groups.offsets[code] : groups.offsets[code + 1]])
    more = appended.get(code)
    if more:
        parts.append(np.array(more, dtype=np.int64))
    if not parts:
        return np.zeros(0, dtype=np.int64)
    return parts[0] if len(parts) == 1 else np.concatenate(parts)


def _among(values: np.ndarray, ascending: np.ndarray) -> np.ndarray:
    """Which of ``values`` the ascending array ``ascending`` holds, as a boolean array."""
    if not ascending.size:
        return np.zeros(values.size, dtype=bool)
    at = np.minimum(np.searchsorted(ascending, values), ascending.size - 1)
    found: np.ndarray = ascending[at] == values
    return found


def _id_bytes(episode_id: str) -> bytes:
    """``episode_id`` as ``_episode_ids`` keeps it; empty bytes when it cannot (see
    ``_MAX_ID_BYTES``)."""
    encoded = episode_id.encode("utf-8")
    if len(encoded) > _MAX_ID_BYTES or encoded.endswith(b"\0"):
        return b""
    return encoded


def _rounding(rows: np.ndarray, query: np.ndarray) -> float:
    """Twice the most by which two float32 dot products of ``query`` with one of ``rows``
    summed in different orders can differ: each is within ``n u / (1 - n u)`` of
    ``|row| |query|`` of the exact one (``n`` terms, unit roundoff ``u``), with room
    for the rounding of the norms themselves."""
    n, unit = rows.shape[1], float(np.finfo(np.float32).eps) / 2
    gamma = n * unit / (1 - n * unit)
    longest = float(np.sqrt(np.max(np.einsum("ij,ij->i", rows, rows))))
    return 4 * gamma * longest * float(np.linalg.norm(query)) * 1.01


def scan_cosines(matrix: np.ndarray, query: np.ndarray) -> np.ndarray:
    """``matrix @ query`` in blocks of ``_SCAN_BLOCK`` rows, on this thread: the numbers
    single-threaded BLAS gives (threaded BLAS may round a row's last bit otherwise)."""
    if len(matrix) <= _SCAN_BLOCK:
        small: np.ndarray = matrix @ query
        return small
    out = np.empty(len(matrix), dtype=np.result_type(matrix, query))
    for start in range(0, len(matrix), _SCAN_BLOCK):
        np.matmul(matrix[start : start + _SCAN_BLOCK], query, out=out[start : start + _SCAN_BLOCK])
    return out
