"""The command line: every verb, JSON output, and exit codes a shell can act on."""

from __future__ import annotations

import json
import re
import subprocess
import sys

import pytest
from click.testing import CliRunner

from anamnesis.cli import main
from anamnesis.cli_errors import EXIT_BAD_INPUT, EXIT_NOT_FOUND


@pytest.fixture
def cli(tmp_path):
    runner = CliRunner()
    path = str(tmp_path / "cli.db")

    def run(*args: str, input: str | None = None):
        return runner.invoke(main, ["--path", path, *args], input=input, catch_exceptions=False)

    return run


def test_help_lists_every_verb() -> None:
    result = CliRunner().invoke(main, ["--help"])
    for verb in (
        "add",
        "import",
        "search",
        "get",
        "list",
        "delete",
        "export",
        "stats",
        "reindex",
        "demo",
        "consolidate",
        "facts",
        "fit-ranker",
    ):
        assert verb in result.output


def test_add_search_get_list_delete(cli) -> None:
    episode_id = cli("add", "I keep bees on the roof", "--user", "ana").output.strip()
    assert episode_id.startswith("ep_")
    hits = json.loads(cli("search", "bees", "--user", "ana", "--json").output)
    assert hits[0]["episode"]["id"] == episode_id and "lexical" in hits[0]["channels"]
    table = cli("search", "bees", "--user", "ana").output
    assert "I keep bees on the roof" in table
    assert json.loads(cli("get", episode_id, "--user", "ana").output)["content"].startswith(
        "I keep"
    )
    listed = json.loads(cli("list", "--user", "ana", "--json").output)
    assert [e["id"] for e in listed] == [episode_id]
    assert json.loads(cli("delete", episode_id, "--user", "ana").output)["episodes"] == 1
    assert cli("get", episode_id, "--user", "ana").exit_code == EXIT_NOT_FOUND


def test_add_reads_standard_input_and_metadata(cli) -> None:
    result = cli(
        "add", "-", "--user", "ana", "--metadata", '{"k": 1}', "--json", input="from stdin\n"
    )
    assert json.loads(result.output)["metadata"] == {"k": 1}


def test_bad_input_exits_2_with_a_message(cli) -> None:
    result = cli("add", "  ", "--user", "ana")
    assert result.exit_code == EXIT_BAD_INPUT
    assert "empty" in result.output
    assert cli("add", "x", "--metadata", "{nope").exit_code == EXIT_BAD_INPUT
    assert cli("delete", "--all").exit_code == EXIT_BAD_INPUT


def test_import_messages_then_export_round_trips(cli, tmp_path) -> None:
    messages = tmp_path / "msgs.jsonl"
    messages.write_text(
        "\n".join(
            json.dumps(m)
            for m in [
                {
                    "role": "user",
                    "content": "We planted tomatoes",
                    "event_time": "2024-05-01T10:00:00Z",
                },
                {"role": "assistant", "content": "How many?", "event_time": "2024-05-01T10:01:00Z"},
            ]
        )
    )
    assert cli("import", str(messages), "--user", "gardener", "--session", "s1").exit_code == 0
    dump = tmp_path / "dump.jsonl"
    assert cli("export", str(dump)).exit_code == 0
    other = CliRunner().invoke(main, ["--path", str(tmp_path / "other.db"), "import", str(dump)])
    assert other.exit_code == 0, other.output
    again = tmp_path / "again.jsonl"
    CliRunner().invoke(main, ["--path", str(tmp_path / "other.db"), "export", str(again)])
    assert again.read_text() == dump.read_text()


def test_stats_is_json_with_capabilities(cli) -> None:
    cli("add", "hello", "--user", "ana")
    stats = json.loads(cli("stats").output)
    assert stats["episodes"] == 1 and stats["capabilities"]["llm"] is None


