"""Which thread a verb runs on in ``AsyncMemory``: ``@writes`` on the writer, in
order; ``@maintains`` on the maintenance thread, beside the writer; ``@reads`` on a
reader, in parallel.

Every public verb of ``Memory`` carries one of the three; scripts/generate_verbs.py
reads them when it writes the other surfaces' verbs, and refuses a verb with none.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

F = TypeVar("F", bound=Callable[..., object])

#: The attribute the two decorators set.
THREAD = "__anamnesis_thread__"


def writes(verb: F) -> F:
    """Mark a verb that changes the store: ``AsyncMemory`` runs it on the writer thread."""
    setattr(verb, THREAD, "write")
    return verb


def maintains(verb: F) -> F:
    """Mark a verb that changes the store and may run long over a large scope (it moves
    episodes in batches, or calls an LLM): ``AsyncMemory`` runs it on the maintenance
    thread, so that the writes awaited meanwhile do not wait for it to end."""
    setattr(verb, THREAD, "maintain")
    return verb


def reads(verb: F) -> F:
    """Mark a verb that only reads: ``AsyncMemory`` runs it on a reader thread."""
    setattr(verb, THREAD, "read")
    return verb


def thread_of(verb: Callable[..., object]) -> str:
    """``"write"``, ``"maintain"`` or ``"read"``, as the verb's decorator said."""
    thread = getattr(verb, THREAD, None)
    if thread is None:
        raise TypeError(
            f"{verb.__qualname__} is a public verb without @reads, @writes or @maintains"
        )
    return str(thread)
