"""Hostile input to any public verb, the import format or the CLI raises only
``AnamnesisError`` (or succeeds), and a refused call changes nothing.

Property-based (hypothesis): values of every awkward kind (lone surrogates, control
characters, huge and tiny numbers, NaN, wrong types, nested containers, bytes that
are not UTF-8) go into every argument. ``ANAMNESIS_HYPOTHESIS_EXAMPLES`` raises the
number of cases (the soak runs thousands).
"""

from __future__ import annotations

import io
import json
import os
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta

import pytest
from click.testing import CliRunner
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from anamnesis import AnamnesisError, InvalidInputError, Memory
from anamnesis.cli import main
from anamnesis.embed import get_embedder

EXAMPLES = int(os.environ.get("ANAMNESIS_HYPOTHESIS_EXAMPLES", "60"))
EDGE = get_embedder("edge")
SETTINGS = settings(
    max_examples=EXAMPLES,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)

awkward_text = st.one_of(
    st.text(max_size=40),
    st.sampled_from(["", " ", "\n", "a\x00b", "\ud800", "x\udfffy", "ok", "é" * 300, "ana"]),
    st.text(alphabet=st.characters(min_codepoint=0xD800, max_codepoint=0xDFFF), max_size=3),
)
scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(allow_nan=True, allow_infinity=True),
    awkward_text,
    st.binary(max_size=10),
    st.just(datetime.max),
    st.just(datetime.min.replace(tzinfo=UTC)),
    st.just(timedelta(days=1)),
)
values = st.recursive(
    scalars,
    lambda inner: st.one_of(
        st.lists(inner, max_size=3), st.dictionaries(awkward_text, inner, max_size=3)
    ),
    max_leaves=6,
)
KEYWORDS = (
    "user_id", "agent_id", "session_id", "role", "speaker", "event_time", "metadata",
    "modality", "limit", "offset", "now", "as_of", "filters", "budget_tokens", "content",
    "subject", "predicate", "include_superseded", "explain", "event_after", "event_before",
    "containing", "dry_run", "include_archive", "policy",
)  # fmt: skip
VERBS = (
    "add", "add_many", "search", "context", "get", "get_all", "update", "history",
    "delete", "delete_all", "facts", "fact_history", "stats", "analyse", "consolidate",
    "forget", "archive", "restore", "usage", "strength", "decay",
)  # fmt: skip


@pytest.fixture(scope="module")
def memory(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Memory]:
    path = tmp_path_factory.mktemp("hostile") / "m.db"
    with Memory(path=path, embedder=EDGE, warm=False) as memory:
        memory.add(["I live in Porto", "I work at Acme"], user_id="ana", session_id="s1")
        memory.consolidate(user_id="ana")
        yield memory


def _snapshot(memory: Memory) -> str:
    out = io.StringIO()
    memory.export_jsonl(out)
    return out.getvalue()


def _call(memory: Memory, verb: str, first: object, keywords: dict[str, object]) -> None:
    method = getattr(memory, verb)
    try:
        if verb in (
            "stats", "facts", "consolidate", "get_all", "delete_all", "fact_history", "decay",
        ):  # fmt: skip
            method(**keywords)
        else:
            method(first, **keywords)
    except AnamnesisError:
        pass
    except TypeError as exc:  # a keyword the verb does not take: Python's own signature check
        if "unexpected keyword argument" not in str(exc) and "required" not in str(exc):
            raise


@SETTINGS
@given(
    verb=st.sampled_from(VERBS),
    first=values,
    keywords=st.dictionaries(st.sampled_from(KEYWORDS), values, max_size=3),
)
def test_every_verb_raises_only_typed_errors(memory: Memory, verb, first, keywords) -> None:
    writes = ("delete", "delete_all", "update", "add", "add_many", "consolidate", "forget")
    if verb in (*writes, "archive", "restore", "decay"):
        before = _snapshot(memory)
        try:
            _call(memory, verb, first, keywords)
        finally:
            after = _snapshot(memory)
        if before != after:  # a write went through: only if the call succeeded
            return
    else:
        _call(memory, verb, first, keywords)


#: Every integer argument of a public verb (``test_integer_arguments`` pins the ranges).
INTEGER_KEYWORDS = (
    ("search", "limit"), ("context", "limit"), ("context", "budget_tokens"),
    ("context", "neighbour_hits"), ("get_all", "limit"), ("get_all", "offset"),
    ("facts", "limit"), ("consolidate", "limit"),
)  # fmt: skip
#: Integers up to 2**70 either side, weighted towards the edges of 64-bit storage.
big_integers = st.one_of(
    st.integers(min_value=-(2**70), max_value=2**70),
    st.sampled_from([2**63 - 1, 2**63, -(2**63), -(2**63) - 1, 2**64, 2**70, -(2**70)]),
    st.integers(min_value=2**62, max_value=2**64),
    st.booleans(),
)


@SETTINGS
@example(argument=("get_all", "offset"), number=2**63, as_filter=False)
@example(argument=("facts", "limit"), number=2**63, as_filter=False)
@example(argument=("get_all", "limit"), number=2**63, as_filter=True)
@given(argument=st.sampled_from(INTEGER_KEYWORDS), number=big_integers, as_filter=st.booleans())
def test_any_integer_in_an_integer_argument_is_answered_or_invalid_input(
    memory: Memory, argument: tuple[str, str], number: int, as_filter: bool
) -> None:
    verb, keyword = argument
    keywords: dict[str, object] = {keyword: number}
    if as_filter and verb in ("search", "context", "get_all"):
        keywords = {"filters": {"metadata": {"n": number}}}
    before = _snapshot(memory)
    try:
        if verb in ("search", "context"):
            getattr(memory, verb)("where do I live?", user_id="ana", **keywords)
        else:
            getattr(memory, verb)(user_id="ana", **keywords)
    except InvalidInputError as exc:
        assert repr(number) in str(exc), str(exc)
        assert _snapshot(memory) == before


