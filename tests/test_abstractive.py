"""Abstractive session summaries: with an LLM configured, ``consolidate`` asks the model
to summarise each session, on the real LoCoMo slice (conversation 26, sessions 1-4),
the real MiniLM embedder, a real SQLite store and a fake OpenAI-compatible server on
loopback (real HTTP, scripted replies).

The model is shown one session of one user and agent, dated turns with their
speakers; the summary's text is the model's; its provenance is the turns shown, all
inside the session; a failing endpoint leaves the extractive summary, warns once and
shows in ``capabilities["summaries"]``; only changed sessions (or a changed model or
mode) are rebuilt; forget drops the summary with the turn's words."""

from __future__ import annotations

import json
import re
import warnings
from collections.abc import Callable
from pathlib import Path

import pytest
from failures import cut_power_on_write
from llm_fixtures import FakeLLM
from locomo_slice import load_slice

from anamnesis import Memory
from anamnesis.consolidate import abstractive, build
from anamnesis.errors import InvalidInputError
from anamnesis.tokens import TokenCounter
from anamnesis.types import Episode, Scope

USER = "locomo"


def is_summary_prompt(prompt: str) -> bool:
    return prompt.startswith("Summarise one conversation session")


def shown_turns(prompt: str) -> list[str]:
    """The turn lines of a summary prompt."""
    turns = prompt.split("\nTurns:\n", 1)[1].split("\n\nReply with the summary only.", 1)[0]
    return turns.splitlines()


def model_summary(prompt: str) -> str:
    """The fake model's summary: names the first turn's date and how many it saw."""
    if not is_summary_prompt(prompt):
        return '{"facts": []}'
    turns = shown_turns(prompt)
    day = turns[0][1:11]
    return f"Summary: Caroline and Melanie caught up on {day}; the model read {len(turns)} turns."


@pytest.fixture
def llm_memory(db_path: Path, embedder, fake_llm: FakeLLM):
    fake_llm.script = model_summary
    with Memory(path=db_path, embedder=embedder, llm=fake_llm.client()) as memory:
        load_slice(memory, USER)
        yield memory


def session_turns(memory: Memory, session_id: str, user_id: str = USER) -> list[Episode]:
    """The turns of a session of no agent, in conversation order."""
    turns = memory.get_all(user_id=user_id, session_id=session_id, limit=1000).items
    mine = [t for t in turns if t.agent_id is None]
    return sorted(mine, key=lambda t: (t.turn_index or 0, t.event_time))


def summary_prompts(fake: FakeLLM) -> list[str]:
    return [p for p in fake.prompts if is_summary_prompt(p)]


def test_with_an_llm_each_session_summary_is_the_models_text(llm_memory, fake_llm):
    report = llm_memory.consolidate(user_id=USER, extractor="rules")
    assert (report.summaries, report.abstractive_summaries, report.summary_fallbacks) == (4, 4, 0)
    assert len(summary_prompts(fake_llm)) == 4  # one call per session
    for summary in llm_memory.derived.summaries(user_id=USER):
        turns = session_turns(llm_memory, summary.session_id)
        day = min(t.event_time for t in turns)
        assert summary.method == "abstractive" and summary.model == "fake-model"
        # The model's words, its "Summary:" label dropped, after the session's date.
        assert summary.text == (
            f"{day:%d %B %Y}: Caroline and Melanie caught up on {day:%Y-%m-%d}; "
            f"the model read {len(turns)} turns."
        )
        assert summary.lines  # the extractive sentences it was shown stay in the body
    assert llm_memory.capabilities["summaries"] == "abstractive"


def test_the_default_with_an_llm_extracts_facts_and_summarises_with_it(llm_memory, fake_llm):
    report = llm_memory.consolidate(user_id=USER)
    assert report.extractor == "llm" and report.abstractive_summaries == 4
    assert {s.method for s in llm_memory.derived.summaries(user_id=USER)} == {"abstractive"}


