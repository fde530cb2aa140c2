"""What keeps Anamnesis offline: third-party telemetry is switched off before it starts.

onnxruntime (the MiniLM embedder, the cross-encoder) sends usage events to a remote
host unless ``ORT_DISABLE_TELEMETRY=1`` is in the environment when it is first
imported; calling ``onnxruntime.disable_telemetry_events()`` afterwards does not stop
its DNS queries (checked with strace). This module sets the variable when the
``anamnesis`` package is imported, which is before any of its modules imports
onnxruntime. A program that imported onnxruntime itself before importing anamnesis,
without the variable, cannot be fixed from here: Anamnesis then warns once and
reports it in ``Memory.capabilities["telemetry"]``.

This module imports nothing from the package, so that it can run first.
"""

from __future__ import annotations

import os
import sys
import warnings

#: onnxruntime reads this when it is imported; "1" switches its telemetry off.
ORT_TELEMETRY_ENV = "ORT_DISABLE_TELEMETRY"

_ORT_IMPORTED_FIRST = "onnxruntime" in sys.modules and os.environ.get(ORT_TELEMETRY_ENV) != "1"
os.environ[ORT_TELEMETRY_ENV] = "1"
_warned = False


def telemetry() -> str:
    """``"off"``, or why onnxruntime's telemetry may be on in this process."""
    if _ORT_IMPORTED_FIRST:
        return (
            "possibly on: onnxruntime was imported before anamnesis without "
            f"{ORT_TELEMETRY_ENV}=1 (set it in the environment, or import anamnesis first)"
        )
    return "off"


def warn_if_telemetry_on() -> None:
    """Warn once when onnxruntime was imported too early for its telemetry to be off."""
    global _warned
    if _ORT_IMPORTED_FIRST and not _warned:
        _warned = True
        warnings.warn(f"onnxruntime telemetry {telemetry()}", RuntimeWarning, stacklevel=3)
