"""HyDE: search with the embedding of a hypothetical answer written by an LLM.

Only available when an OpenAI-compatible endpoint is configured (``ANAMNESIS_LLM_BASE_URL``
and ``ANAMNESIS_LLM_MODEL``, as for ``bench --qa``); naming the ``hyde`` channel
without one fails when the Retriever is built (InvalidInputError), never silently.
The hypothetical turn is embedded like a stored one and searched by cosine; the
real question stays in every other channel, so an invented detail can only add
candidates, not remove them.
"""

from __future__ import annotations

from ..llm import ChatClient
from ..store.base import Candidate
from .request import SearchRequest

#: The one prompt used to write a hypothetical memory.
PROMPT = (
    "Write one short chat message, in the first person, that a participant of a past "
    "conversation could have written and that would answer this question. Reply with "
    "the message only.\n\nQuestion: {question}"
)
#: Tokens the hypothetical message may take.
MAX_TOKENS = 80


def hypothesis(request: SearchRequest) -> str:
    """The LLM's hypothetical answer to the question (one call per search, memoised)."""
    if "hyde_text" not in request.memo:
        text, _ = ChatClient.from_env().complete(
            [{"role": "user", "content": PROMPT.format(question=request.analysis.text)}],
            max_tokens=MAX_TOKENS,
        )
        request.memo["hyde_text"] = text.strip() or request.analysis.text
    return request.memo["hyde_text"]


def hyde(request: SearchRequest, limit: int) -> list[Candidate]:
    """Episodes by cosine similarity to the hypothetical answer."""
    vector = request.vector_for(hypothesis(request))
    return request.store.dense_search(vector, request.scope, request.filters, limit)