records = st.fixed_dictionaries(
    {"type": st.sampled_from(["episode", "session", "fact", "consolidated", "other"])},
    optional={
        key: values
        for key in (
            "id",
            "user_id",
            "agent_id",
            "session_id",
            "content",
            "event_time",
            "recorded_at",
            "turn_index",
            "version",
            "versions",
            "metadata",
            "speaker",
            "role",
            "embedding",
            "subject",
            "predicate",
            "object",
            "text",
            "provenance",
            "episode_ids",
            "confidence",
            "consolidated_at",
            "started_at",
            "modality",
        )
    },  # fmt: skip
)


def _line(record: dict) -> str:
    return json.dumps(record, default=repr, allow_nan=True)


@SETTINGS
@given(
    lines=st.lists(st.one_of(records.map(_line), awkward_text, st.binary(max_size=20)), max_size=4)
)
def test_import_of_any_file_raises_only_typed_errors(memory: Memory, lines) -> None:
    header = json.dumps({"type": "anamnesis-export", "version": 1, "embedder": "x", "dim": 1})
    before = _snapshot(memory)
    try:
        memory.import_jsonl([header, *lines])
    except AnamnesisError:
        assert _snapshot(memory) == before


def _could_be_argv(text: str) -> bool:
    """Whether a process could receive ``text`` as an argument (Python decodes argv
    with surrogateescape: only bytes, never NUL, can arrive)."""
    try:
        return b"\0" not in os.fsencode(text)
    except UnicodeEncodeError:
        return False


@SETTINGS
@given(
    command=st.sampled_from(
        ["add", "search", "list", "get", "delete", "facts", "context", "stats", "import"]
    ),
    arguments=st.lists(awkward_text.filter(_could_be_argv), max_size=3),
    options=st.lists(
        st.sampled_from(["--user", "--time", "--limit", "--session", "--agent", "--budget"]),
        max_size=2,
    ),
)
def test_the_cli_never_shows_a_traceback(tmp_path_factory, command, arguments, options) -> None:
    store = tmp_path_factory.getbasetemp() / "cli-hostile.db"
    argv = ["--path", str(store), "--embedder", "edge", command]
    for option, value in zip(options, arguments, strict=False):
        argv += [option, value]
    argv += arguments[len(options) :]
    result = CliRunner().invoke(main, argv)
    assert result.exit_code in (0, 2, 3), (argv, result.output)
    assert result.exception is None or isinstance(result.exception, SystemExit), (
        argv,
        repr(result.exception),
    )


@pytest.mark.parametrize(
    "text", ["I moved la\u017ft week", "I was there \u0130N May", "\u212aeep it"]
)
def test_text_with_letters_read_as_ascii_ones_is_added(memory: Memory, text) -> None:
    # Unicode's case folding reads the long s, the dotted I and the Kelvin sign as "s",
    # "i" and "k" when matching time words: text holding them is added and kept verbatim.
    added = memory.add(text, user_id="folds", session_id="s1")
    assert [e.content for e in added] == [text]
    assert memory.get(added[0].id, user_id="folds").content == text


def test_bytes_that_are_not_utf8_are_refused(memory: Memory) -> None:
    with pytest.raises(AnamnesisError):
        memory.import_jsonl([b"\xff\xfe not text"])  # type: ignore[list-item]


@pytest.fixture(scope="module")
def mcp_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[object]:
    pytest.importorskip("mcp", reason="the MCP server needs the server extras")
    import asyncio

    from anamnesis.server.mcp_server import ServerScope, build_server

    runner = asyncio.Runner()
    path = tmp_path_factory.mktemp("mcp-hostile") / "m.db"
    memory = runner.run(_open_async(path))
    server = build_server(memory, ServerScope("maya"), forget_all=True)
    yield runner, server
    runner.run(memory.close())
    runner.close()


async def _open_async(path: object) -> object:
    """An AsyncMemory made inside the runner's loop."""
    from anamnesis import AsyncMemory

    return AsyncMemory(path=path, embedder=EDGE, warm=False)  # type: ignore[arg-type]


TOOLS = (
    "remember", "recall", "get_context", "get_memory", "update_memory", "forget_memory",
    "memory_history", "facts", "forget_all_memories", "summaries", "profile", "gate_decisions",
)  # fmt: skip
TOOL_ARGUMENTS = (
    "content", "speaker", "role", "session_id", "event_time", "query", "limit", "question",
    "budget_tokens", "memory_id", "subject", "predicate", "as_of", "include_history",
    "confirm", "user_id", "profile", "memory_ids",
)  # fmt: skip


@SETTINGS
@given(
    tool=st.sampled_from(TOOLS),
    arguments=st.dictionaries(st.sampled_from(TOOL_ARGUMENTS), values, max_size=4),
)
def test_mcp_tools_answer_or_give_a_tool_error(mcp_server, tool, arguments) -> None:
    from mcp.server.mcpserver.exceptions import ToolError, UnexpectedToolError

    runner, server = mcp_server
    try:
        runner.run(server.call_tool(tool, arguments))
    except UnexpectedToolError as exc:  # a crash inside a tool: the bug this test hunts
        raise AssertionError(f"{tool}({arguments!r}) crashed: {exc.__cause__!r}") from exc
    except ToolError:
        pass
