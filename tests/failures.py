"""Injected failures shared by the tests of interrupted work."""

from __future__ import annotations

from typing import Any

import pytest


def cut_power_on_write(monkeypatch: pytest.MonkeyPatch, store: Any, at: int = 3) -> Any:
    """Make the ``at``-th ``store.write_derived`` call raise ``RuntimeError("power cut")``
    (the earlier ones write as usual): a consolidation stopped between two batches.
    Returns the real ``write_derived``, to put back."""
    real_write = store.write_derived
    calls = {"n": 0}

    def failing_write(*args: Any, **kwargs: Any) -> Any:
        calls["n"] += 1
        if calls["n"] == at:
            raise RuntimeError("power cut")
        return real_write(*args, **kwargs)

    monkeypatch.setattr(store, "write_derived", failing_write)
    return real_write
