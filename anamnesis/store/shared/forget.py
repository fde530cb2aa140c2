"""The WHERE fragment of a ``Selection``, in either SQL dialect (see ``Store.forget``),
and the batches in which both stores archive, restore and forget many episodes."""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Any

from ...errors import NotFoundError
from ...types import DeleteCounts, Scope
from ..base import Selection, scope_clauses


class RolledBack(Exception):
    """Raised inside a dry run's transaction to roll it back, carrying its result."""

    def __init__(self, ids: list[str], counts: DeleteCounts) -> None:
        super().__init__("dry run")
        self.ids = ids
        self.counts = counts


@dataclass(frozen=True, slots=True)
class SelectionDialect:
    """How one backend spells the pieces of a selection."""

    mark: str
    #: ``e.id`` in a list passed as one parameter.
    ids_sql: str
    ids_param: Callable[[tuple[str, ...]], Any]
    time_in: Callable[[datetime], Any]
    #: ``column`` contains the parameter (exact, case-sensitive): a SQL boolean.
    contains: Callable[[str], str]
    #: A JSON column as text.
    json_text: Callable[[str], str]
    #: SQLite's ``+col`` keeps its planner on the id key when ids are given.
    key_prefix: str = ""


#: Episodes per transaction of a large ``archive``, ``restore`` or ``forget``: other
#: writers get the write lock in between its batches instead of waiting for all of it.
EPISODE_BATCH = 500


def batches(episode_ids: Sequence[str], pause: float = 0.0) -> Iterator[Selection]:
    """``episode_ids`` as selections of at most ``EPISODE_BATCH`` ids, in order, with
    ``pause`` seconds before each after the first: the write lock left to writers
    waiting for it between two transactions of a large move."""
    for start in range(0, len(episode_ids), EPISODE_BATCH):
        if start and pause:
            time.sleep(pause)
        yield Selection(episode_ids=tuple(episode_ids[start : start + EPISODE_BATCH]))


def archive_in_batches(
    episode_ids: Sequence[str],
    copy: Callable[[Selection], None],
    leave: Callable[[Selection | None], list[str]],
    pause: float = 0.0,
) -> list[str]:
    """Archive ``episode_ids`` in ``batches``, each in the two write-ahead steps:
    ``copy`` commits its verbatim copies, then ``leave`` takes the copied episodes out
    of the hot tables. Last, ``leave(None)`` finishes the moves of the whole scope a
    killed process left between the two steps. Returns the ids moved."""
    moved: list[str] = []
    for batch in batches(episode_ids, pause):
        copy(batch)
        moved += leave(batch)
    return moved + leave(None)


def restorable_sql(where: str) -> str:
    """The ids of the archived episodes ``where`` picks that are not hot again, oldest
    first: what ``restore`` brings back."""
    return f"""SELECT e.id FROM archived_episodes e WHERE {where}
                 AND NOT EXISTS (SELECT 1 FROM episodes h WHERE h.id = e.id)
               ORDER BY e.event_time, e.id"""


def restore_in_batches(
    episode_ids: Sequence[str],
    restore: Callable[[Selection], list[str]],
    sweep: Callable[[], None],
    pause: float = 0.0,
) -> list[str]:
    """Restore ``episode_ids`` in ``batches``, each one transaction of ``restore``;
    last, ``sweep`` drops the archived copies beside a hot episode (a move a killed
    process left unfinished). Returns the ids restored."""
    restored: list[str] = []
    for batch in batches(episode_ids, pause):
        restored += restore(batch)
    sweep()
    return restored


def split(ids: list[str], limit: int | None) -> tuple[list[str], list[str]]:
    """The first ``limit`` of ``ids`` and the rest (without a limit: all, and none)."""
    if limit is None or len(ids) <= limit:
        return ids, []
    return ids[:limit], ids[limit:]


#: ``erase(selection, limit, more)``: in one transaction, erase what ``selection`` picks
#: (only its first ``limit`` episodes when it picks more, and then none of the whole
#: scope's sessions and facts); ``more``: another transaction of the forget follows.
#: Returns the ids erased, the rows removed, and the ids picked but left.
Erase = Callable[[Selection, int | None, bool], tuple[list[str], DeleteCounts, list[str]]]


def forget_in_batches(
    selection: Selection, erase: Erase, pause: float = 0.0
) -> tuple[list[str], DeleteCounts]:
    """Forget what ``selection`` picks, ``EPISODE_BATCH`` episodes per transaction,
    ``pause`` seconds apart: each transaction leaves its episodes wholly erased and
    the rest intact. After the batches, the selection is erased once more: that takes
    what was added meanwhile and, last, a whole scope's sessions and facts. Returns
    the ids and the rows removed over all transactions."""
    ids: list[str] = []
    counts = DeleteCounts()
    while True:
        done, removed, rest = erase(selection, EPISODE_BATCH, False)
        ids += done
        counts += removed
        if not rest:
            return list(dict.fromkeys(ids)), counts
        for start in range(0, len(rest), EPISODE_BATCH):
            time.sleep(pause)
            batch = tuple(rest[start : start + EPISODE_BATCH])
            done, removed, _ = erase(replace(selection, episode_ids=batch), None, True)
            ids += done
            counts += removed
        time.sleep(pause)


