"""Validating and normalising what callers hand to ``add``.

Everything here is pure: it turns loose input (strings, message dicts, datetimes in
several spellings) into checked values, or raises InvalidInputError before anything
is written.
"""

from __future__ import annotations

import hashlib
import json
import operator
import re
import secrets
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from ..errors import InvalidInputError, ScopeError
from ..types import MODALITIES

#: Longest content accepted for one episode. Longer text should be split by the caller
#: (an episode is one event; a book is many).
MAX_CONTENT_CHARS = 200_000
#: Longest user/agent/session id.
MAX_ID_CHARS = 256
MESSAGE_KEYS = frozenset(
    {"role", "speaker", "content", "event_time", "metadata", "modality", "session_id"}
)
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")
#: The integer range every backend can store and compare (SQLite INTEGER and
#: PostgreSQL bigint are both signed 64-bit): the bounds of every integer argument.
MIN_INT = -(2**63)
MAX_INT = 2**63 - 1


@dataclass(frozen=True, slots=True)
class Message:
    """One validated message, ready to become an episode."""

    content: str
    role: str | None
    speaker: str | None
    event_time: datetime | None
    metadata: dict[str, Any]
    modality: str
    session_id: str | None


def new_id(prefix: str = "ep") -> str:
    """A time-ordered unique id: milliseconds, then 64 random bits."""
    return f"{prefix}_{time.time_ns() // 1_000_000:012x}{secrets.token_hex(8)}"


def embedding_text(content: str, speaker: str | None) -> str:
    """The text the dense index embeds for an episode: ``"Speaker: content"``.

    Naming the speaker lets questions about a person ("What did Caroline paint?") meet
    that person's turns in vector space (measured on a LoCoMo slice: study "Per dataset",
    "Figures from the code's comments"). Without a speaker, the content alone.
    """
    return f"{speaker}: {content}" if speaker else content


def content_hash(content: str, speaker: str | None = None) -> str:
    """SHA-256 of the embedded text: equal hashes share one vector, never re-embedded."""
    return hashlib.sha256(embedding_text(content, speaker).encode("utf-8")).hexdigest()


def check_text(value: object, what: str = "content") -> str:
    """A non-empty, valid-UTF-8, not-too-long string, or InvalidInputError."""
    value = as_text(value, what)
    _check_unicode(value, what)
    if not value.strip():
        raise InvalidInputError(f"{what} is empty")
    if len(value) > MAX_CONTENT_CHARS:
        raise InvalidInputError(
            f"{what} has {len(value):,} characters; the limit is {MAX_CONTENT_CHARS:,}. "
            "Split long documents into several episodes."
        )
    return value


def as_text(value: object, what: str) -> str:
    """``value`` as a string: a string as it is, bytes decoded as UTF-8."""
    if isinstance(value, bytes):
        try:
            value = value.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise InvalidInputError(f"{what} is not valid UTF-8: {exc}") from exc
    if not isinstance(value, str):
        raise InvalidInputError(f"{what} must be a string, not {type(value).__name__}")
    return value


def check_id(value: object, what: str, *, required: bool = False) -> str | None:
    """A scope id: a short printable string, or None when optional and absent."""
    if value is None:
        if required:
            raise ScopeError(f"{what} is required")
        return None
    if not isinstance(value, str):
        raise ScopeError(f"{what} must be a string, not {type(value).__name__}")
    if not value.strip() or len(value) > MAX_ID_CHARS or _CONTROL.search(value):
        raise ScopeError(
            f"{what} must be 1-{MAX_ID_CHARS} printable characters, got {value[:40]!r}"
        )
    try:
        value.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise ScopeError(f"{what} contains lone surrogates, which are not text: {exc}") from exc
    return value


def check_episode_id(value: object) -> str:
    """An episode id as a caller passes it: a short string of valid text."""
    if not isinstance(value, str):
        raise InvalidInputError(f"episode id must be a string, not {type(value).__name__}")
    if not value or len(value) > MAX_ID_CHARS:
        raise InvalidInputError(f"episode id must be 1-{MAX_ID_CHARS} characters")
    _check_unicode(value, "episode id")
    return value


def parse_time(value: object, what: str = "event_time") -> datetime | None:
    """A timezone-aware UTC datetime from a datetime, an ISO-8601 string or epoch seconds.

    Naive datetimes and strings without an offset are taken to be UTC.
    """
    if value is None:
        return None
    if isinstance(value, bool):
        raise InvalidInputError(f"{what} must be a datetime, ISO string or epoch seconds")
    if isinstance(value, int | float):
        try:
            return datetime.fromtimestamp(float(value), tz=UTC)
        except (OverflowError, OSError, ValueError) as exc:
            raise InvalidInputError(f"{what} {value!r} is out of range") from exc
    if isinstance(value, str):
        check_name(value, what, limit=MAX_ID_CHARS)
        value = _parse_date_string(value, what)
    if not isinstance(value, datetime):
        raise InvalidInputError(
            f"{what} must be a datetime, ISO string or epoch seconds, not {type(value).__name__}"
        )
    if value.tzinfo is None:
        value = value.replace(tzinfo=UTC)
    try:
        return value.astimezone(UTC)
    except (OverflowError, ValueError) as exc:
        raise InvalidInputError(f"{what} {value!r} is out of range") from exc


