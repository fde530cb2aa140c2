"""Nothing leaves the machine: no socket to a network, no DNS query, seen by the kernel.

Python-level socket patches cannot see native code (onnxruntime's telemetry is
native), so the main paths run under strace, which records every socket the process
and its threads open. The Python run stays idle for over a minute with every model
loaded, because telemetry was seen to start about ten seconds after a session loaded.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

IDLE_SECONDS = float(os.environ.get("ANAMNESIS_OFFLINE_IDLE", "65"))
#: A socket of a network family (IPv4, IPv6), or any send to a DNS port.
NETWORK = re.compile(r"socket\(AF_INET6?\b|connect\(.*sa_family=AF_INET6?\b|htons\(53\)")

SCRIPT = textwrap.dedent(
    """
    import sys, time
    from anamnesis import Memory

    with Memory(path=sys.argv[1]) as memory:
        memory.add(
            [
                {"role": "user", "speaker": "Maya", "content": "I moved to Porto in May"},
                {"role": "assistant", "content": "How do you like the city?"},
                {"role": "user", "speaker": "Maya", "content": "I work at Acme now"},
            ],
            user_id="maya",
            event_time="2024-05-02T10:00:00Z",
        )
        memory.search("where does Maya live?", user_id="maya")
        memory.context("where does Maya work?", user_id="maya")
        memory.consolidate(user_id="maya")
        time.sleep(float(sys.argv[2]))
        memory.search("where does Maya work?", user_id="maya")
    """
)


def _strace() -> str:
    found = shutil.which("strace")
    if found is None:
        reason = "strace is not installed (apt-get install strace)"
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail(f"CI=true but {reason}", pytrace=False)
        pytest.skip(reason)
    return found


def _traced(args: list[str], tmp_path: Path, name: str) -> tuple[subprocess.Popen[str], Path]:
    trace = tmp_path / f"{name}.strace"
    env = dict(os.environ)
    env["HOME"] = str(tmp_path / "home")
    env.pop("ORT_DISABLE_TELEMETRY", None)  # the package must switch it off by itself
    env.pop("ANAMNESIS_LLM_BASE_URL", None)
    env.pop("ANAMNESIS_OPENAI_BASE_URL", None)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(Path.cwd()), env.get("PYTHONPATH")]))
    command = [
        _strace(),
        "-f",
        "-qq",
        "-e",
        "trace=socket,connect,sendto,sendmsg",
        "-o",
        str(trace),
    ]
    process = subprocess.Popen(
        [*command, *args], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    return process, trace


def _network_calls(trace: Path) -> list[str]:
    return [line for line in trace.read_text().splitlines() if NETWORK.search(line)]


def test_main_paths_open_no_network_socket_even_when_idle(tmp_path: Path) -> None:
    (tmp_path / "home").mkdir()
    script = tmp_path / "paths.py"
    script.write_text(SCRIPT)
    python, python_trace = _traced(
        [sys.executable, str(script), str(tmp_path / "py.db"), str(IDLE_SECONDS)], tmp_path, "py"
    )
    cli = [sys.executable, "-m", "anamnesis.cli", "--path", str(tmp_path / "cli.db")]
    for verb in (["add", "I keep bees", "--user", "ana"], ["search", "bees", "--user", "ana"]):
        process, trace = _traced([*cli, *verb], tmp_path, verb[0])
        _, err = process.communicate(timeout=300)
        assert process.returncode == 0, err
        assert _network_calls(trace) == []
    _, err = python.communicate(timeout=IDLE_SECONDS + 300)
    assert python.returncode == 0, err
    assert _network_calls(python_trace) == []
    assert not (tmp_path / "home" / ".cache" / "Microsoft").exists()
