"""The verbs of AsyncMemory, RemoteMemory and AsyncRemoteMemory are generated from
Memory's (scripts/generate_verbs.py): the checked-in modules must be what the script
writes today, so a changed verb cannot reach one surface and not the others."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from anamnesis.memory import Memory
from anamnesis.memory.verbs import thread_of

ROOT = Path(__file__).resolve().parent.parent
SCRIPT = ROOT / "scripts" / "generate_verbs.py"


def test_the_generated_verbs_are_up_to_date() -> None:
    done = subprocess.run(
        [sys.executable, str(SCRIPT), "--check"], capture_output=True, text=True, check=False
    )
    assert done.returncode == 0, done.stderr


def test_every_public_verb_says_which_thread_it_runs_on() -> None:
    for name in dir(Memory):
        member = getattr(Memory, name)
        if name.startswith("_") or not callable(member) or name == "close":
            continue
        assert thread_of(member) in ("read", "write", "maintain"), name


def test_a_verb_without_a_thread_is_refused() -> None:
    def verb() -> None: ...

    with pytest.raises(TypeError, match="without @reads, @writes or @maintains"):
        thread_of(verb)
