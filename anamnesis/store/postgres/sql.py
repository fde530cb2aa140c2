"""SQL fragments for the PostgreSQL store: scope, filters, text-search queries, rows.

Every fragment binds values as parameters (``%s``); only fixed column names and
aliases are interpolated.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from typing import Any

from psycopg.types.json import Json, Jsonb

from ...errors import InvalidInputError
from ...types import Episode, Scope
from ..base import Filters, episode_of, filter_clauses, scope_clauses
from .lexical import TEXT_SEARCH_CONFIG

EPISODE_COLUMNS = (
    "e.id, e.user_id, e.agent_id, e.session_id, e.role, e.speaker, e.content, e.modality, "
    "e.event_time, e.recorded_at, e.metadata, e.content_hash, e.turn_index, e.version"
)

#: At most this many terms go into one text-search query; the rest are dropped (a
#: query of hundreds of words is a pasted document, not a question).
MAX_QUERY_TERMS = 64


def episode(row: Sequence[Any]) -> Episode:
    """An Episode from the columns of ``EPISODE_COLUMNS`` (psycopg reads them all)."""
    return episode_of(row)


def scope_sql(scope: Scope, alias: str = "e") -> tuple[str, list[Any]]:
    """The WHERE fragment that confines a query to ``scope``."""
    return scope_clauses(scope, alias, "%s")


def filters_sql(filters: Filters, alias: str = "e") -> tuple[str, list[Any]]:
    """The WHERE fragment for ``filters`` (``TRUE`` when there are none).

    A metadata filter is a jsonb containment test per key: ``{"k": v}`` matches rows
    whose metadata has key ``k`` equal to ``v`` (for scalars, as SQLite's
    ``json_extract(...) = v``, except that ``true`` does not equal ``1``; for arrays,
    containment rather than equality).
    """
    clauses, params = filter_clauses(
        filters, alias, "%s", not_equal="IS DISTINCT FROM", stored_time=lambda time: time
    )
    for key, value in filters.metadata.items():
        clauses.append(f"({alias}.metadata::jsonb) @> %s")
        params.append(Jsonb({key: value}))
    return (" AND ".join(clauses) or "TRUE"), params


def prepare(filters: Filters) -> bool | None:
    """psycopg's ``prepare`` for a statement that tests ``filters``.

    The metadata index serves a rare value well and a common one badly, and the
    planner tells them apart by the value. A plan cached for a prepared statement
    (psycopg prepares one after a few runs; PostgreSQL may then keep a generic plan)
    does not see the value and takes every value for a rare one: it would read all
    the rows holding a common value through the index, and score or sort them all.
    So a statement testing metadata is planned with its values each time (False);
    any other keeps psycopg's default (None).
    """
    return False if filters.metadata else None


def tsquery_sql(terms: Sequence[str]) -> tuple[str, list[Any]]:
    """A tsquery expression that ORs the terms, each parsed as plain text.

    ``plainto_tsquery`` stems each term with the column's configuration and drops
    stopwords, so a term never has to be escaped; a term that is only stopwords or
    punctuation contributes nothing.
    """
    kept = list(terms)[:MAX_QUERY_TERMS]
    part = f"plainto_tsquery('{TEXT_SEARCH_CONFIG}'::regconfig, %s)"
    return "(" + " || ".join([part] * len(kept)) + ")", kept


def _dumps(value: Any) -> str:
    # As SQLite stores it: non-ASCII kept as is, key order kept.
    return json.dumps(value, ensure_ascii=False)


def check_storable(text: str, what: str) -> None:
    """InvalidInputError if PostgreSQL cannot store ``text`` (it rejects NUL)."""
    if "\x00" in text:
        raise InvalidInputError(
            f"{what} contains a NUL character (\\x00), which PostgreSQL cannot store; "
            "remove it, or use the SQLite backend"
        )


def json_param(value: dict[str, Any], what: str) -> Json:
    """Metadata as a json parameter, refusing \\u0000, which jsonb (used by filters) cannot hold."""
    if "\\u0000" in json.dumps(value):
        raise InvalidInputError(
            f"{what} contains a NUL character (\\u0000), which PostgreSQL's jsonb cannot "
            "store; remove it, or use the SQLite backend"
        )
    return Json(value, dumps=_dumps)


def redact_url(url: str) -> str:
    """The URL without its password, for messages and stats."""
    return re.sub(r"(://[^:/@]+):[^@/]*@", r"\1:***@", url)