def test_the_prompt_holds_only_that_sessions_dated_turns(llm_memory, fake_llm):
    # The same session id elsewhere: another user's, and another agent's of this user.
    llm_memory.add(
        "Bob here: I keep bees on the roof in Leeds.", user_id="bob", session_id="session_1"
    )
    llm_memory.add(
        "Helper note: the kayak rental closes at noon.",
        user_id=USER,
        agent_id="helper",
        session_id="session_1",
    )
    llm_memory.consolidate(user_id=USER, extractor="rules")
    prompts = summary_prompts(fake_llm)
    assert len(prompts) == 5  # the helper agent's session_1 is a session of its own
    assert all("bees" not in p for p in prompts)
    helper = [p for p in prompts if "kayak" in p]
    assert len(helper) == 1 and len(shown_turns(helper[0])) == 1
    prompts = [p for p in prompts if "kayak" not in p]
    for n in range(1, 5):
        expected = [abstractive.render_turn(t) for t in session_turns(llm_memory, f"session_{n}")]
        assert sum(shown_turns(p) == expected for p in prompts) == 1, n
    first = session_turns(llm_memory, "session_1")[0]
    assert re.match(r"\[\d{4}-\d{2}-\d{2} \d{2}:\d{2}\] Caroline: ", abstractive.render_turn(first))
    # The extractive sentences are given as the important ones.
    lines = prompts[0].split("marked as important:\n", 1)[1].split("\n\nTurns:", 1)[0]
    assert lines.startswith("- ") and "All of them are shown." in prompts[0]


def test_provenance_is_the_turns_shown_all_inside_the_session(llm_memory, fake_llm):
    llm_memory.consolidate(user_id=USER, extractor="rules")
    for summary in llm_memory.derived.summaries(user_id=USER):
        ids = [t.id for t in session_turns(llm_memory, summary.session_id)]
        assert sorted(summary.provenance) == sorted(ids)


def test_a_long_session_is_cut_to_the_budget_important_turns_first(
    llm_memory, fake_llm, monkeypatch
):
    llm_memory.consolidate(user_id=USER, extractor="rules", summaries="extractive")
    counter = TokenCounter()
    important, whole = [], []
    for summary in llm_memory.derived.summaries(user_id=USER):
        turns = session_turns(llm_memory, summary.session_id)
        costs = counter.count([abstractive.render_turn(t) for t in turns])
        lines = {line.episode_id for line in summary.lines}
        important.append(sum(c for t, c in zip(turns, costs, strict=True) if t.id in lines))
        whole.append(sum(costs))
    # A budget that holds every session's important turns but no session whole.
    assert max(important) < min(whole)
    monkeypatch.setattr(abstractive, "SESSION_TOKENS", max(important))
    llm_memory.consolidate(user_id=USER, extractor="rules")
    for summary in llm_memory.derived.summaries(user_id=USER):
        turns = session_turns(llm_memory, summary.session_id)
        assert summary.method == "abstractive"
        assert set(summary.provenance) < {t.id for t in turns}  # a part, inside the session
        assert {line.episode_id for line in summary.lines} <= set(summary.provenance)
        assert f"read {len(summary.provenance)} turns" in summary.text
    prompt = summary_prompts(fake_llm)[0]
    assert "of them are left out for length" in prompt


@pytest.mark.parametrize("failure", ["http error", "timeout"])
def test_a_failing_endpoint_leaves_extractive_summaries_warns_once_and_says_so(
    db_path, embedder, fake_llm, failure
):
    with Memory(path=db_path, embedder=embedder) as plain:
        load_slice(plain, USER)
        plain.consolidate(user_id=USER)
        extractive = plain.derived.summaries(user_id=USER)
    fake_llm.script = model_summary
    if failure == "http error":
        fake_llm.status = 500
    else:
        fake_llm.delay = 1.0
    client = fake_llm.client(timeout=0.3)
    with Memory(path=db_path, embedder=embedder, llm=client) as memory:
        with pytest.warns(RuntimeWarning, match="fell back to extractive"):
            report = memory.consolidate(user_id=USER, extractor="rules")
        assert (report.summaries, report.summary_fallbacks) == (4, 4)
        assert len(summary_prompts(fake_llm)) == 1  # the endpoint is not asked again this run
        after = memory.derived.summaries(user_id=USER)
        assert [(s.text, s.provenance, s.method) for s in after] == [
            (s.text, s.provenance, "extractive") for s in extractive
        ]
        state = memory.capabilities["summaries"]
        assert state.startswith("extractive fallback: ")
        assert ("HTTP 500" if failure == "http error" else "timed out") in state
        # The next consolidation asks again; a second failure does not warn again.
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            assert memory.consolidate(user_id=USER, extractor="rules").summary_fallbacks == 4
        fake_llm.status, fake_llm.delay = 200, 0.0
        assert memory.consolidate(user_id=USER, extractor="rules").abstractive_summaries == 4
        assert memory.capabilities["summaries"] == "abstractive"


