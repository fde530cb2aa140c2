"""The SQLite backend, the embedded default: one module per role, the same names as
the PostgreSQL backend's (``store``, ``reads``, ``facts``, ``lexical``, ...)."""

from __future__ import annotations

from .store import SQLiteStore

__all__ = ["SQLiteStore"]
