"""The framework integrations: LangGraph's ``BaseStore`` and the OpenAI Agents SDK's
``Session``, each tested method by method against its documented behaviour, and an
agent of each framework that stores in one run and recalls in the next (fake model,
no network)."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import TypedDict

import pytest
from store_fixtures import postgres_schema_url_fixture  # noqa: F401  (registered by name)

from anamnesis import AsyncMemory, InvalidInputError, Memory

langgraph = pytest.importorskip("langgraph.store.base")
agents = pytest.importorskip("agents")

from agents import Agent, Runner, set_tracing_disabled  # noqa: E402
from agents.memory import Session  # noqa: E402
from agents.testing import ScriptedModel, assistant_message  # noqa: E402
from langgraph.config import get_store  # noqa: E402
from langgraph.graph import END, START, StateGraph  # noqa: E402
from langgraph.store.base import BaseStore, Item, SearchItem  # noqa: E402

from anamnesis.integrations.langgraph import AnamnesisStore  # noqa: E402
from anamnesis.integrations.openai_agents import AnamnesisSession  # noqa: E402

set_tracing_disabled(True)  # the SDK would otherwise send traces to OpenAI


# LangGraph


@pytest.fixture
def store(memory: Memory) -> AnamnesisStore:
    return AnamnesisStore(memory, user_label=1)


def test_the_store_is_a_langgraph_base_store(store) -> None:
    assert isinstance(store, BaseStore)
    assert store.supports_ttl is False


def test_put_get_update_and_delete_an_item(store, memory) -> None:
    namespace = ("memories", "ana")
    assert store.get(namespace, "home") is None
    store.put(namespace, "home", {"memory": "Ana moved to Porto in May"})
    item = store.get(namespace, "home")
    assert isinstance(item, Item)
    assert (item.namespace, item.key, item.value) == (
        namespace,
        "home",
        {"memory": "Ana moved to Porto in May"},
    )
    assert item.created_at == item.updated_at
    store.put(namespace, "home", {"memory": "Ana moved to Lisbon", "since": 2025})
    updated = store.get(namespace, "home")
    assert updated.value == {"memory": "Ana moved to Lisbon", "since": 2025}
    assert updated.created_at == item.created_at < updated.updated_at
    (episode,) = memory.get_all(user_id="ana").items  # one episode per key, updated in place
    assert [v.content for v in memory.history(episode.id, user_id="ana")] == [
        "Ana moved to Porto in May",
        "memory: Ana moved to Lisbon\nsince: 2025",
    ]
    store.delete(namespace, "home")
    assert store.get(namespace, "home") is None
    assert memory.get_all(user_id="ana").total == 0
    store.delete(namespace, "home")  # deleting what is not there is no error


def test_search_by_prefix_and_filter_without_a_query(store) -> None:
    store.put(("docs", "ana", "recipes"), "bread", {"title": "Sourdough", "stars": 5})
    store.put(("docs", "ana", "recipes"), "soup", {"title": "Caldo verde", "stars": 3})
    store.put(("docs", "ana", "trips"), "porto", {"title": "Porto", "stars": 4})
    store.put(("docs", "bob", "recipes"), "cake", {"title": "Cake", "stars": 5})
    everything = store.search(("docs", "ana"))
    assert [i.key for i in everything] == ["bread", "soup", "porto"]
    assert all(isinstance(i, SearchItem) and i.score is None for i in everything)
    assert [i.key for i in store.search(("docs", "ana", "recipes"))] == ["bread", "soup"]
    assert [i.key for i in store.search(("docs", "ana"), filter={"stars": 5})] == ["bread"]
    assert [i.key for i in store.search(("docs", "ana"), filter={"stars": {"$gte": 4}})] == [
        "bread",
        "porto",
    ]
    assert [i.key for i in store.search(("docs", "ana"), filter={"stars": {"$ne": 5}})] == [
        "soup",
        "porto",
    ]
    assert [i.key for i in store.search(("docs", "ana"), limit=1, offset=1)] == ["soup"]
    with pytest.raises(InvalidInputError, match="unknown filter operator"):
        store.search(("docs", "ana"), filter={"stars": {"$near": 5}})


def test_search_by_meaning_runs_the_memory_pipeline(store) -> None:
    namespace = ("memories", "ana")
    store.put(namespace, "pet", {"memory": "Ana's cat Mimi is allergic to fish"})
    store.put(namespace, "job", {"memory": "Ana works as a nurse at the São João hospital"})
    store.put(namespace, "car", {"memory": "Ana drives a red bicycle to work"}, index=False)
    hits = store.search(namespace, query="what does Ana do for a living?", limit=2)
    assert hits[0].key == "job" and hits[0].score is not None
    assert "car" not in {h.key for h in store.search(namespace, query="bicycle")}
    assert "car" in {i.key for i in store.search(namespace)}  # still listed and filtered


def test_namespaces_are_listed_and_users_kept_apart(store) -> None:
    store.put(("docs", "ana", "recipes"), "bread", {"text": "Sourdough"})
    store.put(("docs", "ana", "trips", "2024"), "porto", {"text": "Porto"})
    store.put(("docs", "bob", "recipes"), "cake", {"text": "Cake"})
    assert store.list_namespaces(prefix=("docs", "ana")) == [
        ("docs", "ana", "recipes"),
        ("docs", "ana", "trips", "2024"),
    ]
    assert store.list_namespaces(prefix=("docs", "ana"), max_depth=3) == [
        ("docs", "ana", "recipes"),
        ("docs", "ana", "trips"),
    ]
    assert store.list_namespaces(prefix=("docs", "ana"), suffix=("2024",)) == [
        ("docs", "ana", "trips", "2024")
    ]
    assert [i.key for i in store.search(("docs", "bob"))] == ["cake"]
    assert store.get(("docs", "bob", "recipes"), "bread") is None
    with pytest.raises(InvalidInputError, match="no label 1 to name the user"):
        store.search(("docs",))


def test_the_store_works_the_same_on_postgresql(postgres_schema_url, embedder) -> None:
    with Memory(url=postgres_schema_url, embedder=embedder) as memory:
        store = AnamnesisStore(memory, user_label=1)
        store.put(("memories", "ana"), "job", {"memory": "Ana is a nurse", "stars": 5})
        store.put(("memories", "ana"), "car", {"memory": "Ana cycles", "stars": 2}, index=False)
        assert store.get(("memories", "ana"), "job").value["stars"] == 5
        assert [i.key for i in store.search(("memories", "ana"), query="nurse job")] == ["job"]
        lower = store.search(("memories", "ana"), filter={"stars": {"$lt": 3}})
        assert [i.key for i in lower] == ["car"]
        store.delete(("memories", "ana"), "job")
        assert store.get(("memories", "ana"), "job") is None


def test_a_fixed_user_takes_every_namespace(memory) -> None:
    store = AnamnesisStore(memory, user_id="ana")
    store.put(("memories",), "k", {"text": "Ana keeps bees"})
    assert memory.get_all(user_id="ana").items[0].content == "Ana keeps bees"
    assert store.list_namespaces() == [("memories",)]
    with pytest.raises(InvalidInputError, match="not both"):
        AnamnesisStore(memory, user_id="ana", user_label=0)


def test_the_async_forms_do_the_same(db_path, embedder) -> None:
    async def run() -> None:
        async with AsyncMemory(path=db_path, embedder=embedder) as memory:
            store = AnamnesisStore(memory, user_label=1)
            await store.aput(("memories", "ana"), "tea", {"memory": "Ana drinks green tea"})
            item = await store.aget(("memories", "ana"), "tea")
            assert item.value == {"memory": "Ana drinks green tea"}
            hits = await store.asearch(("memories", "ana"), query="favourite drink")
            assert [h.key for h in hits] == ["tea"]
            assert await store.alist_namespaces(prefix=("memories", "ana")) == [("memories", "ana")]
            await store.adelete(("memories", "ana"), "tea")
            assert await store.aget(("memories", "ana"), "tea") is None

    asyncio.run(run())


class _State(TypedDict):
    user: str
    said: str
    recalled: list[str]


def _graph(store: AnamnesisStore):
    """A graph whose one node remembers what the user said and recalls what fits."""

    def remember_and_recall(state: _State) -> dict:
        memories = get_store()
        namespace = ("memories", state["user"])
        found = memories.search(namespace, query=state["said"], limit=1)
        memories.put(namespace, f"m{len(memories.search(namespace))}", {"text": state["said"]})
        return {"recalled": [hit.value["text"] for hit in found]}

    builder = StateGraph(_State)
    builder.add_node("remember_and_recall", remember_and_recall)
    builder.add_edge(START, "remember_and_recall")
    builder.add_edge("remember_and_recall", END)
    return builder.compile(store=store)


def test_a_langgraph_agent_recalls_in_a_second_run_what_it_stored_in_the_first(
    tmp_path: Path, embedder
) -> None:
    path = tmp_path / "graph.db"
    with Memory(path=path, embedder=embedder) as memory:
        first = _graph(AnamnesisStore(memory, user_label=1)).invoke(
            {"user": "ana", "said": "My daughter Inês starts school in Porto", "recalled": []}
        )
    assert first["recalled"] == []
    with Memory(path=path, embedder=embedder) as memory:  # a new process, the same file
        second = _graph(AnamnesisStore(memory, user_label=1)).invoke(
            {"user": "ana", "said": "Which school does my daughter go to?", "recalled": []}
        )
        other = _graph(AnamnesisStore(memory, user_label=1)).invoke(
            {"user": "bob", "said": "Which school does my daughter go to?", "recalled": []}
        )
    assert second["recalled"] == ["My daughter Inês starts school in Porto"]
    assert other["recalled"] == []


# OpenAI Agents SDK


def test_the_session_follows_the_sdk_protocol(memory) -> None:
    session = AnamnesisSession("chat-1", memory, user_id="ana")
    assert isinstance(session, Session)

    async def run() -> None:
        assert await session.get_items() == []
        assert await session.pop_item() is None
        items = [
            {"role": "user", "content": "I moved to Porto"},
            {
                "type": "message",
                "role": "assistant",
                "id": "msg_1",
                "status": "completed",
                "content": [{"type": "output_text", "text": "Parabéns! 🎉", "annotations": []}],
            },
            {
                "type": "function_call",
                "call_id": "c1",
                "name": "weather",
                "arguments": '{"city": "Porto"}',
            },
            {"type": "function_call_output", "call_id": "c1", "output": "sunny, 24 °C"},
        ]
        await session.add_items(items[:2])
        await session.add_items(items[2:])
        assert await session.get_items() == items  # verbatim, in order
        assert await session.get_items(limit=2) == items[2:]
        assert await session.pop_item() == items[3]
        assert await session.get_items() == items[:3]
        other = AnamnesisSession("chat-2", memory, user_id="ana")
        await other.add_items([{"role": "user", "content": "another chat"}])
        await session.clear_session()
        assert await session.get_items() == []
        assert await other.get_items() == [{"role": "user", "content": "another chat"}]

    asyncio.run(run())
    contents = [e.content for e in memory.get_all(user_id="ana").items]
    assert contents == ["another chat"]


def test_session_items_are_searchable_long_term_memory(memory) -> None:
    session = AnamnesisSession("chat-1", memory, user_id="ana")
    asyncio.run(
        session.add_items(
            [
                {"role": "user", "content": "My cat Mimi is allergic to fish"},
                {"type": "function_call", "call_id": "c", "name": "vet", "arguments": "{}"},
            ]
        )
    )
    (hit, *_) = memory.search("what is Mimi allergic to?", user_id="ana")
    assert hit.episode.content == "My cat Mimi is allergic to fish"
    assert hit.episode.session_id == "chat-1" and hit.episode.role == "user"
    episodes = memory.get_all(user_id="ana").items
    assert (episodes[1].content, episodes[1].role) == ("vet({})", "tool")


def test_an_agents_sdk_agent_recalls_its_history_in_a_second_run(tmp_path, embedder) -> None:
    path = tmp_path / "agent.db"

    async def run(said: str, answer: str) -> tuple[str, list]:
        model = ScriptedModel([[assistant_message(answer)]])
        agent = Agent(name="assistant", instructions="Be brief.", model=model)
        async with AsyncMemory(path=path, embedder=embedder) as memory:
            session = AnamnesisSession("chat-7", memory, user_id="ana")
            result = await Runner.run(agent, said, session=session)
        return result.final_output, model.calls[0].input

    output, seen = asyncio.run(run("My sister Rita lives in Braga", "Noted: Rita, Braga."))
    assert output == "Noted: Rita, Braga."
    assert [item["content"] for item in seen] == ["My sister Rita lives in Braga"]
    output, seen = asyncio.run(run("Where does my sister live?", "In Braga."))
    texts = [str(item.get("content")) for item in seen]
    assert "My sister Rita lives in Braga" in texts[0]
    assert "Noted: Rita, Braga." in texts[1]
    assert texts[-1] == "Where does my sister live?"