def test_delete_all_needs_confirmation_or_yes(cli) -> None:
    cli("add", "one", "--user", "ana")
    assert cli("delete", "--all", "--user", "ana", input="n\n").exit_code != 0
    assert json.loads(cli("delete", "--all", "--user", "ana", "--yes").output)["episodes"] == 1


def test_demo_runs_and_answers(tmp_path) -> None:
    result = CliRunner().invoke(main, ["demo", "--path", str(tmp_path / "demo.db")])
    assert result.exit_code == 0, result.output
    assert "allergic to cats" in result.output


def test_consolidate_then_facts(cli) -> None:
    cli("add", "I live in Boston.", "--role", "user", "--time", "2022-01-01")
    cli("add", "I moved to Denver last month.", "--role", "user", "--time", "2023-06-15")
    report = json.loads(cli("consolidate").output)
    assert (report["episodes"], report["added"], report["superseded"]) == (2, 2, 1)
    current = json.loads(cli("facts", "--json").output)
    assert [(f["predicate"], f["object"]) for f in current] == [("lives_in", "Denver")]
    chain = cli("facts", "--history", "--predicate", "lives_in", "--nl").output.splitlines()
    assert [json.loads(line)["object"] for line in chain] == ["Boston", "Denver"]
    assert "superseded" in cli("facts", "--all").output
    result = cli("facts", "--history")
    assert result.exit_code == EXIT_BAD_INPUT and "--predicate" in result.output


def _modules_after(code: str) -> set[str]:
    """The anamnesis modules a fresh interpreter has loaded after running ``code``."""
    probe = f"{code}\nimport sys\nprint(*[m for m in sys.modules if m.startswith('anamnesis')])"
    done = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=True, timeout=120
    )
    return set(done.stdout.split())


def test_the_cli_and_its_help_never_load_the_benchmarks() -> None:
    imported = _modules_after("import anamnesis.cli")
    assert "anamnesis.cli" in imported
    helped = _modules_after(
        "from anamnesis.cli import main\n"
        "try:\n    main(['--help'])\nexcept SystemExit as done:\n    assert done.code == 0"
    )
    assert "anamnesis.cli" in helped
    assert not {m for m in imported | helped if m.startswith("anamnesis.bench")}


def test_the_cli_help_loads_none_of_the_server_extras() -> None:
    probe = (
        "from anamnesis.cli import main\n"
        "try:\n    main(['--help'])\nexcept SystemExit as done:\n    assert done.code == 0\n"
        "import sys\nprint('loaded:', *sorted({m.split('.')[0] for m in sys.modules}))"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=True, timeout=120
    )
    loaded = set(done.stdout.splitlines()[-1].split()[1:])
    assert "click" in loaded
    assert not loaded & {"fastapi", "starlette", "uvicorn", "jinja2", "mcp", "multipart"}


def test_help_lists_bench_with_the_short_help_of_the_command_it_loads() -> None:
    from anamnesis.bench.cli import bench

    listed = CliRunner().invoke(main, ["--help"], terminal_width=200).output
    assert re.search(rf"^\s+bench\s+{re.escape(bench.get_short_help_str(200))}$", listed, re.M)


def test_bench_runs_through_the_main_cli() -> None:
    result = CliRunner().invoke(main, ["bench", "--help"])
    assert result.exit_code == 0
    assert "locomo" in result.output
    assert "scale" in result.output
    listed = CliRunner().invoke(main, ["--help"]).output
    assert len(re.findall(r"^\s+bench\s", listed, re.M)) == 1


def test_an_unknown_preset_is_refused_with_the_public_ones_and_the_bench_hint(tmp_path) -> None:
    result = CliRunner().invoke(
        main, ["--path", str(tmp_path / "m.db"), "--config", "nope", "stats"]
    )
    assert result.exit_code == 2
    assert "unknown preset 'nope'" in result.output
    assert "default, fast, ranker, facts" in result.output
    assert "anamnesis bench" in result.output
