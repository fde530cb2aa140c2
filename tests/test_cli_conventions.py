"""The command line's conventions, the same for every command (README, "Use it from
the shell"):

- ``--json`` prints exactly one JSON document on standard output: an array for the
  commands that list things (``[]`` when there is nothing), an object for the others;
  ``--nl`` prints a listing as JSON lines (nothing when empty). Every command that
  prints data takes ``--json``.
- Standard output holds only the result: messages, warnings and progress go to
  standard error, progress only when it is a terminal; a warning is one clean line.
- Options go where a reader expects them (``keys list --keys FILE``).
- A damaged store still answers its reads: ``stats`` exits 0 and reports the damage.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import click
import pytest
from click.testing import CliRunner, Result

from anamnesis import Memory
from anamnesis.cli import main
from anamnesis.embed import get_embedder
from anamnesis.errors import CorruptStoreError

EDGE = get_embedder("edge")
#: Commands that print no data (a file format, a server, a message): no ``--json``.
NO_DATA = {
    "import",
    "export",
    "reindex",
    "fit-ranker",
    "demo",
    "mcp",
    "serve",
    "bench",
    "hook claude-code",  # run by Claude Code, which reads its output; a summary on stderr
}
#: Commands (and ``facts`` modes) whose answer is a list: ``--json`` is an array.
LISTINGS = {"search", "list", "facts", "keys list"}

Run = Callable[..., Result]


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("conventions") / "m.db"
    with Memory(path=path, embedder=EDGE, warm=False) as memory:
        memory.add("I live in Boston.", user_id="ana", session_id="s1", event_time="2022-01-01")
        memory.add("I moved to Denver.", user_id="ana", session_id="s2", event_time="2023-06-15")
        memory.consolidate(user_id="ana")
    return path


@pytest.fixture
def run(store: Path) -> Run:
    def invoke(*argv: str) -> Result:
        result = CliRunner().invoke(main, ["--path", str(store), "--embedder", "edge", *argv])
        assert result.exception is None or isinstance(result.exception, SystemExit), (
            argv,
            repr(result.exception),
        )
        return result

    return invoke


def _commands() -> dict[str, click.Command]:
    """Every command by its full name (``keys list`` for a group's subcommand)."""
    found: dict[str, click.Command] = {}
    for name, command in main.commands.items():
        if isinstance(command, click.Group) and name != "bench":
            found.update({f"{name} {sub}": c for sub, c in command.commands.items()})
        else:
            found[name] = command
    return found


def _options(command: click.Command) -> set[str]:
    return {option for param in command.params for option in getattr(param, "opts", ())}


def test_every_command_that_prints_data_takes_json_and_every_listing_nl() -> None:
    for name, command in _commands().items():
        if name in NO_DATA:
            continue
        assert "--json" in _options(command), name
        assert ("--nl" in _options(command)) == (name in LISTINGS), name


@pytest.mark.parametrize(
    "argv",
    [
        ["search", "where do I live", "--user", "ana"],
        ["list", "--user", "ana"],
        ["facts", "--user", "ana"],
        ["facts", "--user", "ana", "--history", "--predicate", "lives_in"],
        ["facts", "--user", "ana", "--summaries"],
    ],
)
def test_a_listing_is_one_json_array_or_json_lines(run: Run, argv: list[str]) -> None:
    result = run(*argv, "--json")
    assert result.exit_code == 0, result.output
    listed = json.loads(result.stdout)
    assert isinstance(listed, list) and listed and all(isinstance(i, dict) for i in listed)
    for item in listed:  # times print as ISO 8601, whichever record holds them
        for key in ("event_time", "started_at", "valid_from"):
            if isinstance(item.get(key), str):
                assert "T" in item[key], (key, item[key])
    lines = [json.loads(line) for line in run(*argv, "--nl").stdout.splitlines()]
    assert [sorted(item) for item in lines] == [sorted(item) for item in listed]


@pytest.mark.parametrize(
    "argv",
    [
        ["search", "where do I live", "--user", "nobody"],
        ["list", "--user", "nobody"],
        ["facts", "--user", "nobody"],
        ["facts", "--user", "nobody", "--summaries"],
    ],
)
def test_an_empty_listing_is_an_empty_array_or_no_lines(run: Run, argv: list[str]) -> None:
    assert json.loads(run(*argv, "--json").stdout) == []
    assert run(*argv, "--nl").stdout == ""


def test_every_other_command_prints_one_json_object(run: Run, tmp_path: Path) -> None:
    added = json.loads(run("add", "I keep bees", "--user", "bo", "--json").stdout)
    episode = added["id"]
    answers = {
        "add": added,
        "get": run("get", episode, "--user", "bo", "--json"),
        "context": run("context", "bees", "--user", "bo", "--json"),
        "stats": run("stats", "--json"),
        "check": run("check", "--json"),
        "consolidate": run("consolidate", "--user", "bo", "--json"),
        "facts --profile": run("facts", "--profile", "--user", "ana", "--json"),
        "gate-decisions": run("gate-decisions", episode, "--user", "bo", "--json"),
        "archive": run("archive", episode, "--user", "bo", "--json"),
        "restore": run("restore", episode, "--user", "bo", "--json"),
        "decay": run("decay", "--user", "bo", "--dry-run", "--json"),
        "forget": run("forget", "--user", "bo", "--dry-run", "--json"),
        "delete": run("delete", episode, "--user", "bo", "--json"),
    }
    keys = str(tmp_path / "keys.db")
    created = run("keys", "create", "--user", "bo", "--keys", keys, "--json")
    answers["keys create"] = created
    answers["keys revoke"] = run(
        "keys", "revoke", json.loads(created.stdout)["id"], "--keys", keys, "--json"
    )
    for name, answer in answers.items():
        if isinstance(answer, Result):
            assert answer.exit_code == 0, (name, answer.output)
            answer = json.loads(answer.stdout)
        assert isinstance(answer, dict), name
    commands = set(_commands()) - NO_DATA - LISTINGS
    assert commands <= set(answers), commands - set(answers)


def test_the_key_file_option_goes_before_or_after_the_subcommand(run: Run, tmp_path: Path) -> None:
    keys = str(tmp_path / "keys.db")
    assert run("keys", "--keys", keys, "create", "--user", "bo").exit_code == 0
    assert run("keys", "create", "--admin", "--keys", keys).exit_code == 0
    after = run("keys", "list", "--keys", keys)
    assert after.exit_code == 0, after.output
    assert after.stdout == run("keys", "--keys", keys, "list").stdout
    assert len(json.loads(run("keys", "list", "--keys", keys, "--json").stdout)) == 2


def _cli(*argv: str, home: Path) -> subprocess.CompletedProcess[str]:
    """The real command, stdout and stderr piped (not terminals), as a script sees it."""
    env = {**os.environ, "HOME": str(home)}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(Path.cwd()), env.get("PYTHONPATH")]))
    return subprocess.run(
        [sys.executable, "-m", "anamnesis.cli", "--embedder", "edge", *argv],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
        check=False,
    )