def selection_sql(scope: Scope, selection: Selection, d: SelectionDialect) -> tuple[str, list[Any]]:
    """``scope`` AND every condition of ``selection``, over ``episodes e``."""
    by_key = selection.episode_ids is not None
    where, params = scope_clauses(scope, "e", d.mark, prefix=d.key_prefix if by_key else "")
    clauses = [where]
    if selection.episode_ids is not None:
        clauses.append(d.ids_sql)
        params.append(d.ids_param(selection.episode_ids))
    if selection.event_after is not None:
        clauses.append(f"e.event_time >= {d.mark}")
        params.append(d.time_in(selection.event_after))
    if selection.event_before is not None:
        clauses.append(f"e.event_time < {d.mark}")
        params.append(d.time_in(selection.event_before))
    if selection.containing is not None:
        text = selection.containing
        # Metadata is JSON: the text may be stored escaped (non-ASCII as \uXXXX).
        forms = list(dict.fromkeys([text, json.dumps(text)[1:-1]]))
        in_metadata = " OR ".join(d.contains(d.json_text("{}")) for _ in forms)
        current = " OR ".join(
            [d.contains("e.content"), d.contains("COALESCE(e.speaker, '')"), in_metadata]
        ).replace("{}", "e.metadata")
        prior = " OR ".join([d.contains("v.content"), in_metadata]).replace("{}", "v.metadata")
        clauses.append(
            f"({current} OR EXISTS (SELECT 1 FROM episode_versions v "
            f"WHERE v.episode_id = e.id AND ({prior})))"
        )
        params += [text, text, *forms, text, *forms]
    return " AND ".join(clauses), params


SQLITE_SELECTION = SelectionDialect(
    mark="?",
    ids_sql="e.id IN (SELECT value FROM json_each(?))",
    ids_param=lambda ids: json.dumps(list(ids)),
    time_in=lambda moment: moment.timestamp(),
    contains=lambda column: f"instr({column}, ?) > 0",
    json_text=lambda column: column,
    key_prefix="+",
)

POSTGRES_SELECTION = SelectionDialect(
    mark="%s",
    ids_sql="e.id = ANY(%s)",
    ids_param=list,
    time_in=lambda moment: moment,
    contains=lambda column: f"strpos({column}, %s) > 0",
    json_text=lambda column: f"{column}::text",
)


def drop_sessions(
    conn: Any, found: Sequence[Sequence[Any]], whole_scope: Scope | None, mark: str
) -> int:
    """Remove the sessions of a whole scope, or those that the deleted episodes
    (``(id, user_id, session_id)`` rows) left with no hot or archived episode."""
    p = mark
    if whole_scope is not None:
        where, params = scope_clauses(
            Scope(whole_scope.user_id, whole_scope.agent_id, None), "s", p
        )
        if whole_scope.session_id is not None:
            where += f" AND s.id = {p}"
            params.append(whole_scope.session_id)
        return int(conn.execute(f"DELETE FROM sessions AS s WHERE {where}", params).rowcount)
    emptied = sorted({(row[1], row[2]) for row in found if row[2] is not None})
    return sum(
        conn.execute(
            f"""DELETE FROM sessions AS s WHERE s.user_id = {p} AND s.id = {p}
                 AND NOT EXISTS (SELECT 1 FROM episodes e
                                 WHERE e.user_id = {p} AND e.session_id = {p})
                 AND NOT EXISTS (SELECT 1 FROM archived_episodes e
                                 WHERE e.user_id = {p} AND e.session_id = {p})""",
            (user_id, session_id, user_id, session_id, user_id, session_id),
        ).rowcount
        for user_id, session_id in emptied
    )


class DeleteVerbs:
    """``delete_episode`` and ``delete_scope`` as the two simplest forgets."""

    def forget(
        self, scope: Scope, selection: Selection, *, dry_run: bool = False
    ) -> tuple[list[str], DeleteCounts]:  # pragma: no cover - provided by each store
        raise NotImplementedError

    def delete_episode(self, episode_id: str, scope: Scope) -> DeleteCounts:
        ids, counts = self.forget(scope, Selection(episode_ids=(episode_id,)))
        if not ids:
            raise NotFoundError(f"no episode {episode_id!r} in this scope")
        return counts

    def delete_scope(self, scope: Scope) -> DeleteCounts:
        return self.forget(scope, Selection())[1]
