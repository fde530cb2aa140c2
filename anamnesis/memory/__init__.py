"""The ``Memory`` facade and its asyncio twin, ``AsyncMemory``.

``memory`` opens everything and gathers the verb groups (``writes``, ``reads``,
``facts``, ``lifecycle``, ``gate``, ``maintenance``; ``derived`` for the views), which
share the state declared in ``state``. ``async_memory`` runs the same verbs on threads;
its verbs are generated (``async_verbs``, by scripts/generate_verbs.py).
"""

from .memory import Memory, ProgressCallback

__all__ = ["Memory", "ProgressCallback"]