def require_time(value: object, what: str) -> datetime:
    """``parse_time`` for a time that must be given."""
    parsed = parse_time(value, what)
    if parsed is None:
        raise InvalidInputError(f"{what} is required")
    return parsed


def check_name(value: object, what: str, *, limit: int = MAX_ID_CHARS) -> str:
    """A short single-line string (a speaker, a role, a predicate), valid Unicode."""
    if not isinstance(value, str):
        raise InvalidInputError(f"{what} must be a string, not {type(value).__name__}")
    if len(value) > limit or _CONTROL.search(value):
        raise InvalidInputError(
            f"{what} must be at most {limit} characters on one line, got {value[:40]!r}"
        )
    _check_unicode(value, what)
    return value


def check_int(value: object, what: str, *, minimum: int, maximum: int = MAX_INT) -> int:
    """An integer from ``minimum`` to ``maximum`` (inclusive): every integer argument of
    every verb goes through here. A bool is refused (``True`` is not a count); an
    integer-like object (a numpy integer) is taken as the int it stands for."""
    number: int | None = None
    if not isinstance(value, bool | float | str | bytes):
        try:
            number = operator.index(value)  # type: ignore[arg-type]
        except TypeError:
            number = None
    if number is None or not minimum <= number <= maximum:
        raise InvalidInputError(
            f"{what} must be an integer from {minimum} to {maximum}, got {value!r}"
        )
    return number


def check_seconds(value: object, what: str) -> float:
    """A positive, finite number of seconds that a thread can wait (not a bool)."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise InvalidInputError(f"{what} must be a number of seconds, got {value!r}")
    if not 0 < value <= threading.TIMEOUT_MAX:
        raise InvalidInputError(
            f"{what} must be a number of seconds from 0 (excluded) to "
            f"{threading.TIMEOUT_MAX:g}, got {value!r}"
        )
    return float(value)


def check_count(value: object, what: str, *, minimum: int = 0) -> int:
    """A stored count (a turn index, a version): an integer (not a bool) of at least
    ``minimum``, with room below ``MAX_INT`` for the store to count on from it."""
    return check_int(value, what, minimum=minimum, maximum=2**62)


def _check_unicode(value: str, what: str) -> None:
    try:
        value.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise InvalidInputError(
            f"{what} contains characters that are not valid Unicode (lone surrogates): {exc}"
        ) from exc


def _parse_date_string(text: str, what: str) -> datetime:
    """ISO-8601 first; then a written date with day, month and year ("8 May, 2023")."""
    try:
        return datetime.fromisoformat(text.strip().replace("Z", "+00:00"))
    except ValueError:
        pass
    import dateparser  # slow to import; only needed for non-ISO strings

    parsed = dateparser.parse(
        text,
        languages=["en"],
        settings={
            "REQUIRE_PARTS": ["day", "month", "year"],
            "RETURN_AS_TIMEZONE_AWARE": True,
            "TIMEZONE": "UTC",
            "TO_TIMEZONE": "UTC",
        },
    )
    if parsed is None:
        raise InvalidInputError(
            f"{what} {text!r} is not a date: use ISO-8601 (2024-05-08T13:56:00Z) "
            "or a written date with day, month and year (1:56 pm on 8 May, 2023)"
        )
    return parsed


def check_metadata(value: object) -> dict[str, Any]:
    """A JSON-serialisable dict with string keys."""
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise InvalidInputError(f"metadata must be a dict, not {type(value).__name__}")
    try:
        text = json.dumps(dict(value), ensure_ascii=False, allow_nan=False)
        text.encode("utf-8")
        return json.loads(text)
    except (TypeError, ValueError, RecursionError) as exc:
        raise InvalidInputError(f"metadata must be JSON-serialisable text: {exc}") from exc


def check_modality(value: object) -> str:
    """One of the known modalities."""
    if value is None:
        return "text"
    if value not in MODALITIES:
        raise InvalidInputError(f"modality must be one of {list(MODALITIES)}, got {value!r}")
    return str(value)


def to_message(item: object, defaults: Mapping[str, Any]) -> Message:
    """One message from a string or a ``{role|speaker, content, ...}`` dict."""
    if isinstance(item, str | bytes):
        item = {"content": item}
    if not isinstance(item, Mapping):
        raise InvalidInputError(
            f"a message must be a string or a dict with 'content', not {type(item).__name__}"
        )
    unknown = set(item) - MESSAGE_KEYS
    if unknown:
        raise InvalidInputError(
            f"unknown message field(s) {sorted(unknown)}; allowed: {sorted(MESSAGE_KEYS)}"
        )
    if "content" not in item:
        raise InvalidInputError("a message needs a 'content' field")
    merged = {**defaults, **{k: v for k, v in item.items() if v is not None}}
    role = merged.get("role")
    speaker = merged.get("speaker")
    for name, value in (("role", role), ("speaker", speaker)):
        if value is not None:
            check_name(value, name)
    return Message(
        content=check_text(merged["content"]),
        role=role,
        speaker=speaker,
        event_time=parse_time(merged.get("event_time")),
        metadata=check_metadata(merged.get("metadata")),
        modality=check_modality(merged.get("modality")),
        session_id=check_id(merged.get("session_id"), "session_id"),
    )
