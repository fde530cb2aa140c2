"""The LoCoMo test slice (conversation 26, sessions 1-4; see fixtures/README.md)."""

from __future__ import annotations

import json
from datetime import datetime
from pathlib import Path
from typing import Any

from anamnesis import Memory

FIXTURE = Path(__file__).parent / "fixtures" / "locomo_conv26_sessions1-4.json"


def load_slice(memory: Memory, user_id: str) -> list[dict[str, Any]]:
    """Add every session of the slice to ``memory`` as ``user_id``; return its QA items."""
    data = json.loads(FIXTURE.read_text())
    conv = data["conversation"]
    n = 1
    while f"session_{n}" in conv:
        when = datetime.strptime(conv[f"session_{n}_date_time"], "%I:%M %p on %d %B, %Y")
        memory.add_many(
            [
                {
                    "speaker": turn["speaker"],
                    "content": turn["text"],
                    "event_time": when,
                    "metadata": {"dia_id": turn["dia_id"]},
                }
                for turn in conv[f"session_{n}"]
            ],
            user_id=user_id,
            session_id=f"session_{n}",
        )
        n += 1
    return data["qa"]
