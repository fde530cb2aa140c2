"""Decomposition by an LLM: the separate questions a multi-part question asks.

The query feature ``"decompose-llm"``, beside the rule-based ``"decompose"``
(``understanding.decompose``). The rules split what their patterns see ("Jon and
Gina", two questions in one); an LLM can also split what a question only implies
("How do Sam's and Evan's health scares compare?"). Each sub-question runs through the
lexical and dense channels like a rule-made one, and the question itself stays in every
channel, so a sub-question can add candidates but never remove them.

Only available when an OpenAI-compatible endpoint is configured
(``ANAMNESIS_LLM_BASE_URL`` and ``ANAMNESIS_LLM_MODEL``): naming the feature without
one fails when the ``Retriever`` is built (``InvalidInputError``), and an endpoint
that fails at search time raises ``LLMError``; never silently.
"""

from __future__ import annotations

import re

from ..llm import ChatClient
from .request import SearchRequest

#: The one prompt used to split a question.
PROMPT = (
    "A search over a person's past conversations must answer the question below. "
    "If it asks about several things, people or times, write each part as its own "
    "self-contained question, one per line, at most {count}. If it asks one thing, "
    "reply with the question itself. Reply with the questions only.\n\n"
    "Question: {question}"
)
#: Tokens the reply may take.
MAX_TOKENS = 160
#: A list marker the model may put before a line ("1.", "-", "*", "2)").
_MARKER = re.compile(r"^\s*(?:[-*•]|\d+[.)])\s*")


def parse_subqueries(reply: str, question: str, count: int) -> list[str]:
    """The sub-questions of an LLM's ``reply``: one per non-empty line, list markers
    removed, the question itself and repeats left out, at most ``count``."""
    seen = {question.strip().casefold()}
    out = []
    for line in reply.splitlines():
        text = _MARKER.sub("", line).strip()
        if text and text.casefold() not in seen:
            seen.add(text.casefold())
            out.append(text)
    return out[:count]


def llm_subqueries(request: SearchRequest, count: int) -> list[str]:
    """The LLM's sub-questions of the search's question (one call per search, shared by
    the channels through ``request.memo``)."""
    if "llm_subqueries" not in request.memo:
        question = request.analysis.text
        reply, _ = ChatClient.from_env().complete(
            [{"role": "user", "content": PROMPT.format(count=count, question=question)}],
            max_tokens=MAX_TOKENS,
        )
        request.memo["llm_subqueries"] = parse_subqueries(reply, question, count)
    return request.memo["llm_subqueries"]