def replying(date: str, reply: str) -> Callable[[str], str]:
    """A model that answers ``reply`` for the summary of the session that ran on
    ``date`` and writes the usual summary for every other prompt."""

    def script(prompt: str) -> str:
        return reply if is_summary_prompt(prompt) and date in prompt else model_summary(prompt)

    return script


def test_an_empty_reply_falls_back_for_that_session_only(llm_memory, fake_llm):
    fake_llm.script = replying("2023-05-08", "   ")
    with pytest.warns(RuntimeWarning, match="replied nothing"):
        report = llm_memory.consolidate(user_id=USER, extractor="rules")
    assert (report.abstractive_summaries, report.summary_fallbacks) == (3, 1)
    methods = [s.method for s in llm_memory.derived.summaries(user_id=USER)]
    assert methods == ["extractive", "abstractive", "abstractive", "abstractive"]


def test_without_an_llm_summaries_are_extractive_as_before(memory):
    load_slice(memory, USER)
    memory.consolidate(user_id=USER)
    prints = {p.session_id: p.fingerprint for p in memory.store.session_prints(Scope(USER))}
    for row, _ in memory.store.find_derived(Scope(USER), "summary"):
        assert row.fingerprint == prints[row.session_id] and "method" not in row.body
    summaries = memory.derived.summaries(user_id=USER)
    assert {(s.method, s.model) for s in summaries} == {("extractive", None)}
    assert memory.capabilities["summaries"] == "extractive"
    with pytest.raises(InvalidInputError, match="needs an LLM"):
        memory.consolidate(user_id=USER, summaries="abstractive")
    with pytest.raises(InvalidInputError, match="unknown summaries"):
        memory.consolidate(user_id=USER, summaries="poetic")


def test_extractive_can_be_kept_and_a_change_of_mode_or_model_rebuilds(
    llm_memory, fake_llm, db_path, embedder
):
    report = llm_memory.consolidate(user_id=USER, extractor="rules", summaries="extractive")
    assert report.summaries == 4 and summary_prompts(fake_llm) == []
    assert {s.method for s in llm_memory.derived.summaries(user_id=USER)} == {"extractive"}
    # The default with an LLM is abstractive: every extractive summary is due.
    assert llm_memory.consolidate(user_id=USER, extractor="rules").abstractive_summaries == 4
    assert llm_memory.consolidate(user_id=USER, extractor="rules").summaries == 0
    assert len(summary_prompts(fake_llm)) == 4
    with Memory(path=db_path, embedder=embedder, llm=fake_llm.client("other-model")) as other:
        assert other.consolidate(user_id=USER, extractor="rules").abstractive_summaries == 4
        assert {s.model for s in other.derived.summaries(user_id=USER)} == {"other-model"}
    back = llm_memory.consolidate(user_id=USER, extractor="rules", summaries="extractive")
    assert back.summaries == 4
    assert {s.method for s in llm_memory.derived.summaries(user_id=USER)} == {"extractive"}


def test_only_sessions_that_changed_are_summarised_again(llm_memory, fake_llm):
    llm_memory.consolidate(user_id=USER, extractor="rules")
    before = {s.session_id: s for s in llm_memory.derived.summaries(user_id=USER)}
    assert llm_memory.consolidate(user_id=USER, extractor="rules").summaries == 0
    assert len(summary_prompts(fake_llm)) == 4
    llm_memory.add(
        {"speaker": "Melanie", "content": "We booked the camping trip to Yosemite for June!"},
        user_id=USER,
        session_id="session_3",
        event_time=before["session_3"].ended_at,
    )
    assert llm_memory.consolidate(user_id=USER, extractor="rules").abstractive_summaries == 1
    prompts = summary_prompts(fake_llm)
    assert len(prompts) == 5 and "Yosemite" in prompts[-1]
    after = {s.session_id: s for s in llm_memory.derived.summaries(user_id=USER)}
    for session in ("session_1", "session_2", "session_4"):
        assert after[session].built_at == before[session].built_at


