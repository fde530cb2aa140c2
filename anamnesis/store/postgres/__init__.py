"""The PostgreSQL backend (pgvector): one module per role, the same names as the
SQLite backend's (``store``, ``reads``, ``facts``, ``lexical``, ...)."""

from __future__ import annotations

from .store import PostgresStore

__all__ = ["PostgresStore"]
