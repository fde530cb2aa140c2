"""How the command lines report library errors: one readable line and an exit code."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from contextlib import contextmanager

from rich.console import Console

from .errors import (
    AnamnesisError,
    CorruptStoreError,
    InvalidInputError,
    NotFoundError,
    StoreLockedError,
)

#: Exit codes a shell script can act on.
EXIT_ERROR = 1
EXIT_BAD_INPUT = 2
EXIT_NOT_FOUND = 3
EXIT_LOCKED = 4
EXIT_DAMAGED = 5

errors = Console(stderr=True)


def exit_code(exc: AnamnesisError) -> int:
    """The exit code for a library error."""
    if isinstance(exc, NotFoundError):
        return EXIT_NOT_FOUND
    if isinstance(exc, StoreLockedError):
        return EXIT_LOCKED
    if isinstance(exc, CorruptStoreError):
        return EXIT_DAMAGED
    if isinstance(exc, InvalidInputError):
        return EXIT_BAD_INPUT
    return EXIT_ERROR


@contextmanager
def handled() -> Iterator[None]:
    """Turn library errors into one readable line on stderr and a meaningful exit code."""
    try:
        yield
    except AnamnesisError as exc:
        errors.print(f"[bold red]error:[/] {type(exc).__name__}: {exc}", highlight=False)
        sys.exit(exit_code(exc))
