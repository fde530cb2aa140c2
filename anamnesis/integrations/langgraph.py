"""LangGraph's long-term memory store (``BaseStore``) over an Anamnesis memory.

    from anamnesis import Memory
    from anamnesis.integrations.langgraph import AnamnesisStore

    store = AnamnesisStore(Memory("agent.db"), user_label=1)
    graph = builder.compile(store=store)   # nodes: store.put(("memories", user), key, {...})

Each item is one episode of the user's scope: its namespace is the episode's session
(``langgraph:`` and the labels joined by dots), and its metadata keeps ``source``
"langgraph", ``namespace``, ``key``, ``value`` (the item as given) and ``updated_at``.
The user is ``user_id`` for every item, or with ``user_label=i`` the namespace's
``i``-th label, so ``("memories", "ana")`` with ``user_label=1`` is Ana's. The text
searched is the item's one string field, else its fields as ``name: value`` lines
(``index=[...]`` names the fields; ``index=False`` keeps the item out of searches by
meaning). A search with ``query`` runs the memory's own pipeline (hybrid recall and
its stages); filters match the value's top-level fields (``$eq``, ``$ne``, ``$gt``,
``$gte``, ``$lt``, ``$lte``). Putting an existing key updates its episode (the
previous value stays in ``history``); deleting erases it. The async forms run the
same operations on a worker thread, so the event loop never waits on the store.
Time-to-live is not supported (``supports_ttl`` is False).

Needs ``pip install "anamnesis[langgraph]"``.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterable, Mapping
from datetime import UTC, datetime
from typing import Any

try:
    from langgraph.store.base import (
        BaseStore,
        GetOp,
        Item,
        ListNamespacesOp,
        Op,
        PutOp,
        Result,
        SearchItem,
        SearchOp,
    )
except ImportError as exc:  # pragma: no cover - depends on the environment
    raise ImportError(
        "the LangGraph store needs LangGraph: pip install 'anamnesis[langgraph]'"
    ) from exc

from ..errors import InvalidInputError
from ..memory import Memory
from ..memory.async_memory import AsyncMemory
from ..types import Episode

SOURCE = "langgraph"
#: Deepest ranking asked of the memory for one search (its verbs' limit).
MAX_DEPTH = 1000
#: A search ranks this many candidates per result asked, before the namespace and
#: value filters keep the ones that match.
OVERSAMPLE = 5
_COMPARE = {
    "$eq": lambda a, b: a == b,
    "$ne": lambda a, b: a != b,
    "$gt": lambda a, b: a > b,
    "$gte": lambda a, b: a >= b,
    "$lt": lambda a, b: a < b,
    "$lte": lambda a, b: a <= b,
}


class AnamnesisStore(BaseStore):
    """A LangGraph ``BaseStore`` whose items are episodes of an Anamnesis memory."""

    def __init__(
        self,
        memory: Memory | AsyncMemory,
        *,
        user_id: str | None = None,
        user_label: int | None = None,
    ) -> None:
        if user_id is not None and user_label is not None:
            raise InvalidInputError("give user_id or user_label, not both")
        if user_label is not None and (isinstance(user_label, bool) or user_label < 0):
            raise InvalidInputError("user_label is the index of a namespace label: 0 or more")
        self.memory = memory.memory if isinstance(memory, AsyncMemory) else memory
        self.user_id = user_id
        self.user_label = user_label

    # The two methods LangGraph asks of a store; its get/put/search/... call them.

    def batch(self, ops: Iterable[Op]) -> list[Result]:
        """Run each operation in order; the results in the same order."""
        results: list[Result] = []
        for op in ops:
            if isinstance(op, GetOp):
                found = self._find(op.namespace, op.key)
                results.append(_item(found) if found else None)
            elif isinstance(op, PutOp):
                self._put(op)
                results.append(None)
            elif isinstance(op, SearchOp):
                results.append(self._search(op))
            elif isinstance(op, ListNamespacesOp):
                results.append(self._namespaces(op))
            else:
                raise InvalidInputError(f"unknown store operation {type(op).__name__}")
        return results

    async def abatch(self, ops: Iterable[Op]) -> list[Result]:
        """``batch`` on a worker thread."""
        return await asyncio.to_thread(self.batch, list(ops))

    # Scope

    def _user(self, namespace: tuple[str, ...]) -> str | None:
        if self.user_label is None:
            return self.user_id
        if len(namespace) <= self.user_label:
            raise InvalidInputError(
                f"namespace {namespace} has no label {self.user_label} to name the user "
                "(user_label): give the namespace, or a prefix, down to the user"
            )
        return namespace[self.user_label]

    def _find(self, namespace: tuple[str, ...], key: str) -> Episode | None:
        page = self.memory.get_all(
            user_id=self._user(namespace),
            session_id=_session(namespace),
            filters={"metadata": {"source": SOURCE, "key": key}},
            limit=1,
        )
        return page.items[0] if page.items else None

    def _all(self, prefix: tuple[str, ...]) -> Iterable[Episode]:
        offset: int | None = 0
        while offset is not None:
            page = self.memory.get_all(
                user_id=self._user(prefix),
                filters={"metadata": {"source": SOURCE}},
                limit=MAX_DEPTH,
                offset=offset,
            )
            yield from (e for e in page.items if _within(e, prefix))
            offset = page.next_offset

    # Operations

    def _put(self, op: PutOp) -> None:
        found = self._find(op.namespace, op.key)
        user_id = self._user(op.namespace)
        if op.value is None:
            if found is not None:
                self.memory.delete(found.id, user_id=user_id)
            return
        now = datetime.now(UTC)
        metadata = {
            "source": SOURCE,
            "namespace": list(op.namespace),
            "key": op.key,
            "value": dict(op.value),
            "indexed": op.index is not False,
            "updated_at": now.isoformat(),
        }
        text = _text(op.key, op.value, op.index)
        if found is None:
            self.memory.add(
                text,
                user_id=user_id,
                session_id=_session(op.namespace),
                metadata=metadata,
                event_time=now,
            )
        else:
            self.memory.update(found.id, content=text, metadata=metadata, user_id=user_id)

    def _search(self, op: SearchOp) -> list[SearchItem]:
        if op.query is None:
            matching = [e for e in self._all(op.namespace_prefix) if _matches(e, op.filter)]
            return [_found(e, None) for e in matching[op.offset : op.offset + op.limit]]
        depth = min(MAX_DEPTH, max(op.limit, 10) * OVERSAMPLE + op.offset)
        hits = self.memory.search(
            op.query,
            user_id=self._user(op.namespace_prefix),
            limit=depth,
            filters={"metadata": {"source": SOURCE, "indexed": True}},
        )
        found = [
            _found(hit.episode, hit.score)
            for hit in hits
            if _within(hit.episode, op.namespace_prefix) and _matches(hit.episode, op.filter)
        ]
        return found[op.offset : op.offset + op.limit]

    def _namespaces(self, op: ListNamespacesOp) -> list[tuple[str, ...]]:
        prefix: tuple[str, ...] = ()
        for condition in op.match_conditions or ():
            if condition.match_type == "prefix" and "*" not in condition.path:
                prefix = tuple(condition.path)
        seen: dict[tuple[str, ...], None] = {}
        for episode in self._all(prefix):
            namespace = tuple(episode.metadata["namespace"])
            if all(_condition(namespace, c) for c in op.match_conditions or ()):
                if op.max_depth is not None:
                    namespace = namespace[: op.max_depth]
                seen[namespace] = None
        return sorted(seen)[op.offset : op.offset + op.limit]


def _session(namespace: tuple[str, ...]) -> str:
    return f"{SOURCE}:{'.'.join(namespace)}"


def _within(episode: Episode, prefix: tuple[str, ...]) -> bool:
    namespace = tuple(episode.metadata.get("namespace") or ())
    return namespace[: len(prefix)] == prefix


def _condition(namespace: tuple[str, ...], condition: Any) -> bool:
    path = tuple(condition.path)
    part = namespace[: len(path)] if condition.match_type == "prefix" else namespace[-len(path) :]
    if len(part) != len(path):
        return False
    return all(p == "*" or p == label for p, label in zip(path, part, strict=True))


def _matches(episode: Episode, conditions: Mapping[str, Any] | None) -> bool:
    value = episode.metadata.get("value") or {}
    for field, wanted in (conditions or {}).items():
        actual = value.get(field)
        tests = wanted.items() if isinstance(wanted, dict) else [("$eq", wanted)]
        for operator, operand in tests:
            if operator not in _COMPARE:
                raise InvalidInputError(
                    f"unknown filter operator {operator!r}; use one of {', '.join(_COMPARE)}"
                )
            try:
                if not _COMPARE[operator](actual, operand):
                    return False
            except TypeError:  # None or another type against a number: no match
                return False
    return True


def _text(key: str, value: Mapping[str, Any], index: Any) -> str:
    """The text an item is found by: its one string field, else its fields as lines."""
    fields = {k: value[k] for k in index if k in value} if isinstance(index, list) else value
    strings = [v for v in fields.values() if isinstance(v, str)]
    if len(fields) == 1 and len(strings) == 1 and strings[0].strip():
        return strings[0]
    lines = [
        f"{name}: {v if isinstance(v, str) else json.dumps(v, ensure_ascii=False)}"
        for name, v in fields.items()
    ]
    return "\n".join(lines) if any(line.strip() for line in lines) else key


def _item(episode: Episode) -> Item:
    return Item(**_fields(episode))


def _found(episode: Episode, score: float | None) -> SearchItem:
    return SearchItem(**_fields(episode), score=score)


def _fields(episode: Episode) -> dict[str, Any]:
    meta = episode.metadata
    created = episode.event_time
    updated = datetime.fromisoformat(meta["updated_at"]) if meta.get("updated_at") else created
    return {
        "namespace": tuple(meta["namespace"]),
        "key": meta["key"],
        "value": meta["value"],
        "created_at": created,
        "updated_at": updated,
    }
