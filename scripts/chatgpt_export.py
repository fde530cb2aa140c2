"""Write a synthetic ChatGPT export (``conversations.json``) of a given size, to
measure ``anamnesis import --from chatgpt`` (BENCHMARKS.md, "Import").

    python scripts/chatgpt_export.py --messages 100000 --out /tmp/export/conversations.json
    time anamnesis --path /tmp/import.db --embedder edge import --from chatgpt /tmp/export

Conversations of 10 to 90 messages alternate user and assistant turns of varied
length, built from a seeded vocabulary; one in five has an edited question (an
abandoned branch) and one in ten a tool call with its output, as real exports do.
``--messages`` counts the turns kept (the branch at ``current_node``).
"""

from __future__ import annotations

import argparse
import json
import random
import uuid
from pathlib import Path

WORDS = (
    "garden tomato trip Lisbon train budget recipe bread sourdough python script deploy "
    "server backup invoice meeting sister birthday gift running knee doctor insurance "
    "flat lease Porto weekend concert guitar lesson novel chapter cat vet appointment "
    "salary review promotion flight hotel museum coffee bike repair tax return holiday"
).split()


def _text(rng: random.Random, low: int, high: int) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(rng.randint(low, high))).capitalize() + "."


def _node(node_id, parent, role, content, when, recipient="all"):
    return {
        "id": node_id,
        "message": {
            "id": node_id,
            "author": {"role": role, "name": None, "metadata": {}},
            "create_time": when,
            "content": content,
            "status": "finished_successfully",
            "metadata": {},
            "recipient": recipient,
        },
        "parent": parent,
        "children": [],
    }


def conversation(rng: random.Random, turns: int, start: float) -> dict:
    root = str(uuid.UUID(int=rng.getrandbits(128)))
    mapping = {root: {"id": root, "message": None, "parent": None, "children": []}}
    parent, when = root, start

    def add(role, content, recipient="all"):
        nonlocal parent, when
        node_id = str(uuid.UUID(int=rng.getrandbits(128)))
        when += rng.uniform(5, 120)
        mapping[node_id] = _node(node_id, parent, role, content, when, recipient)
        mapping[parent]["children"].append(node_id)
        parent = node_id
        return node_id

    for turn in range(turns):
        role = "user" if turn % 2 == 0 else "assistant"
        if role == "user" and turn == 2 and rng.random() < 0.2:
            draft = add("user", {"content_type": "text", "parts": [_text(rng, 5, 30)]})
            parent = mapping[draft]["parent"]  # the edit replaces the draft: a sibling
        if role == "assistant" and rng.random() < 0.1:
            add("assistant", {"content_type": "code", "text": "print(1)"}, recipient="python")
            add("tool", {"content_type": "execution_output", "text": "1"})
        low, high = (5, 40) if role == "user" else (20, 200)
        add(role, {"content_type": "text", "parts": [_text(rng, low, high)]})
    conversation_id = str(uuid.UUID(int=rng.getrandbits(128)))
    return {
        "title": _text(rng, 2, 5),
        "create_time": start,
        "update_time": when,
        "mapping": mapping,
        "current_node": parent,
        "conversation_id": conversation_id,
        "id": conversation_id,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--messages", type=int, default=100_000, help="Turns kept, in total.")
    parser.add_argument("--out", type=Path, required=True, help="The conversations.json to write.")
    parser.add_argument("--seed", type=int, default=36)
    args = parser.parse_args()
    rng = random.Random(args.seed)
    conversations, left, start = [], args.messages, 1_600_000_000.0
    while left > 0:
        turns = min(left, rng.randint(10, 90))
        conversations.append(conversation(rng, turns, start))
        left -= turns
        start += rng.uniform(3_600, 86_400 * 3)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(conversations), encoding="utf-8")
    print(f"wrote {args.messages} messages in {len(conversations)} conversations to {args.out}")


if __name__ == "__main__":
    main()