def test_progress_is_drawn_only_on_a_terminal_and_never_on_stdout(tmp_path: Path) -> None:
    messages = tmp_path / "chat.json"
    messages.write_text(json.dumps([f"message {i} about bees" for i in range(600)]))
    result = _cli("--path", str(tmp_path / "m.db"), "import", str(messages), home=tmp_path)
    assert result.returncode == 0, result.stderr
    assert result.stdout == ""
    assert result.stderr.strip() == "imported 600 episodes"


@pytest.fixture(scope="module")
def damaged(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A store with one zeroed page in the middle: found by the check at open."""
    path = tmp_path_factory.mktemp("damaged") / "m.db"
    with Memory(path=path, embedder=EDGE, warm=False) as memory:
        memory.add_many([f"message {i} about bees" for i in range(1200)], user_id="ana")
    original = path.read_bytes()
    page = len(original) // 4096 // 2
    path.write_bytes(original[: page * 4096] + bytes(4096) + original[(page + 1) * 4096 :])
    return path


def test_a_warning_is_one_clean_line_on_stderr(damaged: Path, tmp_path: Path) -> None:
    result = _cli("--path", str(damaged), "list", "--user", "ana", "--json", home=tmp_path)
    assert result.returncode == 0, result.stderr
    json.loads(result.stdout)
    (line,) = result.stderr.splitlines()
    assert line.startswith("warning: ") and "is damaged" in line and "anamnesis check" in line
    assert "RuntimeWarning" not in line and ".py:" not in line


def test_stats_on_a_damaged_store_answers_with_the_damage(damaged: Path, tmp_path: Path) -> None:
    result = _cli("--path", str(damaged), "stats", "--json", home=tmp_path)
    assert result.returncode == 0, result.stderr
    stats = json.loads(result.stdout)
    assert stats["capabilities"]["store_health"].startswith("damaged")
    # Stats reads indexes, not rows: past a damaged page of rows its counts stay right;
    # what it cannot read is None, with why.
    readable = stats["episodes"] == 1200 and "unreadable" not in stats
    assert readable or ("damaged" in stats["unreadable"] and stats["episodes"] is None)
    assert _cli("--path", str(damaged), "check", home=tmp_path).returncode == 5


def test_stats_it_cannot_read_are_none_and_say_why(tmp_path: Path, monkeypatch) -> None:
    with Memory(path=tmp_path / "m.db", embedder=EDGE, warm=False) as memory:
        memory.add("a note", user_id="ana")

        def malformed(scope):
            raise CorruptStoreError("the store is damaged: database disk image is malformed")

        monkeypatch.setattr(memory.store, "stats", malformed)
        stats = memory.stats(user_id="ana")
    assert stats["episodes"] is None and stats["vectors"] is None
    assert "malformed" in stats["unreadable"] and stats["backend"] == "sqlite"
