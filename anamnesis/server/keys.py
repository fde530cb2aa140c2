"""API keys of the REST server: each bound to one user (or to every user, for an admin
key), stored hashed in a small SQLite file private to its owner.

A key is ``anm_<id>_<secret>``: the id names it in listings and in the server's log;
the secret is 32 random bytes. Only the SHA-256 of the whole key is stored (a fast
hash is the right one for a random 256-bit secret: nothing is left to guess), so
the file never holds a key that could be used. ``anamnesis keys create|list|revoke``
manages the file; the server reads it on every request, so a revoked key stops
working at once.
"""

from __future__ import annotations

import hashlib
import os
import secrets
import sqlite3
import threading
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

import platformdirs

from ..errors import InvalidInputError, NotFoundError, StoreError
from ..ingest.normalise import check_id
from ..store.sqlite.store import create_private_file

#: Environment variable naming the key file.
KEYS_ENV = "ANAMNESIS_KEYS"
PREFIX = "anm_"

SCHEMA = """CREATE TABLE IF NOT EXISTS api_keys (
    id         TEXT PRIMARY KEY,
    hash       TEXT NOT NULL UNIQUE,
    name       TEXT NOT NULL,
    user_id    TEXT,
    agent_id   TEXT,
    created_at REAL NOT NULL,
    revoked_at REAL
)"""


def default_keys_path() -> Path:
    """``$ANAMNESIS_KEYS``, else ``keys.db`` in the OS data directory."""
    override = os.environ.get(KEYS_ENV)
    if override:
        return Path(override).expanduser()
    return Path(platformdirs.user_data_dir("anamnesis", appauthor=False)) / "keys.db"


@dataclass(frozen=True, slots=True)
class ApiKey:
    """A key as the file describes it (never its secret). ``user_id`` None: an admin
    key, good for every user; ``agent_id`` narrows a user key to one agent."""

    id: str
    name: str
    user_id: str | None
    agent_id: str | None
    created_at: datetime
    revoked_at: datetime | None = None

    @property
    def is_admin(self) -> bool:
        """True for a key that reaches every user."""
        return self.user_id is None


def _hash(key: str) -> str:
    return hashlib.sha256(key.encode("utf-8", "surrogatepass")).hexdigest()


def _time(value: float | None) -> datetime | None:
    return datetime.fromtimestamp(value, UTC) if value is not None else None


class KeyStore:
    """The key file: create, list, revoke, and check a presented key."""

    def __init__(self, path: str | os.PathLike[str] | None = None) -> None:
        self.path = Path(path) if path is not None else default_keys_path()
        self._lock = threading.Lock()
        try:
            if not self.path.exists():
                create_private_file(self.path)
            self._conn = sqlite3.connect(
                self.path, isolation_level=None, check_same_thread=False, timeout=10.0
            )
            self._conn.execute(SCHEMA)
        except (sqlite3.Error, OSError) as exc:
            raise StoreError(f"cannot open the key file {self.path}: {exc}") from exc

    def close(self) -> None:
        """Close the file."""
        self._conn.close()

    def create(
        self, name: str, *, user_id: str | None, agent_id: str | None = None
    ) -> tuple[ApiKey, str]:
        """A new key for ``user_id`` (None: an admin key for every user). Returns the
        key's description and the key itself, which is shown this once only."""
        user = check_id(user_id, "user_id")
        agent = check_id(agent_id, "agent_id")
        if agent is not None and user is None:
            raise InvalidInputError("an admin key reaches every user: it cannot name an agent")
        key_id = secrets.token_hex(4)
        secret = f"{PREFIX}{key_id}_{secrets.token_urlsafe(32)}"
        now = datetime.now(UTC)
        with self._lock:
            self._conn.execute(
                "INSERT INTO api_keys (id, hash, name, user_id, agent_id, created_at) "
                "VALUES (?, ?, ?, ?, ?, ?)",
                (key_id, _hash(secret), name, user, agent, now.timestamp()),
            )
        return ApiKey(key_id, name, user, agent, now), secret

    def list(self) -> list[ApiKey]:
        """Every key, revoked ones included, oldest first."""
        with self._lock:
            rows = self._conn.execute(
                "SELECT id, name, user_id, agent_id, created_at, revoked_at FROM api_keys "
                "ORDER BY created_at"
            ).fetchall()
        return [self._key(row) for row in rows]

    def revoke(self, key_id: str) -> ApiKey:
        """Revoke a key by id; it stops working at once (the row is kept for the record)."""
        with self._lock:
            self._conn.execute(
                "UPDATE api_keys SET revoked_at = ? WHERE id = ? AND revoked_at IS NULL",
                (datetime.now(UTC).timestamp(), key_id),
            )
            row = self._conn.execute(
                "SELECT id, name, user_id, agent_id, created_at, revoked_at FROM api_keys "
                "WHERE id = ?",
                (key_id,),
            ).fetchone()
        if row is None:
            raise NotFoundError(f"no key {key_id!r} in {self.path}")
        return self._key(row)

    def required(self) -> bool:
        """True once the file holds a key (revoked ones count): from then on every
        request must present a valid one."""
        with self._lock:
            return self._conn.execute("SELECT 1 FROM api_keys LIMIT 1").fetchone() is not None

    def authenticate(self, presented: str) -> ApiKey | None:
        """The live key ``presented`` is, or None (unknown, malformed or revoked)."""
        if not presented.startswith(PREFIX) or len(presented) > 200:
            return None
        with self._lock:
            row = self._conn.execute(
                "SELECT id, name, user_id, agent_id, created_at, revoked_at FROM api_keys "
                "WHERE hash = ? AND revoked_at IS NULL",
                (_hash(presented),),
            ).fetchone()
        return self._key(row) if row is not None else None

    @staticmethod
    def _key(row: tuple) -> ApiKey:
        key_id, name, user_id, agent_id, created_at, revoked_at = row
        created = _time(created_at)
        assert created is not None
        return ApiKey(key_id, name, user_id, agent_id, created, _time(revoked_at))
