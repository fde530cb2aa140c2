"""Typed errors. Every failure a caller can act on has its own class here."""

from __future__ import annotations


class AnamnesisError(Exception):
    """Base class of every error Anamnesis raises on purpose."""


class InvalidInputError(AnamnesisError, ValueError):
    """The caller passed something we cannot store or interpret; nothing was written."""


class ScopeError(InvalidInputError):
    """A scope keyword is missing, unknown, or malformed."""


class ImportFormatError(InvalidInputError):
    """A file to import is malformed, truncated or not in the format named; the
    message names the place (file, conversation, line) and nothing was written."""


class NotFoundError(AnamnesisError, KeyError):
    """No episode with that id exists in the caller's scope."""

    def __str__(self) -> str:  # KeyError quotes its message; we want it plain.
        return str(self.args[0]) if self.args else "not found"


class StoreError(AnamnesisError):
    """The storage backend failed."""


class CorruptStoreError(StoreError):
    """The file is not an Anamnesis store, or it is damaged."""


class StoreFullError(StoreError):
    """The disk (or the store's size limit) is full: the write was rolled back."""


class ReadOnlyStoreError(StoreError):
    """The store can be read but not written (read-only file, directory or file system)."""


class StoreLockedError(StoreError):
    """Another process holds the write lock for longer than the busy timeout."""


class SchemaVersionError(StoreError):
    """The store was written by a newer Anamnesis than this one."""


class EmbedderMismatchError(StoreError):
    """The store was built with a different embedder than the one configured."""


class EmbedderUnavailableError(AnamnesisError):
    """The requested embedder cannot run here (package or model file missing)."""


class BackendUnavailableError(AnamnesisError):
    """The requested storage backend cannot be used (driver or server missing)."""


class ConsolidationError(AnamnesisError):
    """The background consolidation worker stopped on an error (``__cause__`` is it)."""


class IndexingError(AnamnesisError):
    """The background indexer stopped on an error (``__cause__`` is it); the episodes
    waiting for vectors stay marked, and the next open resumes them."""


class AuthenticationError(AnamnesisError):
    """A server asked for an API key and none, or no valid one, was given."""


class PermissionDeniedError(AnamnesisError):
    """The API key is valid but its scope does not reach what was asked."""


class PayloadTooLargeError(InvalidInputError):
    """A request body is larger than the server accepts; nothing was stored."""


class RequestTimeoutError(InvalidInputError):
    """A request body did not arrive whole within the server's time limit; nothing was
    stored."""


class ServerBusyError(BackendUnavailableError):
    """The server holds as many connections as it allows: retry shortly."""
