"""Storage backends behind one Store protocol."""

from __future__ import annotations

from .base import Candidate, Filters, Store


def open_url(url: str, *, dim: int, durability: str = "normal") -> Store:
    """A store for a database URL (``postgresql://...``)."""
    from ..errors import BackendUnavailableError

    if url.startswith(("postgresql://", "postgres://")):
        try:
            from .postgres import PostgresStore
        except ImportError as exc:
            raise BackendUnavailableError(
                f"the PostgreSQL backend needs psycopg: pip install 'anamnesis[postgres]' ({exc})"
            ) from exc
        return PostgresStore(url, dim=dim, durability=durability)
    raise BackendUnavailableError(f"unsupported database URL {url.split(':', 1)[0]}://...")


__all__ = ["Candidate", "Filters", "Store", "open_url"]
