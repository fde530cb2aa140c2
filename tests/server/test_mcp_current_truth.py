"""A newcomer's MCP session (tests/fixtures/mcp_newcomer.json, written for the project):
50 notes stored through `remember` in two sessions two months apart, then the questions
an agent asks. Through the SDK's client over stdio, with the default embedder and
preset, `recall` should put what is true now before what it replaced, and
`get_context` should show it.

The scenario is a test, not a dev set: nothing was tuned on it, though its one miss
("Where does Miguel work now?" answered with Joana's new job) suggested reading the
speaker of the notes as their subject, a part measured on the agent-life dev set
before it joined the default (docs/experiments/2026-11-26-an-agents-life.md). The test
holds the default to what the issue asks: every question with a current note first,
none with a superseded one above it.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import sys
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("mcp")

from mcp import ClientSession, StdioServerParameters  # noqa: E402
from mcp.client.stdio import stdio_client  # noqa: E402

SCENARIO = json.loads(
    (Path(__file__).parent.parent / "fixtures" / "mcp_newcomer.json").read_text(encoding="utf-8")
)
#: Questions whose current note the default puts first, of 8 ...
CURRENT_FIRST = 8
#: ... and those with a superseded note above the first current one, at most.
SUPERSEDED_ABOVE = 0


def _text(result: Any) -> str:
    return "\n".join(part.text for part in result.content if hasattr(part, "text"))


async def _ask(store: Path) -> tuple[list[list[str]], list[str], dict[str, str]]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(Path.cwd()), env.get("PYTHONPATH")]))
    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "anamnesis.cli", "--path", str(store), "mcp", "--user", "me"],
        env=env,
    )
    async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
        await session.initialize()
        ids: dict[str, str] = {}
        for item in SCENARIO["items"]:
            arguments = {
                k: item[k]
                for k in ("content", "speaker", "role", "session_id", "event_time")
                if item.get(k)
            }
            answer = _text(await session.call_tool("remember", arguments))
            (episode_id,) = re.findall(r"\[(ep_\w+)\]", answer)
            ids[episode_id] = item["id"]
        ranked, digests = [], []
        for question in SCENARIO["questions"]:
            text = _text(await session.call_tool("recall", {"query": question["question"]}))
            found = re.findall(r"^\d+\. \[(ep_\w+)\]", text, flags=re.MULTILINE)
            ranked.append([ids[i] for i in found])
            digests.append(
                _text(await session.call_tool("get_context", {"question": question["question"]}))
            )
        contents = {item["id"]: item["content"] for item in SCENARIO["items"]}
        return ranked, digests, contents


def _stale_above(ranked: list[str], gold: set[str], stale: set[str]) -> bool:
    first_gold = next((r for r, item in enumerate(ranked) if item in gold), len(ranked))
    return any(item in stale for item in ranked[:first_gold])


def test_recall_and_get_context_put_the_current_note_first(tmp_path: Path) -> None:
    ranked, digests, contents = asyncio.run(_ask(tmp_path / "newcomer.db"))
    questions = SCENARIO["questions"]
    first = sum(r[:1] != [] and r[0] in q["gold"] for r, q in zip(ranked, questions, strict=True))
    above = sum(
        _stale_above(r, set(q["gold"]), set(q["stale"]))
        for r, q in zip(ranked, questions, strict=True)
    )
    assert first >= CURRENT_FIRST, ranked
    assert above <= SUPERSEDED_ABOVE, ranked
    # The digest is dated and in time order (docs/context-format.md): the reader sees
    # the current note, with its date after the one it replaced.
    for digest, q in zip(digests, questions, strict=True):
        assert any(contents[g][:60] in digest for g in q["gold"]), q["question"]