def test_forget_of_a_shown_turn_drops_the_summary_and_its_words(llm_memory, fake_llm):
    fake_llm.script = replying("2023-05-25", "Melanie mentioned the zebrafinch-7731 charity run.")
    llm_memory.consolidate(user_id=USER, extractor="rules")
    summary = next(s for s in llm_memory.derived.summaries(user_id=USER) if "zebrafinch" in s.text)
    # A turn the model read that is not one of the extractive lines.
    quiet = next(
        e for e in summary.provenance if e not in {line.episode_id for line in summary.lines}
    )
    report = llm_memory.forget(quiet, user_id=USER)
    assert report.counts.derived >= 1
    assert all(
        s.session_id != summary.session_id for s in llm_memory.derived.summaries(user_id=USER)
    )
    store_path = Path(llm_memory.store.path)
    for path in store_path.parent.glob(store_path.name + "*"):
        assert b"zebrafinch-7731" not in path.read_bytes(), path.name
    llm_memory.consolidate(user_id=USER, extractor="rules")
    rebuilt = llm_memory.derived.summaries(user_id=USER, session_id=summary.session_id)[0]
    assert rebuilt.method == "abstractive" and quiet not in rebuilt.provenance
    assert len(rebuilt.provenance) == len(summary.provenance) - 1


def test_a_failure_between_batches_leaves_whole_abstractive_items(
    llm_memory, fake_llm, monkeypatch
):
    monkeypatch.setattr(build, "BATCH_SIZE", 1)
    store = llm_memory.store
    real_write = cut_power_on_write(monkeypatch, store)
    with pytest.raises(RuntimeError, match="power cut"):
        llm_memory.consolidate(user_id=USER, extractor="rules")
    rows = [row for row, _ in store.find_derived(Scope(USER), "summary")]
    assert len(rows) == 2 and all(row.body["method"] == "abstractive" for row in rows)
    monkeypatch.setattr(store, "write_derived", real_write)
    assert llm_memory.consolidate(user_id=USER, extractor="rules").abstractive_summaries == 2


def test_an_abstractive_summary_reads_the_same_on_every_surface(tmp_path, fake_llm):
    from dataclasses import asdict

    from rest_fixtures import EDGE, RestServer

    from anamnesis.server.client import RemoteMemory
    from anamnesis.server.wire import decode

    path = tmp_path / "m.db"
    fake_llm.script = lambda prompt: "Maya signed a lease in Porto and works at Tencent."
    with Memory(path=path, embedder=EDGE, warm=False, llm=fake_llm.client()) as memory:
        memory.add(
            [
                {"role": "user", "speaker": "Maya", "content": "I signed a lease in Porto."},
                {"role": "user", "speaker": "Maya", "content": "I work at Tencent now."},
            ],
            user_id="maya",
            session_id="s1",
        )
        memory.consolidate(user_id="maya", extractor="rules")
    with Memory(path=path, embedder=EDGE, warm=False) as reader:  # no LLM needed to read
        local = reader.derived.summaries(user_id="maya")
    assert [(s.method, s.model) for s in local] == [("abstractive", "fake-model")]
    server = RestServer({"path": path})
    try:
        with RemoteMemory(server.url) as remote:
            assert remote.derived.summaries(user_id="maya") == local
    finally:
        server.stop()
    # A payload from a server that predates the fields reads as extractive.
    old = {k: v for k, v in asdict(local[0]).items() if k not in ("method", "model")}
    assert decode("derived.summaries", [old])[0].method == "extractive"


def test_the_cli_writes_abstractive_summaries_when_asked(tmp_path, fake_llm, monkeypatch):
    from click.testing import CliRunner

    from anamnesis.cli import main

    port = fake_llm.server.server_address[1]
    monkeypatch.setenv("ANAMNESIS_LLM_BASE_URL", f"http://127.0.0.1:{port}/v1")
    monkeypatch.setenv("ANAMNESIS_LLM_MODEL", "fake-model")
    fake_llm.script = lambda prompt: "Ana keeps bees on her roof."
    path = str(tmp_path / "cli.db")

    def cli(*args: str) -> str:
        result = CliRunner().invoke(main, ["--path", path, "--embedder", "edge", *args])
        assert result.exit_code == 0, result.output
        return result.output

    cli("add", "I keep bees on the roof of my flat.", "--user", "ana", "--session", "s1")
    assert json.loads(cli("consolidate", "--user", "ana"))["abstractive_summaries"] == 0
    assert fake_llm.prompts == []  # no flag, no model: the CLI stays offline
    report = json.loads(cli("consolidate", "--user", "ana", "--summaries", "abstractive"))
    assert (report["summaries"], report["abstractive_summaries"]) == (1, 1)
    (shown,) = json.loads(cli("facts", "--summaries", "--user", "ana", "--json"))
    assert shown["text"].endswith(": Ana keeps bees on her roof.")
    assert (shown["method"], shown["model"]) == ("abstractive", "fake-model")
