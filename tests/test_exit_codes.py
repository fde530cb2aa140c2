"""A process's exit code is its own: nothing Anamnesis leaves running aborts it at exit.

A background thread still inside onnxruntime when the interpreter shuts down used to
abort the process (exit 134) after its work was done, so a script that retried on
failure stored the same thing twice. The runs below happen with both cores busy,
which is when that race was lost most often.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest

RUNS = int(os.environ.get("ANAMNESIS_EXIT_RUNS", "6"))


@pytest.fixture(scope="module")
def busy_cpu() -> Iterator[None]:
    """Two spinning processes, so that the warm-up is slow when the program ends."""
    spinners = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(2)]
    yield
    for spinner in spinners:
        spinner.kill()
        spinner.wait()


def _env(tmp_path: Path) -> dict[str, str]:
    env = dict(os.environ)
    env["HOME"] = str(tmp_path / "home")
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(Path.cwd()), env.get("PYTHONPATH")]))
    return env


def _run(args: list[str], tmp_path: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        args, env=_env(tmp_path), capture_output=True, text=True, timeout=120, check=False
    )


def _exit_codes(tmp_path: Path, args: list[str]) -> list[tuple[int, str]]:
    codes = []
    for run in range(RUNS):
        store = tmp_path / f"run{run}.db"
        result = _run([arg.replace("{store}", str(store)) for arg in args], tmp_path)
        codes.append((result.returncode, result.stderr.strip().splitlines()[-1:]))
    return codes


CLI = [sys.executable, "-m", "anamnesis.cli", "--path", "{store}"]

SCRIPT = textwrap.dedent(
    """
    import sys
    from anamnesis import Memory

    memory = Memory(path=sys.argv[1])
    memory.add("I keep bees on the roof", user_id="ana")
    if sys.argv[2] == "close":
        memory.close()
    elif sys.argv[2] == "raise":
        raise SystemExit(7)
    """
)


@pytest.mark.usefixtures("busy_cpu")
def test_cli_add_to_a_new_store_exits_0(tmp_path: Path) -> None:
    codes = _exit_codes(tmp_path, [*CLI, "add", "I keep bees", "--user", "ana"])
    assert all(code == 0 for code, _ in codes), codes


@pytest.mark.usefixtures("busy_cpu")
def test_cli_bad_input_exits_2(tmp_path: Path) -> None:
    codes = _exit_codes(tmp_path, [*CLI, "add", "x", "--time", "not a time"])
    assert all(code == 2 for code, _ in codes), codes


@pytest.mark.usefixtures("busy_cpu")
@pytest.mark.parametrize(("ending", "expected"), [("leave-open", 0), ("close", 0), ("raise", 7)])
def test_a_script_exits_with_its_own_code(tmp_path: Path, ending: str, expected: int) -> None:
    script = tmp_path / "script.py"
    script.write_text(SCRIPT)
    codes = _exit_codes(tmp_path, [sys.executable, str(script), "{store}", ending])
    assert all(code == expected for code, _ in codes), codes


def test_no_anamnesis_thread_is_alive_when_the_interpreter_finalises(tmp_path: Path) -> None:
    """Deterministic: an exit hook registered before anamnesis is imported runs after
    Anamnesis's own, and finds no thread of ours still running."""
    script = tmp_path / "threads.py"
    script.write_text(
        textwrap.dedent(
            """
            import atexit, os, sys, threading

            def check():
                alive = [t.name for t in threading.enumerate() if t.name.startswith("anamnesis")]
                if alive:
                    print("alive at exit:", alive, file=sys.stderr)
                    os._exit(9)

            atexit.register(check)
            from anamnesis import Memory

            memory = Memory(path=sys.argv[1])  # the warm-up starts, and the program ends
            """
        )
    )
    result = _run([sys.executable, str(script), str(tmp_path / "s.db")], tmp_path)
    assert result.returncode == 0, result.stderr
